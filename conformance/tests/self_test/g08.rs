//! The flaws that break G8, order: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_priority_fails_g08() {
    must_fail(
        broken::<IgnoresPriority>(),
        "g08_order",
        "smaller_priority_goes_first",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_limit_off_by_one_fails_g08() {
    must_fail(
        broken::<ClaimLimitOffByOne>(),
        "g08_order",
        "a_claim_takes_exactly_its_limit_in_claim_order",
    )
    .await;
}

flaw! {
    /// Treats every item as priority 0 (breaks G8).
    IgnoresPriority
}

tenure_core::forward_store! {
    impl Store for IgnoresPriority {
        forward self => self.inner;

        async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
            for item in &mut params.items {
                item.priority = 0;
            }
            self.inner.enqueue(params).await
        }
    }
}

flaw! {
    /// Claims one item more than the limit asks (G8).
    ClaimLimitOffByOne
}

tenure_core::forward_store! {
    impl Store for ClaimLimitOffByOne {
        forward self => self.inner;

        async fn claim(&self, mut params: ClaimParams) -> Result<Vec<Lease>> {
            params.limit += 1;
            self.inner.claim(params).await
        }
    }
}
