//! The flaws that break G5, retry: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_the_retry_delay_fails_g05() {
    must_fail(
        broken::<IgnoresRetryDelay>(),
        "g05_retry",
        "a_retryable_failure_waits_for_its_delay_keeping_the_attempt",
    )
    .await;
}

flaw! {
    /// Retries at once, whatever the delay (breaks G5).
    IgnoresRetryDelay
}

tenure_core::forward_store! {
    impl Store for IgnoresRetryDelay {
        forward self => self.inner;

        async fn fail(&self, mut params: FailParams) -> Result<Vec<FailOutcome>> {
            for f in &mut params.failures {
                if let Retry::After(_) = f.retry {
                    f.retry = Retry::After(Duration::ZERO);
                }
            }
            self.inner.fail(params).await
        }
    }
}
