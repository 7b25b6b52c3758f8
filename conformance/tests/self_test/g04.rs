//! The flaws that break G4, the renewal cap: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_renewal_cap_fails_g04() {
    must_fail(
        broken::<NoRenewalCap>(),
        "g04_renewal_cap",
        "renewal_beyond_the_cap_is_refused_and_keeps_the_expiry",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_renewal_lease_fails_g04() {
    must_fail(
        broken::<FixedRenewLease>(),
        "g04_renewal_cap",
        "the_renewals_lease_duration_decides_the_new_expiry",
    )
    .await;
}

flaw! {
    /// Renews every lease for 30 s, whatever was asked (G4).
    FixedRenewLease
}

tenure_core::forward_store! {
    impl Store for FixedRenewLease {
        forward self => self.inner;

        async fn renew(&self, mut params: RenewParams) -> Result<Vec<RenewOutcome>> {
            params.lease_for = Duration::from_secs(30);
            self.inner.renew(params).await
        }
    }
}

flaw! {
    /// Raises every item's renewal cap out of reach, showing the real cap on reads (G4).
    NoRenewalCap { caps: Shared<HashMap<ItemId, u32>> }
}

impl NoRenewalCap {
    fn hide(&self, item: &mut NewItem) -> Result<()> {
        if item.max_renewals <= MAX_ATTEMPTS_LIMIT {
            lock(&self.caps).insert(item.id, item.max_renewals);
            item.max_renewals = MAX_ATTEMPTS_LIMIT;
        }
        Ok(())
    }

    fn show(&self, item: &mut Item) {
        if let Some(&n) = lock(&self.caps).get(&item.id) {
            item.max_renewals = n;
        }
    }
}

hidden_on_enqueue!(NoRenewalCap);
