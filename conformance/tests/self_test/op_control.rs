//! The flaws that break the operator's control: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_running_items_fails_op_control() {
    must_fail(
        FlawedHarness(Flaw::CancelsRunningItems),
        "op_control",
        "cancel_leaves_running_dead_and_unknown_items_alone_and_says_which",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_pause_fails_op_control() {
    must_fail(
        FlawedHarness(Flaw::IgnoresPause),
        "op_control",
        "a_paused_queue_is_not_claimed_while_held_leases_run_on",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_only_the_own_handle_fails_the_pause_race() {
    must_fail(
        FlawedHarness(Flaw::PausesOnlyItsOwnHandle),
        "op_control",
        "a_pause_racing_claims_is_told_consistently_to_every_racer",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_by_a_read_then_a_delete_fails_the_cancel_race_alone() {
    must_fail_only(
        FlawedHarness(Flaw::CancelChecksThenDeletes),
        "op_control",
        "a_cancel_racing_claims_never_leaves_an_item_both_cancelled_and_leased",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taking_dead_items_in_enqueue_order_fails_op_control_alone() {
    must_fail_only(
        FlawedHarness(Flaw::DeadFilterByEnqueueOrder),
        "op_control",
        "a_bounded_dead_filter_takes_the_earliest_dead_first",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_requeue_granting_one_attempt_fails_op_control_alone() {
    must_fail_only(
        FlawedHarness(Flaw::FilteredRequeueGrantsOneAttempt),
        "op_control",
        "a_filtered_requeue_grants_attempts_and_resets_stalls_as_a_requeue_by_id_does",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_discard_leaving_the_stream_blocked_fails_op_control_alone() {
    must_fail_only(
        FlawedHarness(Flaw::FilteredDiscardLeavesTheStreamBlocked),
        "op_control",
        "a_dead_head_discarded_or_requeued_by_filter_lets_its_stream_move_on",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_dead_filter_age_fails_op_control_alone() {
    must_fail_only(
        FlawedHarness(Flaw::DeadFilterAgeIsStrict),
        "op_control",
        "a_dead_filter_takes_an_item_dead_for_exactly_older_than",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_leaving_a_hole_in_its_stream_fails_op_control_alone() {
    must_fail_only(
        FlawedHarness(Flaw::CancelLeavesAHoleInItsStream),
        "op_control",
        "cancelling_an_item_behind_its_stream_head_leaves_the_rest_of_the_stream_in_order",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_kept_finished_items_fails_op_control_alone() {
    must_fail_only(
        FlawedHarness(Flaw::CancelDeletesKeptFinishedItems),
        "op_control",
        "cancel_leaves_a_kept_finished_item_alone_answering_done",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_passing_over_paused_queues_fails_op_control_alone() {
    must_fail_only(
        FlawedHarness(Flaw::RecoveryPassesOverPausedQueues),
        "op_control",
        "a_paused_queues_expired_lease_is_recovered_and_its_failure_accepted_as_usual",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_taking_ties_newest_first_fails_op_control_alone() {
    must_fail_only(
        FlawedHarness(Flaw::DeadFilterTiesNewestFirst),
        "op_control",
        "a_bounded_dead_filter_takes_items_that_died_together_in_enqueue_order",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_skipping_its_age_bound_fails_op_control_alone() {
    must_fail_only(
        FlawedHarness(Flaw::FilterSkipsTheAgeBound),
        "op_control",
        "bad_filter_ages_granted_attempts_and_cancel_batches_are_refused_naming_the_field",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_ignoring_age_fails_op_control() {
    must_fail(
        FlawedHarness(Flaw::FilterIgnoresAge),
        "op_control",
        "dead_items_are_requeued_and_discarded_by_queue_and_age_in_bounded_batches",
    )
    .await;
}
