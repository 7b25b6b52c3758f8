//! The flaws that break G2, expiry: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_reclaimed_leases_fails_g02() {
    must_fail(
        Flaw::LosesReclaimedLeases,
        "g02_expiry",
        "an_expired_lease_is_reclaimed_with_the_next_attempt",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_claim_lease_fails_g02() {
    must_fail(
        Flaw::FixedClaimLease,
        "g02_expiry",
        "the_claims_lease_duration_decides_the_expiry_and_when_the_item_is_reclaimed",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_the_recovery_limit_fails_g02() {
    must_fail(
        Flaw::IgnoresRecoverLimit,
        "g02_expiry",
        "a_recovery_pass_requeues_exactly_its_limit",
    )
    .await;
}
