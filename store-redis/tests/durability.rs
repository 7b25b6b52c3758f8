//! Durability with AOF `appendfsync always`: a throwaway `redis-server` is killed
//! (SIGKILL, no shutdown) and restarted on the same directory while four workers
//! drain it. Nothing acknowledged may be lost and no item may be finalized twice.

// Test bodies: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tenure_test_support::redis as common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::TempRedis;
use tenure_core::{
    ClaimParams, CompleteParams, EnqueueParams, ErrorKind, ItemId, ItemState, LeaseToken,
    ManualClock, NewItem, OwnerId, QueueName, Store, Timestamp, TokenOutcome,
};
use tenure_redis::{RedisConfig, RedisStore};

const ITEMS: usize = 3_000;
const WORKERS: usize = 4;
const BATCH: u32 = 20;
const LEASE: Duration = Duration::from_secs(30);

/// What the workers were told.
#[derive(Default)]
struct Ledger {
    /// Every token a complete answered `Accepted` for.
    accepted: Vec<LeaseToken>,
    /// Items whose complete answered `Unavailable` (outcome unknown) and then, retried,
    /// `LeaseLost`: the first try was applied before its answer was lost.
    applied_unanswered: HashSet<ItemId>,
}

async fn work(
    store: RedisStore,
    owner: OwnerId,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
) {
    let queue = QueueName::new("drain").unwrap();
    while !stop.load(Ordering::SeqCst) {
        let leases = match store
            .claim(ClaimParams::new(queue.clone(), owner.clone(), BATCH, LEASE))
            .await
        {
            Ok(l) => l,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Unavailable, "claim: {e}");
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        if leases.is_empty() {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        }
        let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
        let mut unknown = false;
        loop {
            match store.complete(CompleteParams::new(tokens.clone())).await {
                Ok(outcomes) => {
                    let mut l = ledger.lock().unwrap();
                    for (t, o) in tokens.iter().zip(outcomes) {
                        match o {
                            TokenOutcome::Accepted => l.accepted.push(*t),
                            TokenOutcome::LeaseLost if unknown => {
                                l.applied_unanswered.insert(t.id);
                            }
                            TokenOutcome::LeaseLost | TokenOutcome::OutOfOrder => {}
                        }
                    }
                    break;
                }
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Unavailable, "complete: {e}");
                    unknown = true;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    }
}

/// Queue counts, retried while the store answers `Unavailable` (its connection died
/// with the server; the next call opens a new one).
async fn counts(store: &RedisStore, queue: &QueueName) -> tenure_core::QueueCounts {
    loop {
        match store.queue_counts(queue).await {
            Ok(c) => return c,
            Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "queue_counts: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_killed_and_restarted_mid_drain_loses_nothing_and_finalizes_nothing_twice() {
    let Some(mut server) =
        TempRedis::start(&["--appendonly", "yes", "--appendfsync", "always"]).await
    else {
        return;
    };
    let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
    let prefix = format!("d_{}", uuid::Uuid::now_v7().simple());
    let open = || {
        RedisStore::connect(
            RedisConfig::new(server.url())
                .prefix(&prefix)
                .clock(clock.clone())
                .keep_done(true)
                .listen(false)
                .connect_timeout(Duration::from_millis(500)),
        )
    };
    let producer = open().await.unwrap();
    let queue = QueueName::new("drain").unwrap();
    let mut ids = Vec::with_capacity(ITEMS);
    for chunk in (0..ITEMS).collect::<Vec<_>>().chunks(500) {
        let items: Vec<NewItem> = chunk
            .iter()
            .map(|n| NewItem::new(queue.clone(), n.to_string().into_bytes()))
            .collect();
        ids.extend(items.iter().map(|i| i.id));
        producer.enqueue(EnqueueParams::new(items)).await.unwrap();
    }
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let store = open().await.unwrap();
        let owner = OwnerId::new(format!("w{w}")).unwrap();
        tasks.push(tokio::spawn(work(
            store,
            owner,
            ledger.clone(),
            stop.clone(),
        )));
    }
    // Kill the server once a third of the items are done, then start it again on the
    // same directory; it replays its append-only file.
    while ledger.lock().unwrap().accepted.len() < ITEMS / 3 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    server.kill();
    server.boot().await;
    let after = counts(&producer, &queue).await;
    assert!(
        after.done < ITEMS as u64,
        "the restart came mid-drain: {after:?}"
    );
    assert_eq!(
        after.pending() + after.done,
        ITEMS as u64,
        "every enqueued item is still there after the restart: {after:?}"
    );
    // Leases whose claim was applied but whose answer was lost are held by nobody:
    // let them expire so the workers recover them.
    clock.advance(LEASE);
    loop {
        let c = counts(&producer, &queue).await;
        if c.pending() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    let mut accepted: HashMap<ItemId, u32> = HashMap::new();
    for t in &ledger.accepted {
        assert!(
            accepted.insert(t.id, t.attempt).is_none(),
            "item {} was finalized twice",
            t.id
        );
    }
    for id in &ids {
        let item = producer
            .item_get(*id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("item {id} was lost"));
        assert_eq!(item.state, ItemState::Done, "item {id}");
        match accepted.get(id) {
            Some(attempt) => assert_eq!(*attempt, item.attempt, "item {id}"),
            None => assert!(
                ledger.applied_unanswered.contains(id),
                "item {id} is done but no complete was accepted for it"
            ),
        }
    }
    let c = producer.queue_counts(&queue).await.unwrap();
    assert_eq!((c.done, c.pending()), (ITEMS as u64, 0));
    println!(
        "{} completes accepted, {} applied with their answer lost to the restart",
        ledger.accepted.len(),
        ledger.applied_unanswered.len()
    );
}
