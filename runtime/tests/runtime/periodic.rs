//! Periodic jobs: every tick enqueued once across instances, ahead of time, by the
//! leader only; a missed tick after downtime once; a leader that dies mid-tick is
//! replaced without a skip or a double. Paused time drives both the runtime and the
//! store (one `TokioClock`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_core::{EnqueueParams, Enqueued, ItemId, QueueName, Result, Store, Timestamp};
use tenure_memory::MemoryStore;
use tenure_runtime::{Job, Missed, Periodic, Recurrence, Role, Worker, WorkerBuilder};
use tokio::sync::Notify;

use crate::support::{until, TokioClock};

const MINUTE: Duration = Duration::from_secs(60);

fn ticks_queue() -> QueueName {
    QueueName::new("ticks").unwrap()
}

fn every_minute(name: &str) -> Periodic {
    Periodic::new(name, ticks_queue(), Recurrence::every(MINUTE).unwrap()).unwrap()
}

/// A worker that serves another queue, so the periodic items stay where they were
/// enqueued and can be counted.
fn idle(store: impl Store, clock: &TokioClock) -> WorkerBuilder {
    Worker::builder(store)
        .queue(QueueName::new("other").unwrap())
        .handler(|_job: Job| async { Ok(()) })
        .maintenance_interval(Duration::from_secs(1))
        .clock(clock.clone())
}

async fn pending(store: &impl Store) -> u64 {
    store.queue_counts(&ticks_queue()).await.unwrap().pending()
}

/// The ids inserted (not answered as duplicates) for `job`'s `tick`, by any of the
/// recorders.
fn inserted(recorders: &[&MidTick], job: &Periodic, tick: Timestamp) -> Vec<ItemId> {
    let key = job.dedup_key(tick).unwrap();
    recorders
        .iter()
        .flat_map(|r| r.answers.lock().unwrap().clone())
        .filter(|(k, e)| *k == key.as_str() && !e.duplicate)
        .map(|(_, e)| e.id)
        .collect()
}

/// Every tick some recorder inserted an item for.
fn inserted_ticks(
    recorders: &[&MidTick],
    job: &Periodic,
    candidates: &[Timestamp],
) -> Vec<Timestamp> {
    candidates
        .iter()
        .copied()
        .filter(|t| !inserted(recorders, job, *t).is_empty())
        .collect()
}

fn tick_after(now: Timestamp) -> Timestamp {
    Recurrence::every(MINUTE).unwrap().next_after(now).unwrap()
}

