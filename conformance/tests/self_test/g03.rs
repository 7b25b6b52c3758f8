//! The flaws that break G3, fenced finalize: each broken store must fail the cases named with it.
//!
//! A lease id forged beside the right `(id, attempt)` is refused without any failover,
//! alone and in batches (issue 27).

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_on_the_attempt_alone_fails_g03_after_a_forgetful_failover() {
    must_fail(
        broken::<FencesOnTheAttemptOnly>(),
        "g03_fenced_finalize",
        "a_claim_lost_in_a_failover_leaves_its_token_refused",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_the_attempt_on_complete_fails_g03() {
    must_fail(
        broken::<IgnoresAttemptOnComplete>(),
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

/// The harness of a flaw without [`Harness::snapshot`], as a third party's harness.
struct BrokenWithoutSnapshots<F>(Of<F>);

#[async_trait]
impl<F: Broken> Harness for BrokenWithoutSnapshots<F> {
    type Store = F;

    async fn open(&self, clock: ManualClock) -> Result<F> {
        self.0.open(clock).await
    }

    async fn open_peer(&self, store: &F, clock: ManualClock) -> Result<F> {
        self.0.open_peer(store, clock).await
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<F>> {
        self.0.open_unreachable(clock).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_fenced_on_the_attempt_fail_the_forged_token_and_failover_cases() {
    let report = run_all(&broken::<BatchesFenceOnTheAttemptOnly>()).await;
    let failed: Vec<(&str, &str)> = report.failures().map(|f| (f.group, f.case)).collect();
    assert_eq!(failed, [FAILOVER, FORGED], "exactly these\n{report}");
}

/// Without any failover: the forged-token case needs no snapshot, so a harness
/// without one still catches a store that ignores the lease id, and G3 is not
/// certified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_on_the_attempt_alone_fails_the_forged_token_case_without_a_snapshot() {
    let harness = BrokenWithoutSnapshots(broken::<FencesOnTheAttemptOnly>());
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
        broken::<BatchAnswersInIdOrder>(),
        "g03_fenced_finalize",
        &CASES,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_that_ignore_the_attempt_fail_every_mixed_batch_of_g03() {
    must_fail_each(
        broken::<BatchesIgnoreTheAttempt>(),
        "g03_fenced_finalize",
        &CASES,
    )
    .await;
}

/// Rewrites each token of a running item to that item's current lease: every such
/// token, or (`same_attempt`) only those of the item's current attempt.
async fn current_leases(
    inner: &MemoryStore,
    tokens: &mut [LeaseToken],
    same_attempt: bool,
) -> Result<()> {
    for token in tokens {
        if let Some(item) = inner.item_get(token.id).await? {
            if item.state == ItemState::Running && (!same_attempt || item.attempt == token.attempt)
            {
                *token = item.token();
            }
        }
    }
    Ok(())
}

/// The `Store` impl of a G3 flaw with a `fence` method: renew, complete, fail and
/// release hand their tokens to it before the memory store sees them.
macro_rules! fenced_by {
    ($name:ident) => {
        tenure_core::forward_store! {
            impl Store for $name {
                forward self => self.inner;

                async fn renew(&self, mut params: RenewParams) -> Result<Vec<RenewOutcome>> {
                    self.fence(&mut params.tokens).await?;
                    self.inner.renew(params).await
                }

                async fn complete(&self, mut params: CompleteParams) -> Result<Vec<TokenOutcome>> {
                    self.fence(&mut params.tokens).await?;
                    self.inner.complete(params).await
                }

                async fn fail(&self, mut params: FailParams) -> Result<Vec<FailOutcome>> {
                    let mut tokens: Vec<LeaseToken> =
                        params.failures.iter().map(|f| f.token).collect();
                    self.fence(&mut tokens).await?;
                    for (f, t) in params.failures.iter_mut().zip(tokens) {
                        f.token = t;
                    }
                    self.inner.fail(params).await
                }

                async fn release(&self, mut params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
                    self.fence(&mut params.tokens).await?;
                    self.inner.release(params).await
                }
            }
        }
    };
}

flaw! {
    /// Fences renew, complete, fail and release on `(id, attempt)` alone, not the
    /// lease id: after a failover that lost a claim, the lost lease's token validates
    /// the new lease of the same attempt number (breaks G3).
    FencesOnTheAttemptOnly
}

impl FencesOnTheAttemptOnly {
    async fn fence(&self, tokens: &mut [LeaseToken]) -> Result<()> {
        current_leases(&self.inner, tokens, true).await
    }
}

fenced_by!(FencesOnTheAttemptOnly);

flaw! {
    /// Fences a batch of more than one token on `(id, attempt)` alone, not the lease
    /// id, while single tokens are fenced in full (G3 in batches: the held-out store
    /// of issue 27).
    BatchesFenceOnTheAttemptOnly
}

impl BatchesFenceOnTheAttemptOnly {
    async fn fence(&self, tokens: &mut [LeaseToken]) -> Result<()> {
        if tokens.len() > 1 {
            current_leases(&self.inner, tokens, true).await?;
        }
        Ok(())
    }
}

fenced_by!(BatchesFenceOnTheAttemptOnly);

flaw! {
    /// Finalizes every token of a batch of more than one by the item's current
    /// attempt, whatever the token says (G3 in batches).
    BatchesIgnoreTheAttempt
}

impl BatchesIgnoreTheAttempt {
    async fn fence(&self, tokens: &mut [LeaseToken]) -> Result<()> {
        if tokens.len() > 1 {
            current_leases(&self.inner, tokens, false).await?;
        }
        Ok(())
    }
}

fenced_by!(BatchesIgnoreTheAttempt);

flaw! {
    /// Completes whatever attempt is current, whatever the token says (breaks G3).
    IgnoresAttemptOnComplete
}

tenure_core::forward_store! {
    impl Store for IgnoresAttemptOnComplete {
        forward self => self.inner;

        async fn complete(&self, mut params: CompleteParams) -> Result<Vec<TokenOutcome>> {
            current_leases(&self.inner, &mut params.tokens, false).await?;
            self.inner.complete(params).await
        }
    }
}

flaw! {
    /// Answers a batch of renew, complete, fail or release in the order of the item
    /// ids, not of the tokens (G3 in batches).
    BatchAnswersInIdOrder
}

tenure_core::forward_store! {
    impl Store for BatchAnswersInIdOrder {
        forward self => self.inner;

        async fn renew(&self, mut params: RenewParams) -> Result<Vec<RenewOutcome>> {
            params.tokens.sort_by_key(|t| t.id);
            self.inner.renew(params).await
        }

        async fn complete(&self, mut params: CompleteParams) -> Result<Vec<TokenOutcome>> {
            params.tokens.sort_by_key(|t| t.id);
            self.inner.complete(params).await
        }

        async fn fail(&self, mut params: FailParams) -> Result<Vec<FailOutcome>> {
            params.failures.sort_by_key(|f| f.token.id);
            self.inner.fail(params).await
        }

        async fn release(&self, mut params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
            params.tokens.sort_by_key(|t| t.id);
            self.inner.release(params).await
        }
    }
}
