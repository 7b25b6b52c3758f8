//! The flaws that break G5, retry: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_the_retry_delay_fails_g05() {
    must_fail(
        Flaw::IgnoresRetryDelay,
        "g05_retry",
        "a_retryable_failure_waits_for_its_delay_keeping_the_attempt",
    )
    .await;
}
