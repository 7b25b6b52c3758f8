//! The worker under queue limits (G16, G17): with every key held back it polls again
//! when a slot or a start comes back, not a poll interval past it, and does not spin.

use std::time::Duration;

use tenure_core::{
    ClaimParams, LimitKey, LimitsParams, NewItem, OwnerId, QueueLimits, Rate, Store, StoreExt,
};
use tenure_runtime::{Job, Worker};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::support::{enqueue_items, memory, queue};

fn key() -> LimitKey {
    LimitKey::new("api").unwrap()
}

fn keyed(n: usize) -> Vec<NewItem> {
    (0..n)
        .map(|i| NewItem::new(queue(), format!("{i}").into_bytes()).limit_key(key()))
        .collect()
}

/// A worker whose handler reports when each item started, and the receiver.
fn worker(store: &tenure_memory::MemoryStore) -> (Worker, mpsc::UnboundedReceiver<Instant>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(4)
        .maintenance(false)
        .handler(move |_job: Job| {
            let tx = tx.clone();
            async move {
                tx.send(Instant::now()).unwrap();
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    (worker, rx)
}

#[tokio::test(start_paused = true)]
async fn a_worker_at_a_rate_polls_again_when_the_next_start_is_allowed() {
    let store = memory();
    store
        .limits_set(LimitsParams::new(
            queue(),
            QueueLimits::new().key_rate(Rate::new(1, Duration::from_secs(60))),
        ))
        .await
        .unwrap();
    enqueue_items(&store, keyed(2)).await;
    let t0 = Instant::now();
    let (worker, mut started) = worker(&store);
    let first = started.recv().await.unwrap();
    let second = started.recv().await.unwrap();
    assert_eq!(first - t0, Duration::ZERO, "the first start at once");
    assert_eq!(
        second - first,
        Duration::from_secs(60),
        "the second start exactly when the rate allows it (the backoff alone would poll \
         at 65.75 s)"
    );
    let m = worker.metrics();
    assert!(
        m.polls <= 14,
        "no spinning while the key waits: {} polls in 60 s",
        m.polls
    );
    assert!(
        m.limit_waits >= 1,
        "the waits on the rate are counted: {m:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_worker_waiting_for_a_slot_polls_when_a_crashed_holders_lease_expires() {
    let store = memory();
    store
        .limits_set(LimitsParams::new(queue(), QueueLimits::new().per_key(1)))
        .await
        .unwrap();
    enqueue_items(&store, keyed(2)).await;
    // A holder that crashes: it claims one item and never finishes it.
    let ghost = OwnerId::new("ghost").unwrap();
    let lease = Duration::from_secs(30);
    let held = store
        .claim(ClaimParams::new(queue(), ghost, 1, lease))
        .await
        .unwrap();
    assert_eq!(held.len(), 1);
    let t0 = Instant::now();
    let (_worker, mut started) = worker(&store);
    let first = started.recv().await.unwrap();
    assert_eq!(
        first - t0,
        lease,
        "the next item starts when the crashed holder's lease expires (the backoff alone \
         would poll at 35.75 s)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slot_freed_by_a_finish_wakes_a_waiting_worker_at_once() {
    let store = memory();
    store
        .limits_set(LimitsParams::new(queue(), QueueLimits::new().per_key(1)))
        .await
        .unwrap();
    enqueue_items(&store, keyed(2)).await;
    let holder = OwnerId::new("holder").unwrap();
    let held = store
        .claim(ClaimParams::new(
            queue(),
            holder,
            1,
            Duration::from_secs(300),
        ))
        .await
        .unwrap();
    let (_worker, mut started) = worker(&store);
    tokio::time::sleep(Duration::from_millis(7_300)).await;
    let finished_at = Instant::now();
    store.complete_one(held[0].token).await.unwrap();
    let first = started.recv().await.unwrap();
    assert_eq!(
        first, finished_at,
        "the waiting worker claims the freed slot at once, not at its next poll"
    );
}
