//! The flaws that break G16, concurrency limits: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_sharing_one_count_fail_the_eight_peer_hammer_alone() {
    must_fail_only(
        FlawedHarness(Flaw::ConcurrentClaimsShareOneCount),
        "g16_concurrency_limits",
        "a_key_limit_hammered_by_eight_peers_is_never_exceeded",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_freed_at_half_the_lease_fails_the_crashed_holder_alone() {
    must_fail_only(
        FlawedHarness(Flaw::FreesTheSlotAtHalfTheLease),
        "g16_concurrency_limits",
        "a_crashed_holders_slot_comes_back_at_its_lease_expiry_and_not_before",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_finish_freeing_a_slot_fails_the_takeover_case_alone() {
    must_fail_only(
        FlawedHarness(Flaw::StaleFinishFreesASlot),
        "g16_concurrency_limits",
        "a_stale_finish_after_a_takeover_frees_no_slot",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_completes_fenced_on_the_attempt_fail_the_failover_case_alone() {
    must_fail_only(
        FlawedHarness(Flaw::FencesLimitedItemsOnTheAttemptOnly),
        "g16_concurrency_limits",
        "a_claim_lost_in_a_failover_frees_no_slot_through_its_token",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_behind_a_saturated_key_fails_the_head_of_line_case_alone() {
    must_fail_only(
        FlawedHarness(Flaw::WaitsBehindASaturatedKey),
        "g16_concurrency_limits",
        "a_saturated_key_is_passed_over_for_free_keys",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_overrides_fail_the_override_case_alone() {
    must_fail_only(
        FlawedHarness(Flaw::IgnoresKeyOverrides),
        "g16_concurrency_limits",
        "a_key_override_wins_over_the_per_key_default",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_queue_limit_fails_the_queue_wide_case_alone() {
    must_fail_only(
        FlawedHarness(Flaw::IgnoresQueueConcurrency),
        "g16_concurrency_limits",
        "a_queue_wide_limit_caps_running_items_across_keys",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_limit_changes_fail_the_lowering_case_alone() {
    must_fail_only(
        FlawedHarness(Flaw::IgnoresLimitChanges),
        "g16_concurrency_limits",
        "lowering_a_limit_preempts_nothing_and_stops_new_claims",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clamped_bad_limits_fail_the_bad_input_case_alone() {
    must_fail_only(
        FlawedHarness(Flaw::ClampsBadLimits),
        "g16_concurrency_limits",
        "bad_limits_name_their_field_and_write_nothing",
    )
    .await;
}
