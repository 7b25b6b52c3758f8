//! The self-stop: half a lease after the last successful renewal, on its own timer.

use std::sync::Arc;
use std::time::Duration;

use tenure_core::{ItemState, ManualClock, OwnerId, StoreExt};
use tenure_memory::MemoryStore;
use tenure_runtime::{Job, StopReason, Worker};
use tokio::time::Instant;

use crate::support::{enqueue, item, memory, queue, until, Probe, Seen};

/// A worker whose first attempt waits for its cancellation and then answers `Ok` (which
/// must be discarded); later attempts answer `Ok` at once.
fn spawn_waiting_worker(store: Probe<MemoryStore>, lease: Duration, seen: Seen) -> Worker {
    Worker::builder(store)
        .queue(queue())
        .concurrency(1)
        .lease_duration(lease)
        .maintenance(false)
        .handler(move |job: Job| {
            let seen = seen.clone();
            async move {
                if job.attempt() == 1 {
                    job.cancelled().await;
                }
                seen.lock().unwrap().push((
                    job.attempt(),
                    job.item().stalls,
                    job.stop_reason(),
                    Instant::now(),
                ));
                Ok(())
            }
        })
        .spawn()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn failing_renewals_stop_the_handler_at_half_a_lease_and_the_attempt_writes_nothing() {
    let store = Probe::new(memory());
    let lease = Duration::from_secs(4);
    let id = enqueue(&store, &["x"]).await[0];
    let seen: Seen = Arc::default();
    let worker = spawn_waiting_worker(store.clone(), lease, seen.clone());
    until(Duration::from_secs(1), || worker.metrics().in_flight == 1).await;
    store.inner.set_available(false);
    let claimed_at = store.calls().claims[0].0;

    until(Duration::from_secs(10), || !seen.lock().unwrap().is_empty()).await;
    let (attempt, _, reason, stopped_at) = seen.lock().unwrap()[0];
    assert_eq!((attempt, reason), (1, Some(StopReason::SelfStop)));
    assert_eq!(stopped_at, claimed_at + lease / 2, "not before, not after");
    assert!(
        store.calls().renews.len() >= 2,
        "renewals were tried and failed"
    );

    // The database answers again: the stopped attempt still writes nothing.
    store.inner.set_available(true);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let it = item(&store, id).await;
    assert_eq!(
        (it.state, it.attempt, it.last_error),
        (ItemState::Running, 1, None)
    );
    assert!(store.calls().completes.is_empty() && store.calls().fails.is_empty());
    let m = worker.metrics();
    assert_eq!((m.self_stopped, m.completed, m.failed), (1, 0, 0));

    // Recovery re-queues it once the lease expires and counts a stall.
    until(Duration::from_secs(30), || worker.metrics().completed == 1).await;
    let (attempt, stalls, reason, _) = seen.lock().unwrap()[1];
    assert_eq!((attempt, stalls, reason), (2, 1, None));
}

#[tokio::test(start_paused = true)]
async fn a_renewal_call_that_hangs_still_stops_the_handler_at_half_a_lease() {
    let store = Probe::new(memory());
    let lease = Duration::from_secs(4);
    let id = enqueue(&store, &["x"]).await[0];
    store.hang_renewals(true);
    let seen: Seen = Arc::default();
    let worker = spawn_waiting_worker(store.clone(), lease, seen.clone());
    until(Duration::from_secs(10), || !seen.lock().unwrap().is_empty()).await;

    let claimed_at = store.calls().claims[0].0;
    let (attempt, _, reason, stopped_at) = seen.lock().unwrap()[0];
    assert_eq!((attempt, reason), (1, Some(StopReason::SelfStop)));
    assert_eq!(stopped_at, claimed_at + lease / 2);
    let renews: Vec<Instant> = store.calls().renews.iter().map(|r| r.0).collect();
    assert!(
        renews.len() >= 2 && renews[1] < stopped_at,
        "each renewal call has its own timeout: a second call went out while the first still hung ({renews:?})"
    );

    store.hang_renewals(false);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let it = item(&store, id).await;
    assert_eq!(
        (it.state, it.attempt, it.last_error),
        (ItemState::Running, 1, None)
    );
    assert_eq!(worker.metrics().self_stopped, 1);
    assert!(store.calls().completes.is_empty() && store.calls().fails.is_empty());
}

#[tokio::test(start_paused = true)]
async fn one_successful_renewal_restarts_the_self_stop_clock() {
    let store = Probe::new(memory());
    let lease = Duration::from_secs(4);
    enqueue(&store, &["x"]).await;
    let seen: Seen = Arc::default();
    let worker = spawn_waiting_worker(store.clone(), lease, seen.clone());
    until(Duration::from_secs(1), || worker.metrics().in_flight == 1).await;
    store.inner.set_available(false);
    let claimed_at = store.calls().claims[0].0;

    // Back just before the second try, then gone again right after it succeeded.
    tokio::time::sleep_until(claimed_at + Duration::from_millis(1500)).await;
    store.inner.set_available(true);
    until(Duration::from_secs(1), || worker.metrics().renewed == 1).await;
    store.inner.set_available(false);
    let renewed_at = store.calls().renews[1].0;
    assert!(renewed_at < claimed_at + lease / 2);

    until(Duration::from_secs(10), || !seen.lock().unwrap().is_empty()).await;
    let (_, _, reason, stopped_at) = seen.lock().unwrap()[0];
    assert_eq!(reason, Some(StopReason::SelfStop));
    assert_eq!(
        stopped_at,
        renewed_at + lease / 2,
        "half a lease after the renewal that succeeded, not after the claim"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lease_lost_answer_cancels_the_handler_at_once_and_its_outcome_is_discarded() {
    // The store's clock is manual: the lease expires for the store alone, a peer
    // re-claims the item, and the worker learns it at its next renewal.
    let clock = ManualClock::starting_now();
    let store = Probe::new(MemoryStore::new(clock.clone()).keep_done(true));
    let lease = Duration::from_secs(3);
    let id = enqueue(&store, &["x"]).await[0];
    let seen: Seen = Arc::default();
    let worker = spawn_waiting_worker(store.clone(), lease, seen.clone());
    until(Duration::from_secs(1), || worker.metrics().in_flight == 1).await;

    clock.advance(lease + Duration::from_secs(1));
    let peer = store
        .inner
        .claim_one(queue(), OwnerId::new("peer").unwrap(), lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(peer.token.attempt, 2);

    until(Duration::from_secs(5), || !seen.lock().unwrap().is_empty()).await;
    let (attempt, _, reason, stopped_at) = seen.lock().unwrap()[0];
    assert_eq!((attempt, reason), (1, Some(StopReason::LeaseLost)));
    assert_eq!(
        stopped_at,
        store.calls().renews[0].0,
        "cancelled as the renewal answered, not at the self-stop"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        store.calls().completes.is_empty(),
        "the lost attempt's Ok was discarded"
    );
    store.inner.complete_one(peer.token).await.unwrap();
    let it = item(&store, id).await;
    assert_eq!((it.state, it.attempt), (ItemState::Done, 2));
    let m = worker.metrics();
    assert_eq!((m.lost, m.completed, m.self_stopped), (1, 0, 0));
}
