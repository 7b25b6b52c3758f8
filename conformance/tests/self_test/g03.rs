//! The flaws that break G3, fenced finalize: each broken store must fail the cases named with it.
//!
//! A lease id forged beside the right `(id, attempt)` is refused without any failover,
//! alone and in batches (issue 27).

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_on_the_attempt_alone_fails_g03_after_a_forgetful_failover() {
    must_fail(
        FlawedHarness(Flaw::FencesOnTheAttemptOnly),
        "g03_fenced_finalize",
        "a_claim_lost_in_a_failover_leaves_its_token_refused",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_the_attempt_on_complete_fails_g03() {
    must_fail(
        FlawedHarness(Flaw::IgnoresAttemptOnComplete),
        "g03_fenced_finalize",
        "stale_complete_after_a_reclaim_is_lease_lost_and_changes_nothing",
    )
    .await;
}

const FORGED: (&str, &str) = (
    "g03_fenced_finalize",
    "a_token_of_the_right_attempt_and_another_lease_id_is_refused_on_every_path",
);

const FAILOVER: (&str, &str) = (
    "g03_fenced_finalize",
    "a_claim_lost_in_a_failover_leaves_its_token_refused",
);

/// [`FlawedHarness`] without [`Harness::snapshot`], as a third party's harness.
struct FlawedWithoutSnapshots(FlawedHarness);

#[async_trait]
impl Harness for FlawedWithoutSnapshots {
    type Store = Flawed;

    async fn open(&self, clock: ManualClock) -> Result<Flawed> {
        self.0.open(clock).await
    }

    async fn open_peer(&self, store: &Flawed, clock: ManualClock) -> Result<Flawed> {
        self.0.open_peer(store, clock).await
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<Flawed>> {
        self.0.open_unreachable(clock).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_fenced_on_the_attempt_fail_the_forged_token_and_failover_cases() {
    let report = run_all(&FlawedHarness(Flaw::BatchesFenceOnTheAttemptOnly)).await;
    let failed: Vec<(&str, &str)> = report.failures().map(|f| (f.group, f.case)).collect();
    assert_eq!(failed, [FAILOVER, FORGED], "exactly these\n{report}");
}

/// Without any failover: the forged-token case needs no snapshot, so a harness
/// without one still catches a store that ignores the lease id, and G3 is not
/// certified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_on_the_attempt_alone_fails_the_forged_token_case_without_a_snapshot() {
    let harness = FlawedWithoutSnapshots(FlawedHarness(Flaw::FencesOnTheAttemptOnly));
    let report = run_all(&harness).await;
    let failed: Vec<(&str, &str)> = report.failures().map(|f| (f.group, f.case)).collect();
    assert_eq!(failed, [FORGED], "exactly this\n{report}");
    let failover = format!("{}::{}", FAILOVER.0, FAILOVER.1);
    assert!(report.did_not_apply().contains(&failover), "{report}");
    let cert = report.certificate();
    assert!(!cert.groups_passed.contains(&FORGED.0), "{cert}");
}

const CASES: [&str; 4] = [
    "a_mixed_renew_batch_renews_only_the_current_tokens_answering_each_in_order",
    "a_mixed_complete_batch_completes_only_the_current_tokens_answering_each_in_order",
    "a_mixed_fail_batch_fails_only_the_current_tokens_answering_each_in_order",
    "a_mixed_release_batch_releases_only_the_current_tokens_answering_each_in_order",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answering_batches_in_id_order_fails_every_mixed_batch_of_g03() {
    must_fail_each(
        FlawedHarness(Flaw::BatchAnswersInIdOrder),
        "g03_fenced_finalize",
        &CASES,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_that_ignore_the_attempt_fail_every_mixed_batch_of_g03() {
    must_fail_each(
        FlawedHarness(Flaw::BatchesIgnoreTheAttempt),
        "g03_fenced_finalize",
        &CASES,
    )
    .await;
}
