//! The flaws that break the operator's inspection: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_the_cursor_fails_op_inspection() {
    must_fail(
        FlawedHarness(Flaw::ListingIgnoresTheCursor),
        "op_inspection",
        "pages_show_every_item_once_in_enqueue_order_either_way",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_scheduled_items_as_ready_fails_op_inspection() {
    must_fail(
        FlawedHarness(Flaw::ListsScheduledAsReady),
        "op_inspection",
        "listings_split_items_by_state_and_carry_attempt_owner_expiry_and_error",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_without_pause_or_age_fail_op_inspection() {
    must_fail(
        FlawedHarness(Flaw::CountsWithoutPauseOrAge),
        "op_inspection",
        "queue_counts_report_the_oldest_due_wait_and_the_pause",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measuring_the_oldest_wait_from_the_enqueue_fails_op_inspection_alone() {
    must_fail_only(
        FlawedHarness(Flaw::OldestAgeFromEnqueue),
        "op_inspection",
        "the_oldest_due_wait_of_a_delayed_or_retried_item_counts_from_its_run_at",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_queues_by_name_prefix_fails_op_inspection_alone() {
    must_fail_only(
        FlawedHarness(Flaw::ListsQueuesByNamePrefix),
        "op_inspection",
        "a_queue_shows_nothing_of_the_queues_whose_names_it_begins",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hiding_expired_unrecovered_leases_fails_op_inspection_alone() {
    must_fail_only(
        FlawedHarness(Flaw::LeaseListHidesExpired),
        "op_inspection",
        "lease_list_shows_an_expired_lease_until_it_is_recovered",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_list_missing_scheduled_and_running_queues_fails_op_inspection_alone() {
    must_fail_only(
        FlawedHarness(Flaw::QueueListSkipsScheduledAndRunningQueues),
        "op_inspection",
        "queue_list_names_a_queue_whose_only_items_are_scheduled_running_or_kept_done",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_cursor_holding_only_the_expiry_fails_op_inspection_alone() {
    must_fail_only(
        FlawedHarness(Flaw::LeaseCursorByExpiryOnly),
        "op_inspection",
        "lease_pages_show_leases_of_one_expiry_each_once",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_a_due_delayed_item_as_scheduled_fails_op_inspection_alone() {
    must_fail_only(
        FlawedHarness(Flaw::ListsDelayedItemsAsScheduledOnceDue),
        "op_inspection",
        "a_delayed_item_is_listed_ready_from_the_instant_it_is_due",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_without_kept_finished_items_fail_op_inspection_alone() {
    must_fail_only(
        FlawedHarness(Flaw::CountsNoFinishedItems),
        "op_inspection",
        "queue_counts_count_kept_finished_items_as_done",
    )
    .await;
}
