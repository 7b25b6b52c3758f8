//! The flaws that break G12, instances: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_evicting_fails_g12() {
    must_fail(
        broken::<NeverEvicts>(),
        "g12_instances",
        "a_silent_instance_is_evicted_and_its_leases_released_at_once",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deregistration_skipping_unregistered_owners_fails_g12_alone() {
    must_fail_only(
        broken::<DeregisterSkipsUnregisteredOwners>(),
        "g12_instances",
        "deregistering_an_owner_that_never_registered_still_releases_its_leases",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_stale_after_fails_g12() {
    must_fail(
        broken::<FixedStaleAfter>(),
        "g12_instances",
        "the_stale_after_window_decides_which_instances_are_evicted",
    )
    .await;
}

flaw! {
    /// Never evicts anyone (breaks G12).
    NeverEvicts
}

tenure_core::forward_store! {
    impl Store for NeverEvicts {
        forward self => self.inner;

        async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted> {
            params.validate(&self.limits())?;
            Ok(Evicted::default())
        }
    }
}

flaw! {
    /// Deregisters only registered instances: an owner that is not registered keeps
    /// its leases, as a store returning early when the instance is unknown would.
    DeregisterSkipsUnregisteredOwners
}

tenure_core::forward_store! {
    impl Store for DeregisterSkipsUnregisteredOwners {
        forward self => self.inner;

        async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
            let known = self.inner.instance_list().await?;
            if !known.iter().any(|i| i.id == params.instance) {
                return Ok(Evicted::default());
            }
            self.inner.instance_deregister(params).await
        }
    }
}

flaw! {
    /// Evicts by the default 30 s silence, whatever was asked (G12).
    FixedStaleAfter
}

tenure_core::forward_store! {
    impl Store for FixedStaleAfter {
        forward self => self.inner;

        async fn instance_evict_stale(&self, mut params: EvictParams) -> Result<Evicted> {
            params.stale_after = Duration::from_secs(30);
            self.inner.instance_evict_stale(params).await
        }
    }
}
