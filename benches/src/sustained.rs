//! The sustained-load harness: a producer enqueues single items at a fixed rate while a
//! consumer (the worker runtime, or a raw loop) works them, and every item's pickup
//! latency is recorded: the time its handler started minus the time its enqueue call
//! was sent.
//!
//! Each payload carries its sequence number and its enqueue time ([`payload`]), read on
//! one process-wide [`Epoch`]; [`Pickups::record`] reads the time first, then the
//! payload. The closing check ([`Pickups::summary`]) fails unless every enqueued item
//! was picked up exactly once. Items of the warm-up are worked but not counted.
//!
//! ```no_run
//! # async fn run() -> Result<(), tenure_benches::BenchError> {
//! use std::time::Duration;
//! use tenure_benches::raw::memory::RawMemory;
//! use tenure_benches::sustained::{produce, Epoch, Pickups, Plan};
//!
//! let plan = Plan::new(500, Duration::from_secs(1), Duration::from_secs(5));
//! let epoch = Epoch::new();
//! let pickups = Pickups::new(epoch);
//! let queue = RawMemory::new();
//! // ... start consumers that call `pickups.record(payload)` on each item ...
//! let sent = produce(&plan, epoch, |p| {
//!     queue.push(p);
//!     std::future::ready(Ok(()))
//! })
//! .await?;
//! pickups.wait_for(sent, Duration::from_secs(30)).await?;
//! println!("{}", pickups.summary(&plan, sent)?);
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tenure_core::{
    ClaimParams, CompleteParams, ItemId, NewItem, OwnerId, QueueName, Store, StoreExt, TokenOutcome,
};
use tenure_runtime::{Job, JobError, Worker};

use crate::{BenchError, Percentiles, LEASE};

/// The producer's schedule: `rate` items per second, for `warmup` (worked, not counted)
/// then for `measure`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Items enqueued per second.
    pub rate: u32,
    /// How long the producer runs before the items that count.
    pub warmup: Duration,
    /// How long the producer runs with items that count.
    pub measure: Duration,
    /// Producers sending at once, each every `producers`-th item of the schedule (as
    /// several application processes enqueue side by side); at least 1. One producer
    /// awaits each enqueue before the next, so its rate is capped by one round trip.
    pub producers: usize,
}

impl Plan {
    /// `rate` items per second for `warmup`, then for `measure`.
    pub fn new(rate: u32, warmup: Duration, measure: Duration) -> Self {
        Plan {
            rate,
            warmup,
            measure,
            producers: 1,
        }
    }

    /// The same schedule sent by `n` producers at once (at least 1).
    pub fn producers(mut self, n: usize) -> Self {
        self.producers = n.max(1);
        self
    }

    /// Items of the warm-up: sequence numbers below this are not counted.
    pub fn warmup_items(&self) -> u64 {
        (self.warmup.as_secs_f64() * f64::from(self.rate)) as u64
    }

    /// Every item the producer enqueues.
    pub fn items(&self) -> u64 {
        ((self.warmup + self.measure).as_secs_f64() * f64::from(self.rate)) as u64
    }

    /// When item `seq` is due, from the producer's start.
    fn due(&self, seq: u64) -> Duration {
        Duration::from_secs_f64(seq as f64 / f64::from(self.rate.max(1)))
    }
}

/// The clock every stamp is read on: microseconds since the epoch was made. Copy it to
/// the producer and to every consumer of one run.
#[derive(Clone, Copy, Debug)]
pub struct Epoch(Instant);

impl Epoch {
    /// An epoch starting now.
    pub fn new() -> Self {
        Epoch(Instant::now())
    }

