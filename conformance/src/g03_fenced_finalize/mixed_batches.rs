//! G3 in batches: the runtime batches every operation on running items, so each of
//! renew, complete, fail and release gets one batch that mixes every kind of token,
//! `[current a, stale, unknown, finished, current b]`:
//!
//! - stale: the item was released and re-claimed (attempt 2 runs), the token is attempt 1;
//! - unknown: no such item;
//! - finished: the item was completed before the batch.
//!
//! The answers come per token, in order; only the two current tokens change anything,
//! and the others' items read exactly as before.
//!
use std::time::Duration;

use tenure_core::{
    CompleteParams, FailOutcome, FailParams, Item, ItemId, ItemState, LeaseToken, ReleaseParams,
    RenewOutcome, RenewParams, Store, TokenOutcome,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{
    ensure_eq, expect_absent, expect_finished, expect_state, expect_unchanged, get, pass, OrFail,
};
use crate::fixtures::{
    claim, claim_one, complete, enqueue_n, owner, permanent, queue, release, retry,
};
use crate::harness::Harness;

/// The batch `[current a, stale, unknown, finished, current b]` and what the items of
/// the three lost tokens looked like just before it.
struct Mixed {
    batch: Vec<LeaseToken>,
    current: [LeaseToken; 2],
    /// The stale token's item, running attempt 2 for someone else.
    stale_item: Item,
    /// The finished item as it reads (done, or deleted: `None`).
    finished: (ItemId, Option<Item>),
    unknown: ItemId,
}

async fn mixed<H: Harness>(env: &Env<'_, H>) -> Result<Mixed, Failure> {
    let q = queue("g03-mixed")?;
    let ids = enqueue_n(env.store(), &q, 4).await?;
    let leases = claim(env.store(), &q, &owner("w1")?, 4).await?;
    let token_of = |id: ItemId| -> Result<LeaseToken, Failure> {
        leases
            .iter()
            .find(|l| l.token.id == id)
            .map(|l| l.token)
            .ok_or_else(|| {
                Failure::new("a claim of 4 to hold all four items", format!("{leases:?}"))
            })
    };
    let (a, stale, finished, b) = (
        token_of(ids[0])?,
        token_of(ids[1])?,
        token_of(ids[2])?,
        token_of(ids[3])?,
    );
    ensure_eq(
        release(env.store(), stale).await?,
        TokenOutcome::Accepted,
        "the release of the item to re-claim",
    )?;
    let again = claim_one(env.store(), &q, &owner("w2")?, "the re-claim").await?;
    ensure_eq(
        again.token.item_attempt(),
        (stale.id, 2),
        "the re-claim's token",
    )?;
    ensure_eq(
        complete(env.store(), finished).await?,
        TokenOutcome::Accepted,
        "the complete before the batch",
    )?;
    expect_finished(env.store(), finished.id, "after its complete").await?;
    let unknown = LeaseToken::new(ItemId::new(), 1, tenure_core::LeaseId::mint());
    // Time moves on, so a write to a lost token's item would show in its timestamps.
    env.advance(Duration::from_secs(5));
    Ok(Mixed {
        batch: vec![a, stale, unknown, finished, b],
        current: [a, b],
        stale_item: get(env.store(), stale.id).await?,
        finished: (
            finished.id,
            env.store()
                .item_get(finished.id)
                .await
                .or_fail("item_get")?,
        ),
        unknown: unknown.id,
    })
}

impl Mixed {
    /// The three lost tokens' items must read as before the batch.
    async fn expect_lost_untouched<S: Store + ?Sized>(
        &self,
        store: &S,
        op: &str,
    ) -> Result<(), Failure> {
        let after = format!("a mixed {op} batch");
        expect_unchanged(store, &self.stale_item, &after).await?;
        let (id, before) = &self.finished;
        let now = store.item_get(*id).await.or_fail("item_get")?;
        ensure_eq(
            now.as_ref(),
            before.as_ref(),
            &format!("the finished item {id} after {after}"),
        )?;
        expect_absent(store, self.unknown, &after).await
    }
}

pub(super) async fn a_mixed_renew_batch_renews_only_the_current_tokens_answering_each_in_order<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let m = mixed(&env).await?;
    let lease_for = Duration::from_secs(45);
    let told = env
        .store()
        .renew(RenewParams::new(m.batch.clone(), lease_for))
        .await
        .or_fail("renew")?;
    let renewed = RenewOutcome::Renewed {
        expires_at: env.now() + lease_for,
        renewals: 1,
    };
    let lost = RenewOutcome::LeaseLost;
    ensure_eq(
        told,
        vec![renewed, lost, lost, lost, renewed],
        "the answers to renew [current a, stale, unknown, finished, current b]",
    )?;
    for t in m.current {
        let it = expect_state(env.store(), t.id, ItemState::Running, "after its renew").await?;
        ensure_eq(
            (it.token(), it.lease_expires_at, it.renewals),
            (t, Some(env.now() + lease_for), 1),
            "a current item after the batch: (token, expiry, renewals)",
        )?;
    }
    m.expect_lost_untouched(env.store(), "renew").await?;
    pass()
}

