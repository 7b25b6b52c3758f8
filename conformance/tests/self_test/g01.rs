//! The flaws that break G1, exclusive claim: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handing_one_item_to_two_claimers_fails_g01() {
    must_fail(
        Flaw::HandsOneItemToTwoClaimers,
        "g01_exclusive_claim",
        "a_claimed_item_is_not_claimed_again_while_its_lease_is_live",
    )
    .await;
}
