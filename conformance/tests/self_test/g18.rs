//! The flaws that break G18, fair shares: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_joining_the_longest_line_fails_the_starvation_bound_alone() {
    must_fail_only(
        FlawedHarness(Flaw::ANewTenantJoinsTheLongestLine),
        "g18_fair_shares",
        "a_tenant_with_one_item_is_served_within_a_turn_beside_a_large_backlog",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_weights_fail_the_weight_ratio_alone() {
    must_fail_only(
        FlawedHarness(Flaw::IgnoresConfiguredWeights),
        "g18_fair_shares",
        "busy_tenants_are_served_in_the_ratio_of_their_weights_over_ten_thousand_claims",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shares_by_limit_key_fail_the_many_keys_tenant_alone() {
    must_fail_only(
        FlawedHarness(Flaw::FairSharesByLimitKey),
        "g18_fair_shares",
        "a_tenant_spreading_over_many_limit_keys_gains_nothing",
    )
    .await;
}
