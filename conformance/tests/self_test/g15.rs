//! The flaws that break G15, bad input: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_before_validating_fails_g15() {
    must_fail(
        Flaw::WritesBeforeValidating,
        "g15_bad_input",
        "an_oversized_payload_names_payload_and_writes_nothing",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_a_run_at_outside_the_window_fails_g15() {
    must_fail(
        Flaw::ClampsRunAtIntoTheWindow,
        "g15_bad_input",
        "a_run_at_beyond_the_schedule_window_names_run_at_and_writes_nothing",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_a_delay_beyond_the_window_fails_g15() {
    must_fail(
        Flaw::ClampsLongDelays,
        "g15_bad_input",
        "a_delay_beyond_the_schedule_window_names_delay_and_writes_nothing",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncating_the_queue_list_fails_g15() {
    must_fail(
        Flaw::TruncatesTheQueueList,
        "g15_bad_input",
        "a_claim_naming_more_queues_than_the_limit_names_queues_and_changes_nothing",
    )
    .await;
}
