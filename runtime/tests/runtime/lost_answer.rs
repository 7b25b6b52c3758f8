//! A finalize whose answer was lost after it committed is retried and refused as
//! stale: the worker must not report a lost lease for its own write.

use std::time::Duration;

use tenure_core::{ItemState, RetryPolicy};
use tenure_memory::MemoryStore;
use tenure_runtime::{Job, JobError, Worker};

use crate::support::{enqueue, item, queue, until, Probe, TokioClock};

fn worker(store: &Probe<MemoryStore>, fail: bool) -> Worker {
    Worker::builder(store.clone())
        .queue(queue())
        .concurrency(4)
        .maintenance(false)
        .retry(RetryPolicy::exponential(
            Duration::from_secs(3600),
            Duration::from_secs(3600),
        ))
        .handler(move |_job: Job| async move {
            if fail {
                Err(JobError::retry("later"))
            } else {
                Ok(())
            }
        })
        .spawn()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_complete_whose_committed_answer_was_lost_counts_as_completed_not_lost() {
    let store = Probe::new(MemoryStore::new(TokioClock::new()).keep_done(true));
    let ids = enqueue(&store, &["a", "b", "c"]).await;
    store.lose_answers(1);
    let w = worker(&store, false);
    until(Duration::from_secs(10), || w.metrics().completed == 3).await;
    let m = w.metrics();
    assert_eq!((m.lost, m.unconfirmed), (0, 0), "{m:?}");
    assert!(
        store.calls().completes.len() >= 2,
        "the lost answer was retried"
    );
    for id in ids {
        assert_eq!(item(&store, id).await.state, ItemState::Done);
    }
}

#[tokio::test(start_paused = true)]
async fn a_complete_retried_after_a_lost_answer_on_a_store_that_deletes_is_unconfirmed() {
    let store = Probe::new(MemoryStore::new(TokioClock::new()));
    enqueue(&store, &["a", "b"]).await;
    store.lose_answers(1);
    let w = worker(&store, false);
    until(Duration::from_secs(10), || w.metrics().unconfirmed == 2).await;
    let m = w.metrics();
    assert_eq!((m.lost, m.completed), (0, 0), "{m:?}");
}

#[tokio::test(start_paused = true)]
async fn a_failure_whose_committed_answer_was_lost_counts_as_failed_not_lost() {
    let store = Probe::new(MemoryStore::new(TokioClock::new()).keep_done(true));
    let ids = enqueue(&store, &["a", "b"]).await;
    store.lose_answers(1);
    let w = worker(&store, true);
    until(Duration::from_secs(10), || w.metrics().failed == 2).await;
    let m = w.metrics();
    assert_eq!((m.lost, m.unconfirmed), (0, 0), "{m:?}");
    for id in ids {
        assert_eq!(item(&store, id).await.state, ItemState::Ready);
    }
}
