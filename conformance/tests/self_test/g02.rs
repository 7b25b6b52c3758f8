//! The flaws that break G2, expiry: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_reclaimed_leases_fails_g02() {
    must_fail(
        broken::<LosesReclaimedLeases>(),
        "g02_expiry",
        "an_expired_lease_is_reclaimed_with_the_next_attempt",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_claim_lease_fails_g02() {
    must_fail(
        broken::<FixedClaimLease>(),
        "g02_expiry",
        "the_claims_lease_duration_decides_the_expiry_and_when_the_item_is_reclaimed",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_the_recovery_limit_fails_g02() {
    must_fail(
        broken::<IgnoresRecoverLimit>(),
        "g02_expiry",
        "a_recovery_pass_requeues_exactly_its_limit",
    )
    .await;
}

flaw! {
    /// Loses the answer of a claim that reclaimed an expired item (breaks G2).
    LosesReclaimedLeases
}

tenure_core::forward_store! {
    impl Store for LosesReclaimedLeases {
        forward self => self.inner;

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            let mut leases = self.inner.claim(params).await?;
            leases.retain(|l| l.token.attempt == 1);
            Ok(leases)
        }
    }
}

flaw! {
    /// Leases every claim for 30 s, whatever was asked (G2).
    FixedClaimLease
}

tenure_core::forward_store! {
    impl Store for FixedClaimLease {
        forward self => self.inner;

        async fn claim(&self, mut params: ClaimParams) -> Result<Vec<Lease>> {
            params.lease_for = Duration::from_secs(30);
            self.inner.claim(params).await
        }
    }
}

flaw! {
    /// Recovers every expired lease in one pass, whatever the limit (G2).
    IgnoresRecoverLimit
}

tenure_core::forward_store! {
    impl Store for IgnoresRecoverLimit {
        forward self => self.inner;

        async fn recover_expired(&self, mut params: RecoverParams) -> Result<Recovered> {
            params.limit = 1_000;
            self.inner.recover_expired(params).await
        }
    }
}