pub(super) async fn a_mixed_complete_batch_completes_only_the_current_tokens_answering_each_in_order<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let m = mixed(&env).await?;
    let told = env
        .store()
        .complete(CompleteParams::new(m.batch.clone()))
        .await
        .or_fail("complete")?;
    let (ok, lost) = (TokenOutcome::Accepted, TokenOutcome::LeaseLost);
    ensure_eq(
        told,
        vec![ok, lost, lost, lost, ok],
        "the answers to complete [current a, stale, unknown, finished, current b]",
    )?;
    for t in m.current {
        expect_finished(env.store(), t.id, "after its complete").await?;
    }
    m.expect_lost_untouched(env.store(), "complete").await?;
    pass()
}

pub(super) async fn a_mixed_fail_batch_fails_only_the_current_tokens_answering_each_in_order<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let m = mixed(&env).await?;
    let delay = Duration::from_secs(90);
    // Current a retries, current b fails for good; the lost ones try both kinds.
    let failures = vec![
        retry(m.batch[0], delay, "a: again"),
        permanent(m.batch[1], "stale"),
        retry(m.batch[2], delay, "unknown"),
        permanent(m.batch[3], "finished"),
        permanent(m.batch[4], "b: broken"),
    ];
    let told = env
        .store()
        .fail(FailParams::new(failures))
        .await
        .or_fail("fail")?;
    let lost = FailOutcome::LeaseLost;
    ensure_eq(
        told,
        vec![
            FailOutcome::Retrying {
                run_at: env.now() + delay,
            },
            lost,
            lost,
            lost,
            FailOutcome::Dead,
        ],
        "the answers to fail [current a (retry), stale, unknown, finished, current b (permanent)]",
    )?;
    let a = expect_state(
        env.store(),
        m.current[0].id,
        ItemState::Ready,
        "after its retry",
    )
    .await?;
    ensure_eq(
        (a.attempt, a.run_at, a.last_error.as_deref()),
        (1, env.now() + delay, Some("a: again")),
        "current a after the batch: (attempt, run_at, last_error)",
    )?;
    let b = expect_state(
        env.store(),
        m.current[1].id,
        ItemState::Dead,
        "after its failure",
    )
    .await?;
    ensure_eq(
        b.last_error.as_deref(),
        Some("b: broken"),
        "current b's last_error",
    )?;
    m.expect_lost_untouched(env.store(), "fail").await?;
    pass()
}

pub(super) async fn a_mixed_release_batch_releases_only_the_current_tokens_answering_each_in_order<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let m = mixed(&env).await?;
    let told = env
        .store()
        .release(ReleaseParams::new(m.batch.clone()))
        .await
        .or_fail("release")?;
    let (ok, lost) = (TokenOutcome::Accepted, TokenOutcome::LeaseLost);
    ensure_eq(
        told,
        vec![ok, lost, lost, lost, ok],
        "the answers to release [current a, stale, unknown, finished, current b]",
    )?;
    for t in m.current {
        let it = expect_state(env.store(), t.id, ItemState::Ready, "after its release").await?;
        ensure_eq(
            (it.attempt, it.run_at),
            (t.attempt, env.now()),
            "a released item: (attempt kept, run_at now)",
        )?;
    }
    m.expect_lost_untouched(env.store(), "release").await?;
    pass()
}
