//! The flaws that break G6, stalls: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_max_stalls_fails_g06() {
    must_fail(
        FlawedHarness(Flaw::IgnoresMaxStalls),
        "g06_stalls",
        "dead_after_max_stalls_with_a_stalled_error",
    )
    .await;
}
