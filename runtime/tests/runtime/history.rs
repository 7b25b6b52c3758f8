//! The worker's share of the store's work history: finishes counted per queue and
//! added to the store in aggregate every `HISTORY_FLUSH`, and at shutdown.

use std::time::Duration;

use tenure_core::{Clock, HistoryCounts, HistoryParams, Store, SystemClock};
use tenure_runtime::{Job, JobError, Worker, HISTORY_FLUSH};

use crate::support::{enqueue, memory, queue, until, Probe};

async fn totals(store: &impl Store) -> HistoryCounts {
    let now = SystemClock.now();
    let points = store
        .history(HistoryParams::new(
            queue(),
            now - Duration::from_secs(3600),
            now + Duration::from_secs(120),
        ))
        .await
        .unwrap();
    points
        .iter()
        .fold(HistoryCounts::default(), |a, p| a.plus(p.counts))
}

#[tokio::test(start_paused = true)]
async fn finishes_reach_the_store_history_within_a_flush_and_at_shutdown() {
    let store = Probe::new(memory());
    enqueue(&store, &["ok", "ok", "retry", "permanent"]).await;
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .maintenance(false)
        .retry(
            tenure_core::RetryPolicy::exponential(
                Duration::from_millis(10),
                Duration::from_millis(10),
            )
            .with_jitter(0.0),
        )
        .handler(|job: Job| async move {
            match (job.payload(), job.attempt()) {
                (b"retry", 1) => Err(JobError::retry("once")),
                (b"permanent", _) => Err(JobError::permanent("never")),
                _ => Ok(()),
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(30), || {
        let m = worker.metrics();
        m.completed == 3 && m.dead == 1
    })
    .await;
    tokio::time::sleep(HISTORY_FLUSH + Duration::from_secs(1)).await;
    assert_eq!(
        totals(&store).await,
        HistoryCounts::new(3, 1, 1),
        "finished, failed (retrying) and dead within one flush"
    );
    // Nothing more finishes: an idle worker adds nothing (no call with zeros).
    tokio::time::sleep(HISTORY_FLUSH * 3).await;
    assert_eq!(totals(&store).await, HistoryCounts::new(3, 1, 1));

    enqueue(&store, &["ok"]).await;
    until(Duration::from_secs(30), || worker.metrics().completed == 4).await;
    worker.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        totals(&store).await,
        HistoryCounts::new(4, 1, 1),
        "the last finish, flushed by the shutdown"
    );
}
