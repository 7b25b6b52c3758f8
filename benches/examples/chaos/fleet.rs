//! The fleet of worker processes, what their logs say, and the steady producer.

use std::collections::HashSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tenure_core::{EnqueueParams, ItemId, NewItem, QueueName, Store};

use crate::{now_us, BoxError, AHEAD, ENQUEUE_BATCH, QUEUE};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Run,
    Accepted,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Event {
    pub(crate) kind: Kind,
    pub(crate) at_us: u64,
    pub(crate) id: ItemId,
    pub(crate) lease: i64,
    pub(crate) process: usize,
}

/// The fleet of worker processes and what their logs said so far.
pub(crate) struct Fleet {
    pub(crate) exe: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) store: String,
    pub(crate) url: String,
    pub(crate) wait_replicas: u32,
    pub(crate) work: Duration,
    pub(crate) slots: Vec<Child>,
    /// Per process incarnation: its log and how far it was read.
    pub(crate) logs: Vec<(PathBuf, u64)>,
    /// Which incarnation each slot runs.
    pub(crate) incarnation: Vec<usize>,
    pub(crate) events: Vec<Event>,
    pub(crate) done: HashSet<ItemId>,
    pub(crate) last_done_us: u64,
}

impl Fleet {
    pub(crate) fn new(
        exe: PathBuf,
        dir: PathBuf,
        store: &str,
        url: String,
        wait_replicas: u32,
        work: Duration,
    ) -> Fleet {
        Fleet {
            exe,
            dir,
            store: store.to_owned(),
            url,
            wait_replicas,
            work,
            slots: Vec::new(),
            logs: Vec::new(),
            incarnation: Vec::new(),
            events: Vec::new(),
            done: HashSet::new(),
            last_done_us: now_us(),
        }
    }

    pub(crate) fn spawn(&mut self) -> Result<(Child, usize), BoxError> {
        let n = self.logs.len();
        let log = self.dir.join(format!("worker-{n}.log"));
        let stderr = File::create(self.dir.join(format!("worker-{n}.err")))?;
        let child = Command::new(&self.exe)
            .args(["worker", &self.store, &self.url])
            .arg(&log)
            .arg(self.wait_replicas.to_string())
            .arg(self.work.as_millis().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()?;
        self.logs.push((log, 0));
        Ok((child, n))
    }

    pub(crate) fn start(&mut self, workers: usize) -> Result<(), BoxError> {
        for _ in 0..workers {
            let (child, n) = self.spawn()?;
            self.slots.push(child);
            self.incarnation.push(n);
        }
        Ok(())
    }

    /// SIGKILLs the process in `slot` and starts a new one in its place; answers the
    /// killed incarnation.
    pub(crate) fn kill_and_replace(&mut self, slot: usize) -> Result<usize, BoxError> {
        let killed = self.incarnation[slot];
        self.slots[slot].kill()?;
        self.slots[slot].wait()?;
        let (child, n) = self.spawn()?;
        self.slots[slot] = child;
        self.incarnation[slot] = n;
        Ok(killed)
    }

    pub(crate) fn stop(&mut self) {
        for child in &mut self.slots {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Reads what every log gained since the last call.
    pub(crate) fn read(&mut self) -> Result<(), BoxError> {
        for (process, (path, offset)) in self.logs.iter_mut().enumerate() {
            let Ok(mut file) = File::open(&*path) else {
                continue;
            };
            file.seek(SeekFrom::Start(*offset))?;
            let mut text = String::new();
            file.read_to_string(&mut text)?;
            // Only whole lines: a line being written is read next time.
            let Some(end) = text.rfind('\n') else {
                continue;
            };
            for line in text[..=end].lines() {
                let event = parse(line, process)
                    .ok_or_else(|| format!("{}: bad line {line:?}", path.display()))?;
                if event.kind == Kind::Accepted {
                    self.done.insert(event.id);
                    self.last_done_us = self.last_done_us.max(event.at_us);
                }
                self.events.push(event);
            }
            *offset += end as u64 + 1;
        }
        Ok(())
    }
}

impl Drop for Fleet {
    /// A run that stops early (an error, a panic) leaves no worker behind.
    fn drop(&mut self) {
        self.stop();
    }
}

pub(crate) fn parse(line: &str, process: usize) -> Option<Event> {
    let mut words = line.split(' ');
    let kind = match words.next()? {
        "R" => Kind::Run,
        "A" => Kind::Accepted,
        _ => return None,
    };
    let at_us = words.next()?.parse().ok()?;
    let id = words.next()?.parse().ok()?;
    let _attempt: u32 = words.next()?.parse().ok()?;
    let lease = words.next()?.parse().ok()?;
    Some(Event {
        kind,
        at_us,
        id,
        lease,
        process,
    })
}

/// What the producer has enqueued: acknowledged ids, and ids whose enqueue got no
/// answer (maybe written, maybe not).
#[derive(Default)]
pub(crate) struct Produced {
    pub(crate) acked: Vec<ItemId>,
    pub(crate) unanswered: Vec<ItemId>,
}

/// Enqueues `items` items in batches at `rate` items/s, as a steady producer would,
/// keeping at most [`AHEAD`] ahead of `done`; an enqueue that errs is counted
/// unanswered and the next batch tried 100 ms later.
pub(crate) async fn produce(
    store: Arc<dyn Store>,
    items: usize,
    rate: f64,
    done: Arc<AtomicU64>,
    produced: Arc<Mutex<Produced>>,
    finished: Arc<AtomicBool>,
) -> Result<(), BoxError> {
    let queue = QueueName::new(QUEUE)?;
    let started = Instant::now();
    let mut acked = 0usize;
    while acked < items {
        let due = (started.elapsed().as_secs_f64() * rate) as usize;
        if acked >= due || acked as u64 > done.load(Ordering::Relaxed) + AHEAD {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        let n = ENQUEUE_BATCH.min(items - acked).min(due - acked);
        let batch: Vec<NewItem> = (0..n)
            .map(|_| NewItem::new(queue.clone(), &b"chaos"[..]))
            .collect();
        let ids: Vec<ItemId> = batch.iter().map(|i| i.id).collect();
        let answered = store.enqueue(EnqueueParams::new(batch)).await.is_ok();
        {
            let mut p = produced.lock().unwrap_or_else(|p| p.into_inner());
            if answered {
                p.acked.extend(ids);
            } else {
                p.unanswered.extend(ids);
            }
        }
        if answered {
            acked += n;
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    finished.store(true, Ordering::Release);
    Ok(())
}
