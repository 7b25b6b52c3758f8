//! G6 Stalls: every expired lease counts a stall; when recovery has counted
//! `max_stalls` of them the item goes dead (stalled) instead of ready.

use std::time::Duration;

use tenure_core::machine::STALLED_ERROR_PREFIX;
use tenure_core::{
    FailOutcome, Item, ItemState, RecoverParams, RequeueParams, Store, TokenOutcome,
};

use crate::case::{register, Case, CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_counts, expect_state, pass, OrFail};
use crate::fixtures::{
    claim_none, claim_one, counts, enqueue_one, fail, item, owner, queue, release, retry, LEASE,
};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g06_stalls";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        dead_after_max_stalls_with_a_stalled_error,
        a_claim_recovering_the_last_stall_leaves_the_item_dead,
        stalls_accumulate_across_attempts_and_a_requeue_resets_them,
        a_release_or_a_failure_counts_no_stall,
    ]
}

fn stalled(item: &Item) -> Result<(), Failure> {
    ensure(
        item.last_error
            .as_deref()
            .is_some_and(|e| e.starts_with(STALLED_ERROR_PREFIX)),
        format!(
            "the last_error of an item dead by stalling to start with {STALLED_ERROR_PREFIX:?}"
        ),
        &item.last_error,
    )
}

async fn dead_after_max_stalls_with_a_stalled_error<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g06")?;
    let id = enqueue_one(env.store(), item(&q).max_stalls(2)).await?;
    let w = owner("w1")?;
    for (round, (requeued, dead)) in [(1, 0), (0, 1)].into_iter().enumerate() {
        claim_one(env.store(), &q, &w, "the claim before a stall").await?;
        env.advance(LEASE);
        let r = env
            .store()
            .recover_expired(RecoverParams::default())
            .await
            .or_fail("recover_expired")?;
        ensure_eq(
            (r.requeued, r.dead),
            (requeued, dead),
            &format!("recovery of stall {} of 2 (requeued, dead)", round + 1),
        )?;
    }
    let it = expect_state(env.store(), id, ItemState::Dead, "after its last stall").await?;
    ensure_eq(it.stalls, 2, "stalls of the dead item")?;
    ensure_eq(
        (it.owner.clone(), it.lease_expires_at),
        (None, None),
        "owner and expiry",
    )?;
    stalled(&it)?;
    claim_none(env.store(), &q, &w, "the only item stalled to death").await?;
    pass()
}

async fn a_claim_recovering_the_last_stall_leaves_the_item_dead<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g06")?;
    let id = enqueue_one(env.store(), item(&q).max_stalls(1)).await?;
    claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    env.advance(LEASE);
    let peer = env.peer().await?;
    claim_none(
        &*peer,
        &q,
        &owner("w2")?,
        "the expired item used its only stall",
    )
    .await?;
    let it = expect_state(
        env.store(),
        id,
        ItemState::Dead,
        "after the claim recovered it",
    )
    .await?;
    stalled(&it)?;
    expect_counts(
        env.store(),
        &q,
        counts(0, 0, 0, 1, 0),
        "with one stalled item",
    )
    .await?;
    pass()
}

async fn stalls_accumulate_across_attempts_and_a_requeue_resets_them<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g06")?;
    let id = enqueue_one(env.store(), item(&q).max_stalls(3)).await?;
    let w = owner("w1")?;
    claim_one(env.store(), &q, &w, "attempt 1").await?;
    for attempt in 2..=3 {
        env.advance(LEASE);
        let lease = claim_one(env.store(), &q, &w, "the reclaim after a stall").await?;
        ensure_eq(
            lease.token.item_attempt(),
            (id, attempt),
            "the reclaim's token",
        )?;
        ensure_eq(
            lease.item.stalls,
            attempt - 1,
            "stalls carried into the new attempt",
        )?;
    }
    env.advance(LEASE);
    claim_none(
        env.store(),
        &q,
        &w,
        "the third stall of three kills the item",
    )
    .await?;
    expect_state(env.store(), id, ItemState::Dead, "after three stalls").await?;
    let n = env
        .store()
        .dead_requeue(RequeueParams::new(vec![id]))
        .await
        .or_fail("dead_requeue")?;
    ensure_eq(n, 1, "items requeued")?;
    let it = expect_state(env.store(), id, ItemState::Ready, "after a requeue").await?;
    ensure_eq(it.stalls, 0, "stalls after a requeue")?;
    let lease = claim_one(env.store(), &q, &w, "the claim after a requeue").await?;
    ensure_eq(
        lease.token.item_attempt(),
        (id, 4),
        "the token after a requeue",
    )?;
    pass()
}

async fn a_release_or_a_failure_counts_no_stall<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g06")?;
    let id = enqueue_one(env.store(), item(&q).max_stalls(1)).await?;
    let w = owner("w1")?;
    let first = claim_one(env.store(), &q, &w, "attempt 1").await?;
    ensure_eq(
        release(env.store(), first.token).await?,
        TokenOutcome::Accepted,
        "the release",
    )?;
    let second = claim_one(env.store(), &q, &w, "attempt 2").await?;
    let told = fail(env.store(), retry(second.token, Duration::ZERO, "soft")).await?;
    ensure_eq(
        told,
        FailOutcome::Retrying { run_at: env.now() },
        "the retryable failure",
    )?;
    let it = expect_state(
        env.store(),
        id,
        ItemState::Ready,
        "after a release and a failure",
    )
    .await?;
    ensure_eq(it.stalls, 0, "stalls after a release and a failure")?;
    let third = claim_one(env.store(), &q, &w, "attempt 3").await?;
    ensure_eq(third.token.item_attempt(), (id, 3), "the third token")?;
    pass()
}
