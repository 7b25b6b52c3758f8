//! The flaws that break G17, rate limits: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_rate_windows_fail_the_window_edges_case_alone() {
    must_fail_only(
        FlawedHarness(Flaw::RatesInFixedWindows),
        "g17_rate_limits",
        "a_key_rate_holds_in_every_window_probed_at_its_edges",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rate_counted_over_the_queue_fails_the_other_keys_case_alone() {
    must_fail_only(
        FlawedHarness(Flaw::KeyRateCountsTheWholeQueue),
        "g17_rate_limits",
        "a_key_at_its_rate_holds_up_no_other_key_and_its_items_use_no_attempt",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_queue_rate_fails_the_queue_rate_case_alone() {
    must_fail_only(
        FlawedHarness(Flaw::IgnoresQueueRate),
        "g17_rate_limits",
        "a_queue_rate_caps_starts_across_keys",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_deferrals_fail_the_deferral_case_alone() {
    must_fail_only(
        FlawedHarness(Flaw::IgnoresDeferrals),
        "g17_rate_limits",
        "a_deferred_key_starts_nothing_until_its_time_and_holds_up_no_other_key",
    )
    .await;
}
