//! G5 Retry and dead letter: a retryable failure puts the item back at
//! `run_at = now + delay`; `max_attempts` exhausted or a permanent failure make it dead
//! with the last error kept; an operator can requeue (never lowering `attempt`) or
//! discard dead items.

use std::time::Duration;

use tenure_core::{
    DiscardParams, FailOutcome, ItemState, RequeueParams, RetryPolicy, Store, TokenOutcome,
};

use crate::case::{register, Case, CaseResult, Env};
use crate::check::{
    ensure_eq, expect_absent, expect_counts, expect_state, expect_unchanged, get, pass, OrFail,
};
use crate::fixtures::{
    claim_none, claim_one, complete, counts, enqueue_one, fail, item, kill_next, owner, permanent,
    queue, release, retry, TICK,
};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g05_retry";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        a_retryable_failure_waits_for_its_delay_keeping_the_attempt,
        failures_follow_the_retry_policy_schedule,
        dead_after_max_attempts_with_the_last_error_kept,
        a_permanent_failure_is_dead_at_once,
        requeue_keeps_the_attempt_so_old_tokens_stay_lost,
        requeue_grants_the_additional_attempts,
        requeue_and_discard_leave_items_that_are_not_dead_alone,
        discard_deletes_dead_items,
        a_release_gives_the_item_back_at_once_without_a_failure,
        a_release_does_not_use_up_the_attempts,
    ]
}

async fn a_retryable_failure_waits_for_its_delay_keeping_the_attempt<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g05")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let w = owner("w1")?;
    let lease = claim_one(env.store(), &q, &w, "the first claim").await?;
    let delay = Duration::from_secs(10);
    let due = env.now() + delay;
    let told = fail(env.store(), retry(lease.token, delay, "boom")).await?;
    ensure_eq(
        told,
        FailOutcome::Retrying { run_at: due },
        "the answer to a retryable failure",
    )?;
    let it = expect_state(
        env.store(),
        id,
        ItemState::Ready,
        "after a retryable failure",
    )
    .await?;
    ensure_eq(
        it.attempt,
        1,
        "the attempt after a retryable failure (kept)",
    )?;
    ensure_eq(it.run_at, due, "run_at after a retryable failure")?;
    ensure_eq(it.last_error.as_deref(), Some("boom"), "last_error")?;
    ensure_eq(
        (it.owner, it.lease_expires_at),
        (None, None),
        "owner and expiry",
    )?;
    expect_counts(
        env.store(),
        &q,
        counts(0, 1, 0, 0, 0),
        "while waiting for the retry",
    )
    .await?;
    env.advance(delay - TICK);
    claim_none(env.store(), &q, &w, "the retry is due in one tick").await?;
    env.advance(TICK);
    let again = claim_one(env.store(), &q, &w, "the claim of the due retry").await?;
    ensure_eq(again.token.item_attempt(), (id, 2), "the retry's token")?;
    pass()
}

async fn failures_follow_the_retry_policy_schedule<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g05")?;
    let id = enqueue_one(env.store(), item(&q).max_attempts(10)).await?;
    let w = owner("w1")?;
    let policy =
        RetryPolicy::exponential(Duration::from_secs(1), Duration::from_secs(4)).with_jitter(0.0);
    for (attempt, secs) in [(1, 1), (2, 2), (3, 4), (4, 4)] {
        let lease = claim_one(env.store(), &q, &w, "the claim of the due retry").await?;
        ensure_eq(
            lease.token.item_attempt(),
            (id, attempt),
            "the claimed token",
        )?;
        let delay = policy.delay(&lease.token);
        ensure_eq(delay, Duration::from_secs(secs), "the policy's delay")?;
        let told = fail(env.store(), retry(lease.token, delay, "again")).await?;
        ensure_eq(
            told,
            FailOutcome::Retrying {
                run_at: env.now() + delay,
            },
            "the answer to a retryable failure",
        )?;
        env.advance(delay - TICK);
        claim_none(env.store(), &q, &w, "the retry is due in one tick").await?;
        env.advance(TICK);
    }
    pass()
}

