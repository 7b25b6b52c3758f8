//! Progress a handler reports travels with the renewals the runtime sends anyway: no
//! extra store call, kept by the store, read back with the item.

use std::time::Duration;

use tenure_core::{ErrorKind, Progress};
use tenure_runtime::{Job, JobError, Worker};

use crate::support::{enqueue, item, memory, queue, until, Probe};

#[tokio::test(start_paused = true)]
async fn progress_reported_by_a_handler_is_stored_with_its_next_renewal_and_no_other_call() {
    let store = Probe::new(memory());
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .lease_duration(Duration::from_secs(30))
        .maintenance(false)
        .handler(move |job: Job| async move {
            let bad = job.report_progress(1.5, "too far").unwrap_err();
            assert_eq!(bad.kind(), ErrorKind::InvalidInput);
            job.report_progress(0.25, "a quarter").unwrap();
            job.report_progress(0.5, "half").unwrap();
            tokio::time::sleep(Duration::from_secs(25)).await;
            Ok::<(), JobError>(())
        })
        .spawn()
        .unwrap();
    let id = enqueue(&store, &["long"]).await[0];
    until(Duration::from_secs(5), || worker.metrics().in_flight == 1).await;
    assert_eq!(
        item(&store, id).await.progress,
        None,
        "nothing before a renewal"
    );
    until(Duration::from_secs(15), || store.calls().renews.len() == 1).await;
    let kept = item(&store, id).await.progress;
    assert_eq!(
        kept,
        Some(Progress::new(0.5, "half").unwrap().for_attempt(1)),
        "the latest report, stored with the first renewal"
    );
    until(Duration::from_secs(30), || worker.metrics().completed == 1).await;
    let calls = store.calls();
    // The renewals the lease needed, and nothing else: no call carried progress alone.
    assert_eq!(calls.renews.len(), 2, "{:?}", calls.renews);
    assert_eq!(calls.completes.len(), 1);
}
