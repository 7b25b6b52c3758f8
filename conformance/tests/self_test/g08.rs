//! The flaws that break G8, order: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_priority_fails_g08() {
    must_fail(
        Flaw::IgnoresPriority,
        "g08_order",
        "smaller_priority_goes_first",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_limit_off_by_one_fails_g08() {
    must_fail(
        Flaw::ClaimLimitOffByOne,
        "g08_order",
        "a_claim_takes_exactly_its_limit_in_claim_order",
    )
    .await;
}
