//! The builder refuses settings the store could never serve, naming the setting.

use std::time::Duration;

use tenure_core::{QueueName, Store};
use tenure_runtime::{Job, Worker};

use crate::support::memory;

#[tokio::test(start_paused = true)]
async fn more_queues_than_one_claim_may_name_are_refused_naming_queues() {
    let store = memory();
    let max = store.limits().max_claim_queues;
    let names = |n: usize| (0..n).map(|i| QueueName::new(format!("q{i}")).unwrap());
    let e = Worker::builder(store.clone())
        .queues(names(max + 1))
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("queues"), "{e}");
    let w = Worker::builder(store)
        .queues(names(max))
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    w.shutdown(Duration::from_secs(1)).await;
}
