//! The flaws that break G12, instances: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_evicting_fails_g12() {
    must_fail(
        Flaw::NeverEvicts,
        "g12_instances",
        "a_silent_instance_is_evicted_and_its_leases_released_at_once",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deregistration_skipping_unregistered_owners_fails_g12_alone() {
    must_fail_only(
        Flaw::DeregisterSkipsUnregisteredOwners,
        "g12_instances",
        "deregistering_an_owner_that_never_registered_still_releases_its_leases",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_stale_after_fails_g12() {
    must_fail(
        Flaw::FixedStaleAfter,
        "g12_instances",
        "the_stale_after_window_decides_which_instances_are_evicted",
    )
    .await;
}
