//! A handler that finalizes its own attempt (`Job::take_finalize`), as one that
//! completes the item inside its own database transaction does: the runtime writes no
//! second finalize, stops renewing once the handler returns, and an error after taking
//! over is recorded as a fenced failure that the fence refuses if the handler's own
//! finalize took effect.

use std::time::Duration;

use tenure_core::{CompleteParams, ItemState, RecoverParams, RetryPolicy, Store, TokenOutcome};
use tenure_runtime::{Job, JobError, Worker};
use tokio::time::sleep;

use crate::support::{enqueue, item, memory, queue, until, Probe};

const LEASE: Duration = Duration::from_secs(3);

/// A worker whose handler takes the finalize over, completes the item itself through
/// the store (as `complete_in_tx` would, committed) when `complete` is set, after
/// `work` of work, then returns `answer`.
fn taking_over(
    store: &Probe<tenure_memory::MemoryStore>,
    work: Duration,
    complete: bool,
    answer: fn() -> Result<(), JobError>,
) -> Worker {
    let own = store.clone();
    Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .lease_duration(LEASE)
        .maintenance(false)
        .retry(RetryPolicy::exponential(
            Duration::from_secs(3600),
            Duration::from_secs(3600),
        ))
        .handler(move |job: Job| {
            let own = own.clone();
            async move {
                let token = job.take_finalize();
                assert!(job.finalize_taken());
                sleep(work).await;
                if complete {
                    let answer = own
                        .complete(CompleteParams::new(vec![token]))
                        .await
                        .map_err(|e| JobError::retry(e.to_string()))?;
                    assert_eq!(answer, vec![TokenOutcome::Accepted]);
                }
                answer()
            }
        })
        .spawn()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_completes_its_own_attempt_is_renewed_while_it_runs_and_never_finalized_again(
) {
    let store = Probe::new(memory());
    let id = enqueue(&store, &["pay-1"]).await[0];
    // Works 2.5 renewal intervals (a third of the lease each) before its commit.
    let worker = taking_over(&store, Duration::from_millis(2_500), true, || Ok(()));
    until(Duration::from_secs(5), || {
        worker.metrics().handler_finalized == 1
    })
    .await;
    let renewed_while_running = store.calls().renewed_tokens.len();
    assert_eq!(
        renewed_while_running, 2,
        "the lease stays live while the handler works towards its commit"
    );
    // Several leases later: no renewal, no complete, fail or release by the runtime.
    sleep(LEASE * 4).await;
    let calls = store.calls();
    assert_eq!(
        calls.renewed_tokens.len(),
        renewed_while_running,
        "not renewed after"
    );
    assert_eq!(
        calls.completes.len(),
        1,
        "the handler's own completion only"
    );
    assert!(calls.fails.is_empty() && calls.releases.is_empty());
    let m = worker.metrics();
    assert_eq!(
        (m.completed, m.failed, m.lost, m.handler_finalized),
        (0, 0, 0, 1)
    );
    let it = item(&store, id).await;
    assert_eq!((it.state, it.attempt), (ItemState::Done, 1));
    let report = worker.shutdown(Duration::from_secs(1)).await;
    assert_eq!((report.released, report.abandoned), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn an_error_after_the_handlers_own_completion_is_refused_by_the_fence_and_not_counted_lost() {
    let store = Probe::new(memory());
    let id = enqueue(&store, &["pay-1"]).await[0];
    let worker = taking_over(&store, Duration::from_millis(10), true, || {
        Err(JobError::retry("a step after the commit failed"))
    });
    until(Duration::from_secs(5), || {
        worker.metrics().handler_finalized == 1
    })
    .await;
    assert_eq!(
        store.calls().fails.len(),
        1,
        "the runtime sent its fenced failure"
    );
    let m = worker.metrics();
    assert_eq!((m.completed, m.failed, m.lost), (0, 0, 0));
    let it = item(&store, id).await;
    assert_eq!(
        (it.state, it.attempt, it.last_error),
        (ItemState::Done, 1, None),
        "the failure changed nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn an_error_after_taking_over_without_a_finalize_records_the_failure_at_once() {
    let store = Probe::new(memory());
    let id = enqueue(&store, &["pay-1"]).await[0];
    // The handler's transaction rolled back: it returns the error.
    let worker = taking_over(&store, Duration::from_millis(10), false, || {
        Err(JobError::retry("rolled back"))
    });
    until(Duration::from_secs(5), || worker.metrics().failed == 1).await;
    let it = item(&store, id).await;
    assert_eq!(it.state, ItemState::Ready, "retried, not left to expire");
    assert_eq!(it.attempt, 1);
    assert_eq!(it.stalls, 0);
    assert_eq!(it.last_error.as_deref(), Some("rolled back"));
    let m = worker.metrics();
    assert_eq!((m.completed, m.lost, m.handler_finalized), (0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn ok_after_taking_over_without_a_finalize_leaves_the_item_to_expire_and_be_recovered() {
    let store = Probe::new(memory());
    let id = enqueue(&store, &["pay-1"]).await[0];
    let worker = taking_over(&store, Duration::from_millis(10), false, || Ok(()));
    until(Duration::from_secs(5), || {
        worker.metrics().handler_finalized == 1
    })
    .await;
    assert_eq!(item(&store, id).await.state, ItemState::Running);
    sleep(LEASE + Duration::from_millis(10)).await;
    let calls = store.calls();
    assert!(
        calls.renewed_tokens.is_empty(),
        "not renewed after the return"
    );
    assert!(calls.completes.is_empty() && calls.fails.is_empty());
    let recovered = store
        .inner
        .recover_expired(RecoverParams::new(100))
        .await
        .unwrap();
    assert_eq!(recovered.requeued, 1, "its lease ran out");
    let it = item(&store, id).await;
    assert_eq!((it.state, it.stalls), (ItemState::Ready, 1));
    drop(worker);
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_finalizes_after_the_shutdown_cancelled_it_is_neither_released_nor_abandoned(
) {
    let store = Probe::new(memory());
    let id = enqueue(&store, &["pay-1"]).await[0];
    let own = store.clone();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .lease_duration(LEASE)
        .maintenance(false)
        .handler(move |job: Job| {
            let own = own.clone();
            async move {
                let token = job.take_finalize();
                job.cancelled().await;
                let answer = own.complete(CompleteParams::new(vec![token])).await?;
                assert_eq!(answer, vec![TokenOutcome::Accepted]);
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(1), || worker.metrics().in_flight == 1).await;
    let report = worker.shutdown(Duration::from_millis(100)).await;
    assert!(!report.drained);
    assert_eq!((report.released, report.abandoned), (0, 0));
    assert!(report.deregistered);
    assert_eq!(report.metrics.handler_finalized, 1);
    assert!(store.calls().releases.is_empty(), "nothing to give back");
    assert_eq!(item(&store, id).await.state, ItemState::Done);
}
