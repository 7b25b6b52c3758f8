//! End to end on every landed store: four workers (each its own store handle: a peer
//! SQLite writer, a separate Postgres pool) drain 10,000 items with a handler that
//! fails 10% of the items once and panics on 1% once. Every item must be done exactly
//! once, with exactly the attempts expected.

// The shared body runs outside #[test] functions; a failure there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Backend, Place};
use tenure::runtime::{Job, JobError, PollPolicy, Worker};
use tenure::{EnqueueParams, ItemId, ItemState, NewItem, QueueName, RetryPolicy};
use tenure_test_support::quiet_panics;

const ITEMS: usize = 10_000;
const WORKERS: usize = 4;

fn fails_once(n: usize) -> bool {
    n % 10 == 0
}

fn panics_once(n: usize) -> bool {
    n % 100 == 5
}

fn expected_attempts(n: usize) -> u32 {
    if fails_once(n) || panics_once(n) {
        2
    } else {
        1
    }
}

struct Ledger {
    /// Handler runs per item.
    runs: Vec<AtomicU32>,
    /// Runs that answered Ok, per item.
    oks: Vec<AtomicU32>,
    /// The attempt numbers each item was run with.
    attempts: Mutex<Vec<Vec<u32>>>,
}

async fn four_workers_drain_ten_thousand_items_exactly_once(backend: Backend) {
    quiet_panics();
    let Some(place) = Place::new(backend).await else {
        return;
    };
    let queue = QueueName::new("e2e").unwrap();
    let first = place.open().await.unwrap();
    let mut ids: Vec<ItemId> = Vec::with_capacity(ITEMS);
    for chunk in (0..ITEMS).collect::<Vec<_>>().chunks(1_000) {
        let items = chunk
            .iter()
            .map(|n| NewItem::new(queue.clone(), n.to_string().into_bytes()))
            .collect();
        let out = first.enqueue(EnqueueParams::new(items)).await.unwrap();
        ids.extend(out.into_iter().map(|e| e.id));
    }

    let ledger = Arc::new(Ledger {
        runs: (0..ITEMS).map(|_| AtomicU32::new(0)).collect(),
        oks: (0..ITEMS).map(|_| AtomicU32::new(0)).collect(),
        attempts: Mutex::new(vec![Vec::new(); ITEMS]),
    });
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let store = place.open().await.unwrap();
        let ledger = Arc::clone(&ledger);
        let worker = Worker::builder(store)
            .queue(queue.clone())
            .concurrency(8)
            .lease_duration(Duration::from_secs(30))
            .poll(PollPolicy::new(
                Duration::from_millis(25),
                Duration::from_millis(250),
            ))
            .retry(RetryPolicy::exponential(
                Duration::from_millis(20),
                Duration::from_millis(200),
            ))
            .maintenance_interval(Duration::from_secs(1))
            .handler(move |job: Job| {
                let ledger = Arc::clone(&ledger);
                async move {
                    let n: usize = std::str::from_utf8(job.payload()).unwrap().parse().unwrap();
                    ledger.runs[n].fetch_add(1, Ordering::SeqCst);
                    ledger.attempts.lock().unwrap()[n].push(job.attempt());
                    if job.attempt() == 1 && fails_once(n) {
                        return Err(JobError::retry("fails once"));
                    }
                    if job.attempt() == 1 && panics_once(n) {
                        panic!("panics once, on purpose");
                    }
                    ledger.oks[n].fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }
            })
            .spawn()
            .unwrap();
        workers.push(worker);
    }

    let deadline = Instant::now() + Duration::from_secs(240);
    while workers.iter().map(|w| w.metrics().completed).sum::<u64>() < ITEMS as u64 {
        assert!(
            Instant::now() < deadline,
            "{}: only {} of {ITEMS} completed",
            backend.name(),
            workers.iter().map(|w| w.metrics().completed).sum::<u64>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    let mut totals = tenure::MetricsSnapshot::default();
    for w in workers {
        let report = w.shutdown(Duration::from_secs(10)).await;
        assert!(report.drained);
        assert_eq!(report.abandoned, 0);
        let m = report.metrics;
        totals.claimed += m.claimed;
        totals.completed += m.completed;
        totals.failed += m.failed;
        totals.panicked += m.panicked;
        totals.dead += m.dead;
        totals.lost += m.lost;
        totals.self_stopped += m.self_stopped;
    }
    println!(
        "{}: {ITEMS} items, {WORKERS} workers, {:.2?} ({:.0} items/s); {totals:?}",
        backend.name(),
        elapsed,
        ITEMS as f64 / elapsed.as_secs_f64()
    );

    let retried = (0..ITEMS).filter(|n| expected_attempts(*n) == 2).count() as u64;
    assert_eq!(totals.completed, ITEMS as u64);
    assert_eq!(totals.failed, retried, "10% failed once, 1% panicked once");
    assert_eq!(
        totals.panicked,
        (0..ITEMS).filter(|n| panics_once(*n)).count() as u64
    );
    assert_eq!((totals.dead, totals.lost, totals.self_stopped), (0, 0, 0));
    assert_eq!(totals.claimed, ITEMS as u64 + retried);

    let attempts = ledger.attempts.lock().unwrap().clone();
    for (n, seen) in attempts.iter().enumerate() {
        let want = expected_attempts(n);
        assert_eq!(
            ledger.oks[n].load(Ordering::SeqCst),
            1,
            "{}: item {n} done exactly once",
            backend.name()
        );
        assert_eq!(ledger.runs[n].load(Ordering::SeqCst), want, "item {n}");
        assert_eq!(
            *seen,
            (1..=want).collect::<Vec<_>>(),
            "item {n} ran attempt after attempt"
        );
    }
    let counts = first.queue_counts(&queue).await.unwrap();
    assert_eq!((counts.pending(), counts.dead), (0, 0));
    for (n, id) in ids.iter().enumerate() {
        if let Some(item) = first.item_get(*id).await.unwrap() {
            assert_eq!(
                (item.state, item.attempt),
                (ItemState::Done, expected_attempts(n))
            );
        }
    }
    drop(first);
    place.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_four_workers_drain_ten_thousand_items_exactly_once() {
    four_workers_drain_ten_thousand_items_exactly_once(Backend::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_four_workers_drain_ten_thousand_items_exactly_once() {
    four_workers_drain_ten_thousand_items_exactly_once(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_four_workers_drain_ten_thousand_items_exactly_once() {
    four_workers_drain_ten_thousand_items_exactly_once(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_four_workers_drain_ten_thousand_items_exactly_once() {
    four_workers_drain_ten_thousand_items_exactly_once(Backend::Redis).await;
}