    /// Microseconds since the epoch.
    pub fn now_us(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

impl Default for Epoch {
    fn default() -> Self {
        Epoch::new()
    }
}

/// The payload of item `seq` enqueued at `stamp_us` on the run's [`Epoch`]: both as
/// eight little-endian bytes.
pub fn payload(seq: u64, stamp_us: u64) -> Vec<u8> {
    let mut p = Vec::with_capacity(16);
    p.extend_from_slice(&seq.to_le_bytes());
    p.extend_from_slice(&stamp_us.to_le_bytes());
    p
}

/// `(seq, stamp_us)` of a [`payload`]; `None` for anything else.
pub fn read_payload(p: &[u8]) -> Option<(u64, u64)> {
    let seq = p.get(0..8)?.try_into().ok()?;
    let stamp = p.get(8..16)?.try_into().ok()?;
    (p.len() == 16).then(|| (u64::from_le_bytes(seq), u64::from_le_bytes(stamp)))
}

/// Enqueues [`Plan::items`] items, item `seq` due `seq / rate` seconds after the call
/// (a late item is sent at once, never skipped), each through one `enqueue(payload)`
/// awaited before the next; the payload is stamped just before the call. Returns how
/// many were enqueued. Must run inside a tokio runtime (it sleeps on tokio's timer,
/// whose resolution is 1 ms).
pub async fn produce<F, Fut>(plan: &Plan, epoch: Epoch, mut enqueue: F) -> Result<u64, BenchError>
where
    F: FnMut(Vec<u8>) -> Fut,
    Fut: Future<Output = Result<(), BenchError>>,
{
    let start = tokio::time::Instant::now();
    let items = plan.items();
    for seq in 0..items {
        tokio::time::sleep_until(start + plan.due(seq)).await;
        enqueue(payload(seq, epoch.now_us())).await?;
    }
    Ok(items)
}

#[derive(Clone, Copy, Debug)]
struct Pickup {
    seq: u64,
    stamp_us: u64,
    at_us: u64,
}

/// Every pickup of one run, recorded by the consumers.
#[derive(Debug)]
pub struct Pickups {
    epoch: Epoch,
    seen: Mutex<Vec<Pickup>>,
    count: AtomicU64,
}

impl Pickups {
    /// No pickups yet, stamped on `epoch`.
    pub fn new(epoch: Epoch) -> Self {
        Pickups {
            epoch,
            seen: Mutex::new(Vec::new()),
            count: AtomicU64::new(0),
        }
    }

    /// Records that the item carrying `payload` was picked up now. Call it first thing
    /// in the handler. Fails on a payload [`payload`] did not write.
    pub fn record(&self, payload: &[u8]) -> Result<(), BenchError> {
        let at_us = self.epoch.now_us();
        let (seq, stamp_us) = read_payload(payload)
            .ok_or_else(|| BenchError::Check(format!("a payload of {} bytes", payload.len())))?;
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Pickup {
                seq,
                stamp_us,
                at_us,
            });
        self.count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Pickups recorded so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Waits (checking every 10 ms) until `n` pickups are recorded; fails after
    /// `timeout`.
    pub async fn wait_for(&self, n: u64, timeout: Duration) -> Result<(), BenchError> {
        let deadline = Instant::now() + timeout;
        while self.count() < n {
            if Instant::now() >= deadline {
                return Err(BenchError::Check(format!(
                    "{} of {n} items picked up after {timeout:?}",
                    self.count()
                )));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// Checks that each of the `enqueued` items (sequence numbers `0..enqueued`) was
    /// picked up exactly once, then reads the latencies of the items after the warm-up.
    pub fn summary(&self, plan: &Plan, enqueued: u64) -> Result<Summary, BenchError> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut times = vec![0u32; usize::try_from(enqueued).unwrap_or(usize::MAX)];
        for p in &seen {
            match times.get_mut(usize::try_from(p.seq).unwrap_or(usize::MAX)) {
                Some(t) => *t += 1,
                None => return Err(BenchError::Check(format!("item {} was never sent", p.seq))),
            }
        }
        let missing = times.iter().filter(|t| **t == 0).count();
        let twice = times.iter().filter(|t| **t > 1).count();
        if missing > 0 || twice > 0 {
            return Err(BenchError::Check(format!(
                "of {enqueued} items, {missing} never picked up and {twice} picked up more than once"
            )));
        }
        let counted: Vec<Pickup> = seen
            .into_iter()
            .filter(|p| p.seq >= plan.warmup_items())
            .collect();
        let mut latencies: Vec<u64> = counted
            .iter()
            .map(|p| p.at_us.saturating_sub(p.stamp_us))
            .collect();
        let latency = Percentiles::of(&mut latencies)
            .ok_or_else(|| BenchError::Check("no item after the warm-up".to_owned()))?;
        let first_sent = counted.iter().map(|p| p.stamp_us).min().unwrap_or(0);
        let last_picked = counted.iter().map(|p| p.at_us).max().unwrap_or(0);
        let span = Duration::from_micros(last_picked.saturating_sub(first_sent).max(1));
        Ok(Summary {
            items: counted.len(),
            latency,
            per_sec: counted.len() as f64 / span.as_secs_f64(),
        })
    }
}

/// What one sustained run measured over the items after the warm-up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Items counted.
    pub items: usize,
    /// Pickup latency in microseconds.
    pub latency: Percentiles,
    /// Items counted divided by the time from the first one's enqueue to the last
    /// one's pickup: the rate when the consumer keeps up, less when it falls behind.
    pub per_sec: f64,
}

/// `p50 .. ms  p99 .. ms  max .. ms  .. items/s (n items)`.
impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |us: u64| us as f64 / 1000.0;
        write!(
            f,
            "p50 {:7.2} ms  p99 {:7.2} ms  max {:7.2} ms  {:6.0} items/s ({} items)",
            ms(self.latency.p50),
            ms(self.latency.p99),
            ms(self.latency.max),
            self.per_sec,
            self.items
        )
    }
}

/// What [`run_worker`] and [`run_store`] measured, and the ids of every item the
/// producer enqueued (for [`Tally::check`](crate::tally::Tally::check)).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Sustained {
    /// Pickup latency and rate over the items after the warm-up.
    pub summary: Summary,
    /// Every item enqueued, in order.
    pub enqueued: Vec<ItemId>,
}