async fn dead_after_max_attempts_with_the_last_error_kept<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g05")?;
    let id = enqueue_one(env.store(), item(&q).max_attempts(2)).await?;
    let w = owner("w1")?;
    let first = claim_one(env.store(), &q, &w, "the first claim").await?;
    let told = fail(env.store(), retry(first.token, Duration::ZERO, "first")).await?;
    ensure_eq(
        told,
        FailOutcome::Retrying { run_at: env.now() },
        "attempt 1 of 2 failing",
    )?;
    let second = claim_one(env.store(), &q, &w, "the second claim").await?;
    let told = fail(env.store(), retry(second.token, Duration::ZERO, "second")).await?;
    ensure_eq(told, FailOutcome::Dead, "attempt 2 of 2 failing")?;
    let it = expect_state(
        env.store(),
        id,
        ItemState::Dead,
        "after its last attempt failed",
    )
    .await?;
    ensure_eq(
        it.last_error.as_deref(),
        Some("second"),
        "last_error of the dead item",
    )?;
    ensure_eq(it.attempt, 2, "the dead item's attempt")?;
    claim_none(env.store(), &q, &w, "the only item is dead").await?;
    expect_counts(env.store(), &q, counts(0, 0, 0, 1, 0), "with one dead item").await?;
    pass()
}

async fn a_permanent_failure_is_dead_at_once<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g05")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    let told = fail(env.store(), permanent(lease.token, "bad payload")).await?;
    ensure_eq(told, FailOutcome::Dead, "the answer to a permanent failure")?;
    let it = expect_state(
        env.store(),
        id,
        ItemState::Dead,
        "after a permanent failure",
    )
    .await?;
    ensure_eq(it.last_error.as_deref(), Some("bad payload"), "last_error")?;
    ensure_eq(
        (it.owner, it.lease_expires_at),
        (None, None),
        "owner and expiry",
    )?;
    pass()
}

async fn requeue_keeps_the_attempt_so_old_tokens_stay_lost<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g05")?;
    let id = enqueue_one(env.store(), item(&q).max_attempts(1)).await?;
    let w = owner("w1")?;
    let lease = claim_one(env.store(), &q, &w, "the claim").await?;
    let told = fail(env.store(), retry(lease.token, Duration::ZERO, "boom")).await?;
    ensure_eq(told, FailOutcome::Dead, "attempt 1 of 1 failing")?;
    env.advance(Duration::from_secs(60));
    let n = env
        .store()
        .dead_requeue(RequeueParams::new(vec![id]))
        .await
        .or_fail("dead_requeue")?;
    ensure_eq(n, 1, "items requeued")?;
    let it = expect_state(env.store(), id, ItemState::Ready, "after a requeue").await?;
    ensure_eq(it.attempt, 1, "the attempt after a requeue (never lowered)")?;
    ensure_eq(
        it.max_attempts >= 2,
        true,
        "max_attempts >= attempt + 1 after a requeue",
    )?;
    ensure_eq(it.stalls, 0, "stalls after a requeue")?;
    ensure_eq(it.run_at, env.now(), "run_at after a requeue")?;
    ensure_eq(
        complete(env.store(), lease.token).await?,
        TokenOutcome::LeaseLost,
        "a complete with the token from before the requeue",
    )?;
    expect_unchanged(env.store(), &it, "a complete with a pre-requeue token").await?;
    let again = claim_one(env.store(), &q, &w, "the claim after a requeue").await?;
    ensure_eq(
        again.token.item_attempt(),
        (id, 2),
        "the token after a requeue",
    )?;
    ensure_eq(
        complete(env.store(), again.token).await?,
        TokenOutcome::Accepted,
        "the complete of the requeued attempt",
    )?;
    pass()
}

async fn requeue_grants_the_additional_attempts<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g05")?;
    let id = enqueue_one(env.store(), item(&q).max_attempts(1)).await?;
    let w = owner("w1")?;
    let lease = claim_one(env.store(), &q, &w, "the claim").await?;
    fail(env.store(), retry(lease.token, Duration::ZERO, "boom")).await?;
    let n = env
        .store()
        .dead_requeue(RequeueParams::new(vec![id]).additional_attempts(3))
        .await
        .or_fail("dead_requeue")?;
    ensure_eq(n, 1, "items requeued")?;
    for (attempt, expected) in [
        (2, FailOutcome::Retrying { run_at: env.now() }),
        (3, FailOutcome::Retrying { run_at: env.now() }),
        (4, FailOutcome::Dead),
    ] {
        let lease = claim_one(env.store(), &q, &w, "the claim of a granted attempt").await?;
        ensure_eq(
            lease.token.item_attempt(),
            (id, attempt),
            "the claimed token",
        )?;
        let told = fail(env.store(), retry(lease.token, Duration::ZERO, "again")).await?;
        ensure_eq(
            told,
            expected,
            "the answer to a failure after a requeue granting 3",
        )?;
    }
    pass()
}

