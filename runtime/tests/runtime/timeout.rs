//! The handler timeout: a handler still running when it fires is cancelled (or dropped
//! if it ignores that), and the attempt is recorded as a retryable failure (G5).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_core::{ItemState, RetryPolicy, Store};
use tenure_runtime::{Job, StopReason, Worker};
use tokio::time::Instant;

use crate::support::{enqueue, item, memory, queue, until};

/// What each run saw: attempt, how long it ran, and its stop reason when it ended.
type Runs = Arc<Mutex<Vec<(u32, Duration, Option<StopReason>)>>>;

fn worker(store: impl Store, runs: &Runs, cooperative: bool) -> Worker {
    let runs = Arc::clone(runs);
    Worker::builder(store)
        .queue(queue())
        .concurrency(1)
        .maintenance(false)
        .lease_duration(Duration::from_secs(30))
        .handler_timeout(Duration::from_secs(2))
        .retry(
            RetryPolicy::exponential(Duration::from_secs(5), Duration::from_secs(60))
                .with_jitter(0.0),
        )
        .handler(move |job: Job| {
            let runs = Arc::clone(&runs);
            async move {
                let started = Instant::now();
                if job.attempt() == 1 {
                    if cooperative {
                        job.cancelled().await;
                    } else {
                        // Ignores its cancellation: only dropping it ends it.
                        std::future::pending::<()>().await;
                    }
                }
                runs.lock()
                    .unwrap()
                    .push((job.attempt(), started.elapsed(), job.stop_reason()));
                Ok(())
            }
        })
        .spawn()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_handler_past_its_timeout_is_cancelled_and_the_attempt_fails_and_retries() {
    let store = memory();
    let [id] = enqueue(&store, &["slow"]).await[..] else {
        panic!()
    };
    let runs: Runs = Arc::default();
    let w = worker(store.clone(), &runs, true);
    until(Duration::from_secs(10), || w.metrics().failed == 1).await;
    let it = item(&store, id).await;
    assert_eq!(it.state, ItemState::Ready, "a retryable failure, not dead");
    assert_eq!(it.attempt, 1);
    assert!(
        it.last_error
            .as_deref()
            .is_some_and(|e| e.contains("timed out after 2s")),
        "{:?}",
        it.last_error
    );
    let first = runs.lock().unwrap()[0];
    assert_eq!(first.0, 1);
    assert_eq!(
        first.1,
        Duration::from_secs(2),
        "cancelled exactly at the timeout"
    );
    assert_eq!(first.2, Some(StopReason::Timeout));
    // The retry runs after its backoff and completes.
    until(Duration::from_secs(30), || w.metrics().completed == 1).await;
    assert_eq!(runs.lock().unwrap()[1].0, 2);
    let m = w.metrics();
    assert_eq!((m.timed_out, m.failed, m.completed, m.lost), (1, 1, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_ignores_the_timeout_is_dropped_and_the_attempt_still_fails() {
    let store = memory();
    let [id] = enqueue(&store, &["stuck"]).await[..] else {
        panic!()
    };
    let runs: Runs = Arc::default();
    let started = Instant::now();
    let w = worker(store.clone(), &runs, false);
    until(Duration::from_secs(60), || w.metrics().failed == 1).await;
    // Timeout at 2 s, dropped half a lease (15 s) later.
    assert!(
        started.elapsed() >= Duration::from_secs(17),
        "{:?}",
        started.elapsed()
    );
    let it = item(&store, id).await;
    assert_eq!((it.state, it.attempt), (ItemState::Ready, 1));
    assert!(it.last_error.is_some_and(|e| e.contains("timed out")));
    assert_eq!(w.metrics().timed_out, 1);
    assert!(
        runs.lock().unwrap().is_empty(),
        "the dropped run never returned"
    );
    until(Duration::from_secs(60), || w.metrics().completed == 1).await;
}

#[tokio::test(start_paused = true)]
async fn a_zero_timeout_is_refused_naming_the_setting() {
    let e = Worker::builder(memory())
        .queue(queue())
        .handler_timeout(Duration::ZERO)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("handler_timeout"), "{e}");
}
