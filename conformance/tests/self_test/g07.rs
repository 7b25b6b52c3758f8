//! The flaws that break G7, schedule: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claiming_future_items_fails_g07() {
    must_fail(
        Flaw::ClaimsFutureItems,
        "g07_schedule",
        "a_delayed_item_is_invisible_until_due",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_delay_fails_g07() {
    must_fail(
        Flaw::FixedDelay,
        "g07_schedule",
        "an_enqueue_delay_decides_when_the_item_is_due",
    )
    .await;
}
