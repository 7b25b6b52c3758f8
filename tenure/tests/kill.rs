//! A worker process killed with SIGKILL mid-batch: a second worker finishes
//! everything; no item is lost and none is finalized twice.
//!
//! Each test re-executes this test binary, running the same test with
//! `TENURE_KILL_ROLE=child`: the child runs a worker (2 s leases) on the store the
//! parent names, printing its completed count, and appends every completion the store
//! accepted to a ledger file. The parent kills it (SIGKILL) once 500 items are done,
//! records what the store shows for every item, then drains the rest with a worker of
//! its own that keeps a ledger too.

// The shared body runs outside #[test] functions; a failure there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Backend, Place};
use tenure::runtime::{Job, PollPolicy, Worker};
use tenure::{EnqueueParams, ItemId, ItemState, NewItem, QueueName, Store};
use tenure_test_support::ledger::LedgerStore;

const ROLE: &str = "TENURE_KILL_ROLE";
const URL: &str = "TENURE_KILL_URL";
const LEDGER: &str = "TENURE_KILL_LEDGER";
const ITEMS: usize = 3_000;
const KILL_AFTER: u64 = 500;
const CHILD_LEASE: Duration = Duration::from_secs(2);
/// In the child, handlers of items from this number on never return (their leases are
/// renewed meanwhile), so the child still holds leases when it is killed, however late
/// the kill comes.
const PARK_FROM: usize = 1_000;

fn queue() -> QueueName {
    QueueName::new("kill").unwrap()
}

fn worker_on(store: impl Store, lease: Duration, park: bool) -> Worker {
    Worker::builder(store)
        .queue(queue())
        .concurrency(16)
        .lease_duration(lease)
        .maintenance(false)
        .poll(PollPolicy::new(
            Duration::from_millis(25),
            Duration::from_millis(250),
        ))
        .handler(move |job: Job| async move {
            let n: usize = std::str::from_utf8(job.payload())
                .ok()
                .and_then(|s| s.parse().ok())
                .expect("payloads are item numbers");
            if park && n >= PARK_FROM {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
            Ok(())
        })
        .spawn()
        .unwrap()
}

/// The child: works until it is killed (or gives up after a minute, should the parent
/// have died).
async fn child() {
    let url = std::env::var(URL).unwrap();
    let ledger = std::env::var(LEDGER).unwrap();
    let store = LedgerStore::new(tenure::open(&url).await.unwrap(), ledger.as_ref());
    let worker = worker_on(store, CHILD_LEASE, true);
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(5)).await;
        println!("completed {}", worker.metrics().completed);
    }
    panic!("the child was never killed");
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtKill {
    Done,
    Ready,
    Running,
}

async fn killed_mid_batch(backend: Backend, test_name: &str) {
    if std::env::var(ROLE).is_ok_and(|r| r == "child") {
        return child().await;
    }
    let Some(place) = Place::new(backend).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (child_ledger, parent_ledger) = (dir.path().join("child"), dir.path().join("parent"));
    let store = place.open().await.unwrap();
    let items: Vec<NewItem> = (0..ITEMS)
        .map(|n| {
            // Parked items may be renewed for as long as the test could take.
            NewItem::new(queue(), n.to_string().into_bytes()).max_renewals(10_000)
        })
        .collect();
    let ids: Vec<ItemId> = store
        .enqueue(EnqueueParams::new(items))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, "child")
        .env(URL, &place.url)
        .env(LEDGER, &child_ledger)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let completed = Arc::new(AtomicU64::new(0));
    let out = child.stdout.take().unwrap();
    let c = Arc::clone(&completed);
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("completed ").and_then(|n| n.parse().ok()) {
                c.store(n, Ordering::SeqCst);
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while completed.load(Ordering::SeqCst) < KILL_AFTER {
        assert!(Instant::now() < deadline, "the child made no progress");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child exited early"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success());

    // What the store shows the moment the child is gone.
    let mut at_kill = HashMap::new();
    for id in &ids {
        let state = match store.item_get(*id).await.unwrap() {
            None => AtKill::Done,
            Some(i) if i.state == ItemState::Done => AtKill::Done,
            Some(i) if i.state == ItemState::Ready => AtKill::Ready,
            Some(i) if i.state == ItemState::Running => AtKill::Running,
            Some(i) => panic!("unexpected state {:?}", i.state),
        };
        at_kill.insert(*id, state);
    }
    let count = |s: AtKill| at_kill.values().filter(|v| **v == s).count();
    println!(
        "{}: at the kill {} done, {} running, {} ready",
        backend.name(),
        count(AtKill::Done),
        count(AtKill::Running),
        count(AtKill::Ready)
    );
    assert!(count(AtKill::Running) > 0, "killed mid-batch: leases held");
    assert!(count(AtKill::Done) >= KILL_AFTER as usize);

    // A second worker finishes everything once the dead worker's leases expire.
    let started = Instant::now();
    let survivor = worker_on(
        LedgerStore::new(place.open().await.unwrap(), &parent_ledger),
        Duration::from_secs(30),
        false,
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while store.queue_counts(&queue()).await.unwrap().pending() > 0 {
        assert!(Instant::now() < deadline, "the survivor did not finish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = survivor.shutdown(Duration::from_secs(10)).await;
    println!(
        "{}: the survivor finished the rest in {:.2?}; {:?}",
        backend.name(),
        started.elapsed(),
        report.metrics
    );
    assert_eq!(report.metrics.lost, 0);

    let counts = store.queue_counts(&queue()).await.unwrap();
    assert_eq!((counts.pending(), counts.dead), (0, 0));
    for id in &ids {
        if let Some(i) = store.item_get(*id).await.unwrap() {
            assert_eq!(i.state, ItemState::Done, "no item lost");
        }
    }

    let child_done = LedgerStore::read(&child_ledger);
    let parent_done = LedgerStore::read(&parent_ledger);
    let mut seen = HashSet::new();
    for (id, _) in child_done.iter().chain(&parent_done) {
        assert!(seen.insert(*id), "item {id} was finalized twice");
    }
    for (id, attempt) in &child_done {
        assert_eq!(at_kill[id], AtKill::Done);
        assert_eq!(*attempt, 1);
    }
    let parent: HashMap<ItemId, u32> = parent_done.into_iter().collect();
    for (id, state) in &at_kill {
        match state {
            AtKill::Done => assert!(!parent.contains_key(id), "done by the child"),
            AtKill::Ready => assert_eq!(parent.get(id), Some(&1)),
            AtKill::Running => assert_eq!(
                parent.get(id),
                Some(&2),
                "the dead worker's lease expired and the survivor ran attempt 2"
            ),
        }
    }
    assert!(
        child_done.len() + 128 >= count(AtKill::Done),
        "the child's ledger misses at most its last unwritten flush"
    );
    drop(store);
    place.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_worker_killed_mid_batch_loses_nothing_and_finalizes_nothing_twice() {
    killed_mid_batch(
        Backend::Sqlite,
        "sqlite_worker_killed_mid_batch_loses_nothing_and_finalizes_nothing_twice",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_worker_killed_mid_batch_loses_nothing_and_finalizes_nothing_twice() {
    killed_mid_batch(
        Backend::Postgres,
        "postgres_worker_killed_mid_batch_loses_nothing_and_finalizes_nothing_twice",
    )
    .await;
}