async fn requeue_and_discard_leave_items_that_are_not_dead_alone<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g05")?;
    let running = enqueue_one(env.store(), item(&q)).await?;
    claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    let ready = enqueue_one(env.store(), item(&q)).await?;
    let before = [
        get(env.store(), running).await?,
        get(env.store(), ready).await?,
    ];
    let n = env
        .store()
        .dead_requeue(RequeueParams::new(vec![running, ready]))
        .await
        .or_fail("dead_requeue")?;
    ensure_eq(n, 0, "items requeued when none is dead")?;
    let n = env
        .store()
        .dead_discard(DiscardParams::new(vec![running, ready]))
        .await
        .or_fail("dead_discard")?;
    ensure_eq(n, 0, "items discarded when none is dead")?;
    for it in &before {
        expect_unchanged(
            env.store(),
            it,
            "requeue and discard of items that are not dead",
        )
        .await?;
    }
    pass()
}

async fn discard_deletes_dead_items<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g05")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    kill_next(env.store(), &q, &owner("w1")?).await?;
    let n = env
        .store()
        .dead_discard(DiscardParams::new(vec![id]))
        .await
        .or_fail("dead_discard")?;
    ensure_eq(n, 1, "items discarded")?;
    expect_absent(env.store(), id, "a discard").await?;
    expect_counts(env.store(), &q, counts(0, 0, 0, 0, 0), "after a discard").await?;
    let n = env
        .store()
        .dead_requeue(RequeueParams::new(vec![id]))
        .await
        .or_fail("dead_requeue")?;
    ensure_eq(n, 0, "a discarded item requeued")?;
    pass()
}

async fn a_release_gives_the_item_back_at_once_without_a_failure<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g05")?;
    let id = enqueue_one(env.store(), item(&q).max_attempts(1)).await?;
    let w = owner("w1")?;
    let lease = claim_one(env.store(), &q, &w, "the claim").await?;
    env.advance(Duration::from_secs(5));
    ensure_eq(
        release(env.store(), lease.token).await?,
        TokenOutcome::Accepted,
        "the release",
    )?;
    let it = expect_state(env.store(), id, ItemState::Ready, "after a release").await?;
    ensure_eq(it.run_at, env.now(), "run_at after a release")?;
    ensure_eq(it.attempt, 1, "the attempt after a release (kept)")?;
    ensure_eq(
        (it.stalls, it.last_error.clone()),
        (0, None),
        "stalls and last_error after a release",
    )?;
    ensure_eq(
        it.max_attempts,
        2,
        "max_attempts after a release (one more)",
    )?;
    let again = claim_one(env.store(), &q, &w, "the claim after a release").await?;
    ensure_eq(
        again.token.item_attempt(),
        (id, 2),
        "the token after a release",
    )?;
    pass()
}

async fn a_release_does_not_use_up_the_attempts<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g05")?;
    let id = enqueue_one(env.store(), item(&q).max_attempts(2)).await?;
    let w = owner("w1")?;
    let first = claim_one(env.store(), &q, &w, "the first claim").await?;
    ensure_eq(
        release(env.store(), first.token).await?,
        TokenOutcome::Accepted,
        "the release",
    )?;
    let second = claim_one(env.store(), &q, &w, "the claim after the release").await?;
    let delay = Duration::from_secs(1);
    ensure_eq(
        fail(env.store(), retry(second.token, delay, "first failure")).await?,
        FailOutcome::Retrying {
            run_at: env.now() + delay,
        },
        "the first failure after a release (one of two attempts used)",
    )?;
    env.advance(delay);
    let third = claim_one(env.store(), &q, &w, "the claim after the retry").await?;
    ensure_eq(
        fail(env.store(), retry(third.token, delay, "second failure")).await?,
        FailOutcome::Dead,
        "the second failure (both attempts used)",
    )?;
    expect_state(env.store(), id, ItemState::Dead, "after two failures").await?;
    pass()
}
