//! The flaws that break G7, schedule: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claiming_future_items_fails_g07() {
    must_fail(
        broken::<ClaimsFutureItems>(),
        "g07_schedule",
        "a_delayed_item_is_invisible_until_due",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_delay_fails_g07() {
    must_fail(
        broken::<FixedDelay>(),
        "g07_schedule",
        "an_enqueue_delay_decides_when_the_item_is_due",
    )
    .await;
}

flaw! {
    /// Makes every item due at once (breaks G7).
    ClaimsFutureItems
}

tenure_core::forward_store! {
    impl Store for ClaimsFutureItems {
        forward self => self.inner;

        async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
            for item in &mut params.items {
                item.schedule = Schedule::Now;
            }
            self.inner.enqueue(params).await
        }
    }
}

flaw! {
    /// Delays every delayed item by 60 s, whatever was asked (G7).
    FixedDelay
}

tenure_core::forward_store! {
    impl Store for FixedDelay {
        forward self => self.inner;

        async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
            for item in &mut params.items {
                if let Schedule::After(d) = item.schedule {
                    if d > Duration::ZERO {
                        item.schedule = Schedule::After(Duration::from_secs(60));
                    }
                }
            }
            self.inner.enqueue(params).await
        }
    }
}