fn enqueue_err(source: tenure_core::Error) -> BenchError {
    BenchError::Store {
        op: "enqueue",
        source,
    }
}

/// Produces `plan` on `queue` through `store` (one `enqueue` per item, from
/// [`Plan::producers`] producers at once, producer `k` sending items `k`, `k + n`, ...
/// each when it is due), recording each id; then waits up to `settle` for every pickup.
async fn produce_on<S: Store>(
    store: &S,
    queue: &QueueName,
    plan: &Plan,
    epoch: Epoch,
    pickups: &Pickups,
    settle: Duration,
) -> Result<Vec<ItemId>, BenchError> {
    let n = plan.producers.max(1);
    let items = plan.items();
    let start = tokio::time::Instant::now();
    let ids = Mutex::new(Vec::with_capacity(usize::try_from(items).unwrap_or(0)));
    let producer = |k: usize| {
        let ids = &ids;
        async move {
            for seq in (k as u64..items).step_by(n) {
                tokio::time::sleep_until(start + plan.due(seq)).await;
                let item = NewItem::new(queue.clone(), payload(seq, epoch.now_us()));
                let id = item.id;
                store.enqueue_one(item).await.map_err(enqueue_err)?;
                ids.lock().unwrap_or_else(|p| p.into_inner()).push((seq, id));
            }
            Ok::<(), BenchError>(())
        }
    };
    futures_util::future::try_join_all((0..n).map(producer)).await?;
    pickups.wait_for(items, settle).await?;
    let mut ids = ids.into_inner().unwrap_or_else(|p| p.into_inner());
    ids.sort_unstable_by_key(|(seq, _)| *seq);
    Ok(ids.into_iter().map(|(_, id)| id).collect())
}

/// Sustained load through the worker runtime: a [`Worker`] of `concurrency` slots on
/// a clone of `store` (default poll and finalize batching, maintenance off) whose
/// handler records each pickup, while the producer enqueues `plan` through
/// `producer`. With `producer` the same handle as `store`, the in-process wake signal
/// wakes the claim loop, as in an application that enqueues and works in one process;
/// with another handle (a second `PgStore` with LISTEN on), only the store's
/// cross-process wake-up does.
///
/// Waits for the worker's first poll before producing (the claim loop registers the
/// instance first), and up to `settle` after the producer stops for the last
/// pickups; then shuts the worker down and fails unless every item was picked up once,
/// claimed once and completed, with nothing failed, lost, released or abandoned.
pub async fn run_worker<S: Store + Clone, P: Store>(
    store: &S,
    producer: &P,
    queue: &QueueName,
    plan: &Plan,
    concurrency: usize,
    settle: Duration,
) -> Result<Sustained, BenchError> {
    let epoch = Epoch::new();
    let pickups = Arc::new(Pickups::new(epoch));
    let recorder = pickups.clone();
    let worker = Worker::builder(store.clone())
        .queue(queue.clone())
        .concurrency(concurrency)
        .maintenance(false)
        .handler(move |job: Job| {
            let recorder = recorder.clone();
            async move {
                recorder
                    .record(job.payload())
                    .map_err(|e| JobError::permanent(e.to_string()))
            }
        })
        .spawn()
        .map_err(|source| BenchError::Store {
            op: "worker spawn",
            source,
        })?;
    while worker.metrics().polls == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let produced = produce_on(producer, queue, plan, epoch, &pickups, settle).await;
    let report = worker.shutdown(Duration::from_secs(10)).await;
    let enqueued = produced?;
    let sent = enqueued.len() as u64;
    let m = report.metrics;
    if !report.drained
        || report.released > 0
        || report.abandoned > 0
        || (m.claimed, m.completed, m.failed, m.lost, m.self_stopped) != (sent, sent, 0, 0, 0)
    {
        return Err(BenchError::Check(format!(
            "the worker should have claimed and completed each of {sent} items once: {report:?}"
        )));
    }
    let summary = pickups.summary(plan, sent)?;
    Ok(Sustained { summary, enqueued })
}

