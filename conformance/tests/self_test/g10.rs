//! The flaws that break G10, scope: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_scope_fails_g10() {
    must_fail(
        FlawedHarness(Flaw::IgnoresScope),
        "g10_scope",
        "a_busy_scope_is_passed_over_for_the_next_eligible_item",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keying_scopes_by_queue_fails_g10_across_queues() {
    must_fail(
        FlawedHarness(Flaw::ScopesPerQueue),
        "g10_scope",
        "a_busy_scope_is_passed_over_in_every_queue",
    )
    .await;
}
