//! Batched, fenced finalize: up to N tokens or T ms per flush.

use std::time::Duration;

use tenure_core::{ItemState, RetryPolicy};
use tenure_runtime::{Job, JobError, Worker};
use tokio::time::Instant;

use crate::support::{enqueue, item, memory, queue, until, Probe};

#[tokio::test(start_paused = true)]
async fn outcomes_are_flushed_n_tokens_per_call() {
    let store = Probe::new(memory());
    let payloads: Vec<String> = (0..50).map(|i| i.to_string()).collect();
    let refs: Vec<&str> = payloads.iter().map(String::as_str).collect();
    let ids = enqueue(&store, &refs).await;
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(50)
        .maintenance(false)
        .finalize_batch(10, Duration::from_secs(3600))
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || worker.metrics().completed == 50).await;
    let sizes: Vec<usize> = store.calls().completes.iter().map(|c| c.1).collect();
    assert_eq!(sizes, vec![10; 5], "fifty completions in five calls");
    for id in ids {
        assert_eq!(item(&store, id).await.state, ItemState::Done);
    }
}

#[tokio::test(start_paused = true)]
async fn a_partial_batch_is_flushed_t_ms_after_its_first_outcome_in_one_call_per_kind() {
    let store = Probe::new(memory());
    enqueue(&store, &["ok", "ok", "ok", "fail", "fail"]).await;
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(5)
        .maintenance(false)
        .retry(RetryPolicy::exponential(
            Duration::from_secs(3600),
            Duration::from_secs(3600),
        ))
        .finalize_batch(100, Duration::from_millis(20))
        .handler(|job: Job| async move {
            match job.payload() {
                b"fail" => Err(JobError::retry("later")),
                _ => Ok(()),
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(1), || worker.metrics().claimed == 5).await;
    let claimed_at: Instant = store.calls().claims[0].0;
    until(Duration::from_secs(1), || worker.metrics().failed == 2).await;
    let calls = store.calls();
    assert_eq!(
        calls.completes,
        vec![(claimed_at + Duration::from_millis(20), 3)],
        "one complete call, 20 ms after the first outcome"
    );
    assert_eq!(
        calls.fails,
        vec![(claimed_at + Duration::from_millis(20), 2)],
        "and one fail call in the same flush"
    );
    assert_eq!(worker.metrics().completed, 3);
}