#[tokio::test(start_paused = true)]
async fn each_tick_is_enqueued_once_ahead_of_time_and_is_claimable_on_its_tick() {
    let clock = TokioClock::new();
    let store = MemoryStore::new(clock.clone()).keep_done(true);
    let seen: Arc<Mutex<Vec<(Timestamp, Timestamp)>>> = Arc::default();
    let record = Arc::clone(&seen);
    let handler_clock = clock.clone();
    let job = every_minute("minutely").missed(Missed::Skip);
    let worker = Worker::builder(store.clone())
        .queue(ticks_queue())
        .maintenance_interval(Duration::from_secs(1))
        .clock(clock.clone())
        .periodic(job)
        .handler(move |job: Job| {
            let record = Arc::clone(&record);
            let now = tenure_core::Clock::now(&handler_clock);
            async move {
                record.lock().unwrap().push((job.item().run_at, now));
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    let first = tick_after(tenure_core::Clock::now(&clock));
    // Up to 15 s past the fifth tick: the sixth is not yet within the lookahead.
    let end = first + MINUTE * 4 + Duration::from_secs(15);
    tokio::time::sleep(end.duration_since(tenure_core::Clock::now(&clock))).await;
    let seen = seen.lock().unwrap().clone();
    let ticks: Vec<Timestamp> = seen.iter().map(|(t, _)| *t).collect();
    let expected: Vec<Timestamp> = (0..5).map(|i| first + MINUTE * i).collect();
    assert_eq!(ticks, expected, "each tick once, in order, none skipped");
    for (tick, started) in &seen {
        assert!(started >= tick, "not run before its tick");
        assert!(
            started.duration_since(*tick) <= Duration::from_secs(10),
            "picked up within the claim loop's longest poll"
        );
    }
    assert_eq!(store.queue_counts(&ticks_queue()).await.unwrap().done, 5);
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn several_instances_declaring_one_job_enqueue_each_tick_once() {
    let clock = TokioClock::new();
    let store = MemoryStore::new(clock.clone());
    let job = every_minute("shared").missed(Missed::Skip);
    let recorders: Vec<MidTick> = (0..3).map(|_| MidTick::new(store.clone())).collect();
    let workers: Vec<Worker> = recorders
        .iter()
        .map(|r| {
            idle(r.clone(), &clock)
                .periodic(job.clone())
                .spawn()
                .unwrap()
        })
        .collect();
    let start = tenure_core::Clock::now(&clock);
    let first = tick_after(start);
    // 30 s past the tenth tick.
    let end = first + MINUTE * 9 + Duration::from_secs(30);
    tokio::time::sleep(end.duration_since(start)).await;
    let leaders: Vec<usize> = workers
        .iter()
        .enumerate()
        .filter(|(_, w)| matches!(w.role(), Role::Leader { .. }))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(leaders.len(), 1);
    for (i, r) in recorders.iter().enumerate() {
        if i != leaders[0] {
            assert!(
                r.answers.lock().unwrap().is_empty(),
                "followers enqueue nothing"
            );
        }
    }
    let all: Vec<&MidTick> = recorders.iter().collect();
    for k in 0..10 {
        let tick = first + MINUTE * k;
        let ids = inserted(&all, &job, tick);
        assert_eq!(ids.len(), 1, "tick {k} once");
        assert_eq!(store.item_get(ids[0]).await.unwrap().unwrap().run_at, tick);
    }
    assert_eq!(pending(&store).await, 10, "nothing else");
    drop(workers);
}

#[tokio::test(start_paused = true)]
async fn a_tick_missed_during_downtime_is_enqueued_once_not_once_per_missed_tick() {
    let clock = TokioClock::new();
    let store = MemoryStore::new(clock.clone());
    let job = every_minute("catch-up");
    let (a, b) = (MidTick::new(store.clone()), MidTick::new(store.clone()));
    let worker = idle(a.clone(), &clock)
        .periodic(job.clone())
        .spawn()
        .unwrap();
    // The first leader enqueues the latest past tick, then the next one.
    tokio::time::sleep(Duration::from_secs(90)).await;
    worker.shutdown(Duration::from_secs(1)).await;
    let down = tenure_core::Clock::now(&clock);
    let before = pending(&store).await;
    // Ten minutes of downtime: ten ticks pass with nobody to enqueue them.
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    let back = tenure_core::Clock::now(&clock);
    let every = Recurrence::every(MINUTE).unwrap();
    let latest = every.latest_at_or_before(back).unwrap();
    let worker = idle(b.clone(), &clock)
        .periodic(job.clone())
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || {
        matches!(worker.role(), Role::Leader { .. })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let missed: Vec<Timestamp> = (1..=10).map(|k| latest - MINUTE * (10 - k)).collect();
    assert!(missed[0] > down, "ten ticks fell in the downtime");
    assert_eq!(
        inserted_ticks(&[&a, &b], &job, &missed),
        vec![latest],
        "the missed ticks make one item, for the latest"
    );
    let ahead = inserted_ticks(&[&b], &job, &[tick_after(back)]).len() as u64;
    assert_eq!(pending(&store).await, before + 1 + ahead);
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn missed_all_enqueues_every_missed_tick_within_its_window_once() {
    let clock = TokioClock::new();
    let store = MemoryStore::new(clock.clone());
    // Ten minutes without any instance.
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    let job = every_minute("backfill").missed(Missed::All {
        within: Duration::from_secs(5 * 60),
    });
    let now = tenure_core::Clock::now(&clock);
    let latest = Recurrence::every(MINUTE)
        .unwrap()
        .latest_at_or_before(now)
        .unwrap();
    let (a, b) = (MidTick::new(store.clone()), MidTick::new(store.clone()));
    let worker = idle(a.clone(), &clock)
        .periodic(job.clone())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let past: Vec<Timestamp> = (0..8).map(|k| latest - MINUTE * (7 - k)).collect();
    // Within five minutes of now: the last five.
    assert_eq!(inserted_ticks(&[&a], &job, &past), past[3..].to_vec());
    // The leader changes (a resign, then a new instance): nothing twice.
    worker.shutdown(Duration::from_secs(1)).await;
    let second = idle(b.clone(), &clock)
        .periodic(job.clone())
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || {
        matches!(second.role(), Role::Leader { .. })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    for t in &past {
        assert!(
            inserted(&[&a, &b], &job, *t).len() <= 1,
            "tick {t} at most once"
        );
    }
    assert!(
        b.answers.lock().unwrap().iter().any(|(_, e)| e.duplicate),
        "B tried again, as a duplicate"
    );
    second.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn periodic_jobs_need_maintenance_and_distinct_names() {
    let store = MemoryStore::default();
    let e = Worker::builder(store.clone())
        .queue(ticks_queue())
        .handler(|_job: Job| async { Ok(()) })
        .maintenance(false)
        .periodic(every_minute("a"))
        .spawn()
        .err()
        .unwrap();
    assert_eq!(e.invalid_field(), Some("periodic"));
    let e = Worker::builder(store)
        .queue(ticks_queue())
        .handler(|_job: Job| async { Ok(()) })
        .periodic(every_minute("a"))
        .periodic(every_minute("a"))
        .spawn()
        .err()
        .unwrap();
    assert_eq!(e.invalid_field(), Some("periodic"));
}

/// Where a leader dies inside its periodic enqueue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Death {
    /// Before the call reaches the store: nothing was written.
    BeforeTheWrite,
    /// After the store committed, before the answer came back.
    AfterTheWrite,
}

/// A store wrapper whose periodic enqueues hang forever once armed, either before or
/// after reaching the store, and that records every periodic enqueue and its answer.
#[derive(Clone, Debug)]
struct MidTick {
    inner: MemoryStore,
    hang: Arc<Mutex<Option<Death>>>,
    hung: Arc<Notify>,
    hung_keys: Arc<Mutex<Vec<String>>>,
    answers: Arc<Mutex<Vec<(String, Enqueued)>>>,
}

impl MidTick {
    fn new(inner: MemoryStore) -> Self {
        MidTick {
            inner,
            hang: Arc::default(),
            hung: Arc::default(),
            hung_keys: Arc::default(),
            answers: Arc::default(),
        }
    }
}

tenure_core::forward_store! {
    impl Store for MidTick {
        forward self => self.inner;

        async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
            let keys: Vec<String> = params
                .items
                .iter()
                .map(|i| {
                    i.dedup_key
                        .as_ref()
                        .map(|k| k.as_str().to_owned())
                        .unwrap_or_default()
                })
                .collect();
            let periodic = keys.iter().any(|k| k.starts_with("tenure.periodic:"));
            let death = if periodic {
                *self.hang.lock().unwrap()
            } else {
                None
            };
            if death.is_some() {
                *self.hung_keys.lock().unwrap() = keys.clone();
            }
            if death == Some(Death::BeforeTheWrite) {
                self.hung.notify_one();
                std::future::pending::<()>().await;
            }
            let answers = self.inner.enqueue(params).await?;
            if periodic {
                let mut seen = self.answers.lock().unwrap();
                seen.extend(keys.into_iter().zip(answers.iter().copied()));
            }
            if death == Some(Death::AfterTheWrite) {
                self.hung.notify_one();
                std::future::pending::<()>().await;
            }
            Ok(answers)
        }
    }
}

/// The leader dies inside the enqueue of tick T; the follower takes over once the
/// leader lease runs out and must leave exactly one item for T and for the next tick.
async fn leader_dies_mid_tick(death: Death) {
    let clock = TokioClock::new();
    let store = MemoryStore::new(clock.clone());
    let job = every_minute("failover");
    let (a, b) = (MidTick::new(store.clone()), MidTick::new(store.clone()));
    let wa = idle(a.clone(), &clock)
        .periodic(job.clone())
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || {
        matches!(wa.role(), Role::Leader { .. })
    })
    .await;
    let wb = idle(b.clone(), &clock)
        .periodic(job.clone())
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || {
        matches!(wb.role(), Role::Follower { .. })
    })
    .await;
    // A's first pass enqueued the latest past tick (and perhaps the next one); let it
    // settle, then arm the hang for the next tick it enqueues ahead of time.
    tokio::time::sleep(Duration::from_secs(3)).await;
    *a.hang.lock().unwrap() = Some(death);
    tokio::time::timeout(Duration::from_secs(120), a.hung.notified())
        .await
        .expect("A enqueues the next tick within two minutes");
    let died_at = tenure_core::Clock::now(&clock);
    let tick = tick_after(died_at);
    assert_eq!(
        *a.hung_keys.lock().unwrap(),
        vec![job.dedup_key(tick).unwrap().as_str().to_owned()],
        "A died enqueueing tick T, ahead of time"
    );
    // A crashes mid-call: its tasks stop, its leader lease is not resigned.
    drop(wa);
    until(Duration::from_secs(10), || {
        matches!(wb.role(), Role::Leader { .. })
    })
    .await;
    // Past T and the next tick.
    tokio::time::sleep(
        (tick + MINUTE).duration_since(tenure_core::Clock::now(&clock)) + Duration::from_secs(1),
    )
    .await;

    let key = job.dedup_key(tick).unwrap();
    let by_a: Vec<Enqueued> = a
        .answers
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k == key.as_str())
        .map(|(_, e)| *e)
        .collect();
    let by_b: Vec<Enqueued> = b
        .answers
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k == key.as_str())
        .map(|(_, e)| *e)
        .collect();
    assert_eq!(
        by_b.len(),
        1,
        "the new leader enqueued tick T once: {by_b:?}"
    );
    match death {
        Death::BeforeTheWrite => {
            assert!(by_a.is_empty(), "A never reached the store");
            assert!(!by_b[0].duplicate, "so B inserted T");
        }
        Death::AfterTheWrite => {
            assert_eq!(by_a.len(), 1);
            assert!(!by_a[0].duplicate, "A inserted T before it died");
            assert!(by_b[0].duplicate, "so B's enqueue of T inserted nothing");
            assert_eq!(by_b[0].id, by_a[0].id);
        }
    }
    let both = [&a, &b];
    let t = inserted(&both, &job, tick);
    assert_eq!(t.len(), 1, "T has one item");
    assert_eq!(store.item_get(t[0]).await.unwrap().unwrap().run_at, tick);
    let next = inserted(&both, &job, tick + MINUTE);
    assert_eq!(next.len(), 1, "the tick after T has one item");
    // Every tick from A's first to T + 1: one item each, nothing else.
    let first = a.answers.lock().unwrap()[0].1.id;
    let first_tick = store.item_get(first).await.unwrap().unwrap().run_at;
    let expected = (tick + MINUTE).duration_since(first_tick).as_secs() / 60 + 1;
    assert_eq!(pending(&store).await, expected);
    drop(wb);
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_dies_before_its_tick_reaches_the_store_is_replaced_without_a_skip() {
    leader_dies_mid_tick(Death::BeforeTheWrite).await;
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_dies_after_its_tick_was_written_is_replaced_without_a_double() {
    leader_dies_mid_tick(Death::AfterTheWrite).await;
}