/// Sustained load through the store: `workers` tasks, each on a clone of `store`
/// with owner `w{index}`, loop `claim(batch)`, record the pickup of every item
/// claimed, and `complete` the batch (every answer must be `Accepted`); an empty claim
/// sleeps `poll` and claims again. The producer enqueues `plan` through `store`.
///
/// Waits up to `settle` after the producer stops for the last pickups, then stops the
/// loops and fails unless every item was picked up exactly once. Must run inside a
/// tokio runtime.
pub async fn run_store<S: Store + Clone>(
    store: &S,
    queue: &QueueName,
    plan: &Plan,
    (workers, batch): (usize, u32),
    poll: Duration,
    settle: Duration,
) -> Result<Sustained, BenchError> {
    let epoch = Epoch::new();
    let pickups = Arc::new(Pickups::new(epoch));
    let stop = Arc::new(AtomicBool::new(false));
    let loops: Vec<_> = (0..workers)
        .map(|w| {
            let (store, queue, pickups, stop) =
                (store.clone(), queue.clone(), pickups.clone(), stop.clone());
            tokio::spawn(async move {
                let owner = OwnerId::new(format!("w{w}")).map_err(|source| BenchError::Store {
                    op: "owner id",
                    source,
                })?;
                while !stop.load(Ordering::Relaxed) {
                    let leases = store
                        .claim(ClaimParams::new(queue.clone(), owner.clone(), batch, LEASE))
                        .await
                        .map_err(|source| BenchError::Store {
                            op: "claim",
                            source,
                        })?;
                    if leases.is_empty() {
                        tokio::time::sleep(poll).await;
                        continue;
                    }
                    for lease in &leases {
                        pickups.record(&lease.item.payload)?;
                    }
                    let tokens = leases.iter().map(|l| l.token).collect();
                    let outcomes =
                        store
                            .complete(CompleteParams::new(tokens))
                            .await
                            .map_err(|source| BenchError::Store {
                                op: "complete",
                                source,
                            })?;
                    if let Some(o) = outcomes.iter().find(|o| **o != TokenOutcome::Accepted) {
                        return Err(BenchError::NotAccepted { outcome: *o });
                    }
                }
                Ok(())
            })
        })
        .collect();
    let produced = produce_on(store, queue, plan, epoch, &pickups, settle).await;
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.await??;
    }
    let enqueued = produced?;
    let summary = pickups.summary(plan, enqueued.len() as u64)?;
    Ok(Sustained { summary, enqueued })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_reads_back_its_sequence_and_stamp() {
        assert_eq!(read_payload(&payload(7, 1_234_567)), Some((7, 1_234_567)));
        assert_eq!(read_payload(&[0; 8]), None);
        assert_eq!(read_payload(&[0; 17]), None);
    }

    #[test]
    fn the_summary_refuses_a_lost_or_doubled_item() {
        let plan = Plan::new(10, Duration::ZERO, Duration::from_secs(1));
        let pickups = Pickups::new(Epoch::new());
        for seq in [0, 1, 1] {
            pickups.record(&payload(seq, 0)).expect("record");
        }
        let err = pickups
            .summary(&plan, 3)
            .expect_err("item 2 lost, item 1 twice");
        assert!(err
            .to_string()
            .contains("1 never picked up and 1 picked up more"));
    }

    #[test]
    fn the_summary_counts_only_items_after_the_warm_up() {
        let plan = Plan::new(2, Duration::from_secs(1), Duration::from_secs(1));
        assert_eq!((plan.warmup_items(), plan.items()), (2, 4));
        let pickups = Pickups::new(Epoch::new());
        for seq in 0..4 {
            pickups.record(&payload(seq, 0)).expect("record");
        }
        let s = pickups.summary(&plan, 4).expect("summary");
        assert_eq!(s.items, 2);
    }
}
