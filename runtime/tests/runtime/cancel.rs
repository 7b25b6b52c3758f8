//! An operator's cancel of a running item reaches its handler through the lease: the
//! next renewal answers lease lost, `job.is_cancelled()` turns true, and whatever the
//! handler answers afterwards is not written (fenced, G3).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_core::machine::cancelled_by;
use tenure_core::{CancelOutcome, CancelParams, ItemState, Store};
use tenure_runtime::{Job, StopReason, Worker};
use tokio::time::Instant;

use crate::support::{enqueue, item, memory, queue, until, Probe};

/// What the handler saw when told to stop: `is_cancelled()`, the reason, and when.
type Seen = (bool, Option<StopReason>, Instant);

#[tokio::test(start_paused = true)]
async fn a_running_item_cancelled_by_an_operator_cancels_its_handler_at_the_next_renewal() {
    let store = Probe::new(memory());
    let seen: Arc<Mutex<Option<Seen>>> = Arc::default();
    let s = seen.clone();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .lease_duration(Duration::from_secs(30))
        .maintenance(false)
        .handler(move |job: Job| {
            let s = s.clone();
            async move {
                job.cancelled().await;
                *s.lock().unwrap() = Some((job.is_cancelled(), job.stop_reason(), Instant::now()));
                // Answers success after the stop: the runtime's complete is refused.
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    let id = enqueue(&store, &["long"]).await[0];
    until(Duration::from_secs(5), || worker.metrics().in_flight == 1).await;
    let holder = worker.instance().clone();

    let cancelled_at = Instant::now();
    let answer = store
        .item_cancel(CancelParams::new(vec![id]).stop_running("ops"))
        .await
        .unwrap();
    assert_eq!(
        answer,
        vec![CancelOutcome::Stopped {
            attempt: 1,
            owner: holder
        }]
    );
    until(Duration::from_secs(30), || seen.lock().unwrap().is_some()).await;
    let (is_cancelled, reason, at) = seen.lock().unwrap().unwrap();
    assert!(is_cancelled, "job.is_cancelled() once told");
    assert_eq!(reason, Some(StopReason::LeaseLost));
    // Told at the first renewal after the cancel: within a third of the lease.
    assert!(
        at - cancelled_at <= Duration::from_secs(11),
        "told {:?} after the cancel",
        at - cancelled_at
    );
    until(Duration::from_secs(5), || worker.metrics().lost == 1).await;
    let metrics = worker.metrics();
    assert_eq!((metrics.completed, metrics.failed), (0, 0));
    let after = item(&store, id).await;
    assert_eq!(
        after.state,
        ItemState::Dead,
        "the handler's success was not written"
    );
    assert_eq!(cancelled_by(&after), Some("ops"));
}
