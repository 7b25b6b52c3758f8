//! G3 Fenced finalize: complete / fail / release / renew with a token that is not the
//! item's current running attempt answer "lease lost" and change nothing. A late
//! finalize of an expired lease that nobody re-claimed is accepted: the token proves
//! no other attempt started.
//!
//! A token names its lease, not only its attempt: after a failover that lost an
//! acknowledged claim (the harness's [`Harness::snapshot`] models it), the same attempt
//! number is handed out again under a new lease id, and the lost lease's token stays
//! refused. That needs no failover to test: a token with the right `(id, attempt)` and
//! a lease id no claim granted is refused on every finalize path, alone, in a batch of
//! such tokens and in a batch beside a current lease, which is still accepted.

mod lease_id;
mod mixed_batches;

use std::time::Duration;

use tenure_core::{
    ClaimParams, CompleteParams, FailOutcome, Item, ItemId, ItemState, LeaseToken, QueueName,
    RecoverParams, RenewOutcome, Store, TokenOutcome,
};

use crate::case::{register, Case, CaseResult, Env};
use crate::check::{
    ensure, ensure_eq, expect_finished, expect_state, expect_unchanged, get, pass, OrFail,
};
use crate::fixtures::{
    check_leases, claim, claim_one, complete, enqueue_n, enqueue_one, fail, item, owner, permanent,
    queue, race, release, renew, retry, retrying, HANDLES, LEASE, RACERS,
};
use crate::harness::Harness;

use lease_id::{
    a_claim_lost_in_a_failover_leaves_its_token_refused,
    a_token_of_the_right_attempt_and_another_lease_id_is_refused_on_every_path,
};
use mixed_batches::{
    a_mixed_complete_batch_completes_only_the_current_tokens_answering_each_in_order,
    a_mixed_fail_batch_fails_only_the_current_tokens_answering_each_in_order,
    a_mixed_release_batch_releases_only_the_current_tokens_answering_each_in_order,
    a_mixed_renew_batch_renews_only_the_current_tokens_answering_each_in_order,
};

pub(crate) const GROUP: &str = "g03_fenced_finalize";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        stale_complete_after_a_reclaim_is_lease_lost_and_changes_nothing,
        stale_renew_after_a_reclaim_is_lease_lost_and_changes_nothing,
        stale_fail_after_a_reclaim_is_lease_lost_and_changes_nothing,
        stale_release_after_a_reclaim_is_lease_lost_and_changes_nothing,
        a_late_complete_of_an_expired_lease_nobody_reclaimed_is_accepted,
        a_late_renew_of_an_expired_lease_nobody_reclaimed_is_accepted,
        a_late_fail_of_an_expired_lease_nobody_reclaimed_is_accepted,
        a_late_release_of_an_expired_lease_nobody_reclaimed_is_accepted,
        after_recovery_the_old_token_is_lease_lost,
        a_token_with_a_future_attempt_is_lease_lost,
        a_second_complete_of_a_finished_item_is_lease_lost,
        a_token_for_an_unknown_item_is_lease_lost,
        a_batch_complete_answers_each_token_in_order,
        one_token_completed_by_sixteen_racers_is_accepted_once,
        a_late_complete_racing_a_reclaim_is_told_the_truth,
        a_claim_lost_in_a_failover_leaves_its_token_refused,
        a_token_of_the_right_attempt_and_another_lease_id_is_refused_on_every_path,
        a_mixed_renew_batch_renews_only_the_current_tokens_answering_each_in_order,
        a_mixed_complete_batch_completes_only_the_current_tokens_answering_each_in_order,
        a_mixed_fail_batch_fails_only_the_current_tokens_answering_each_in_order,
        a_mixed_release_batch_releases_only_the_current_tokens_answering_each_in_order,
    ]
}

/// An item claimed by `w1`, expired, and re-claimed by `w2` through a peer: returns the
/// superseded token and the item as it stands (running, attempt 2).
async fn reclaimed<H: Harness>(env: &Env<'_, H>) -> Result<(LeaseToken, Item), crate::Failure> {
    let q = queue("g03")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let old = claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    env.advance(LEASE);
    let peer = env.peer().await?;
    let new = claim_one(&*peer, &q, &owner("w2")?, "the reclaim").await?;
    ensure_eq(new.token.item_attempt(), (id, 2), "the reclaim's token")?;
    let current = get(env.store(), id).await?;
    Ok((old.token, current))
}

async fn stale_complete_after_a_reclaim_is_lease_lost_and_changes_nothing<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (old, current) = reclaimed(&env).await?;
    let told = complete(env.store(), old).await?;
    ensure_eq(told, TokenOutcome::LeaseLost, "a stale complete's answer")?;
    expect_unchanged(env.store(), &current, "a stale complete").await?;
    pass()
}

async fn stale_renew_after_a_reclaim_is_lease_lost_and_changes_nothing<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (old, current) = reclaimed(&env).await?;
    let told = renew(env.store(), old, LEASE).await?;
    ensure_eq(told, RenewOutcome::LeaseLost, "a stale renew's answer")?;
    expect_unchanged(env.store(), &current, "a stale renew").await?;
    pass()
}

async fn stale_fail_after_a_reclaim_is_lease_lost_and_changes_nothing<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (old, current) = reclaimed(&env).await?;
    let told = fail(env.store(), permanent(old, "stale")).await?;
    ensure_eq(
        told,
        FailOutcome::LeaseLost,
        "a stale permanent fail's answer",
    )?;
    let told = fail(env.store(), retry(old, Duration::from_secs(1), "stale")).await?;
    ensure_eq(
        told,
        FailOutcome::LeaseLost,
        "a stale retryable fail's answer",
    )?;
    expect_unchanged(env.store(), &current, "stale fails").await?;
    pass()
}

async fn stale_release_after_a_reclaim_is_lease_lost_and_changes_nothing<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (old, current) = reclaimed(&env).await?;
    let told = release(env.store(), old).await?;
    ensure_eq(told, TokenOutcome::LeaseLost, "a stale release's answer")?;
    expect_unchanged(env.store(), &current, "a stale release").await?;
    pass()
}

/// An item claimed by `w1` whose lease ran out long ago, with nobody recovering or
/// re-claiming it.
async fn expired_unclaimed<H: Harness>(
    env: &Env<'_, H>,
) -> Result<(QueueName, LeaseToken), crate::Failure> {
    let q = queue("g03")?;
    enqueue_one(env.store(), item(&q)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    env.advance(LEASE * 2);
    Ok((q, lease.token))
}

async fn a_late_complete_of_an_expired_lease_nobody_reclaimed_is_accepted<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (_, token) = expired_unclaimed(&env).await?;
    let told = complete(env.store(), token).await?;
    ensure_eq(told, TokenOutcome::Accepted, "a late complete's answer")?;
    expect_finished(env.store(), token.id, "after a late complete").await?;
    pass()
}

async fn a_late_renew_of_an_expired_lease_nobody_reclaimed_is_accepted<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (_, token) = expired_unclaimed(&env).await?;
    let told = renew(env.store(), token, LEASE).await?;
    ensure_eq(
        told,
        RenewOutcome::Renewed {
            expires_at: env.now() + LEASE,
            renewals: 1,
        },
        "a late renew's answer",
    )?;
    let it = expect_state(
        env.store(),
        token.id,
        ItemState::Running,
        "after a late renew",
    )
    .await?;
    ensure_eq(it.token(), token, "the token after a late renew")?;
    pass()
}

async fn a_late_fail_of_an_expired_lease_nobody_reclaimed_is_accepted<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (_, token) = expired_unclaimed(&env).await?;
    let told = fail(env.store(), retry(token, Duration::from_secs(5), "late")).await?;
    ensure_eq(
        told,
        FailOutcome::Retrying {
            run_at: env.now() + Duration::from_secs(5),
        },
        "a late retryable fail's answer",
    )?;
    let it = expect_state(env.store(), token.id, ItemState::Ready, "after a late fail").await?;
    ensure_eq(
        it.last_error.as_deref(),
        Some("late"),
        "last_error after a late fail",
    )?;
    pass()
}

async fn a_late_release_of_an_expired_lease_nobody_reclaimed_is_accepted<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (_, token) = expired_unclaimed(&env).await?;
    let told = release(env.store(), token).await?;
    ensure_eq(told, TokenOutcome::Accepted, "a late release's answer")?;
    let it = expect_state(
        env.store(),
        token.id,
        ItemState::Ready,
        "after a late release",
    )
    .await?;
    ensure_eq(it.stalls, 0, "stalls after a release (not a stall)")?;
    pass()
}

async fn after_recovery_the_old_token_is_lease_lost<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let (_, token) = expired_unclaimed(&env).await?;
    let recovered = env
        .store()
        .recover_expired(RecoverParams::default())
        .await
        .or_fail("recover_expired")?;
    ensure_eq(recovered.requeued, 1, "leases recovered")?;
    let before = expect_state(env.store(), token.id, ItemState::Ready, "after recovery").await?;
    ensure_eq(
        complete(env.store(), token).await?,
        TokenOutcome::LeaseLost,
        "complete after recovery",
    )?;
    ensure_eq(
        release(env.store(), token).await?,
        TokenOutcome::LeaseLost,
        "release after recovery",
    )?;
    ensure_eq(
        renew(env.store(), token, LEASE).await?,
        RenewOutcome::LeaseLost,
        "renew after recovery",
    )?;
    ensure_eq(
        fail(env.store(), permanent(token, "x")).await?,
        FailOutcome::LeaseLost,
        "fail after recovery",
    )?;
    expect_unchanged(env.store(), &before, "finalizes with a recovered token").await?;
    pass()
}

async fn a_token_with_a_future_attempt_is_lease_lost<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g03")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    let before = get(env.store(), id).await?;
    let future = lease.token.with_attempt(lease.token.attempt + 1);
    ensure_eq(
        complete(env.store(), future).await?,
        TokenOutcome::LeaseLost,
        "complete with attempt + 1",
    )?;
    ensure_eq(
        release(env.store(), future).await?,
        TokenOutcome::LeaseLost,
        "release with attempt + 1",
    )?;
    ensure_eq(
        renew(env.store(), future, LEASE).await?,
        RenewOutcome::LeaseLost,
        "renew with attempt + 1",
    )?;
    ensure_eq(
        fail(env.store(), permanent(future, "x")).await?,
        FailOutcome::LeaseLost,
        "fail with attempt + 1",
    )?;
    expect_unchanged(env.store(), &before, "finalizes with a future attempt").await?;
    pass()
}

async fn a_second_complete_of_a_finished_item_is_lease_lost<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g03")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    ensure_eq(
        complete(env.store(), lease.token).await?,
        TokenOutcome::Accepted,
        "the first complete",
    )?;
    ensure_eq(
        complete(env.store(), lease.token).await?,
        TokenOutcome::LeaseLost,
        "the second complete",
    )?;
    ensure_eq(
        release(env.store(), lease.token).await?,
        TokenOutcome::LeaseLost,
        "a release after complete",
    )?;
    expect_finished(env.store(), id, "after a second complete").await?;
    pass()
}

async fn a_token_for_an_unknown_item_is_lease_lost<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let ghost = LeaseToken::new(ItemId::new(), 1, tenure_core::LeaseId::mint());
    ensure_eq(
        complete(env.store(), ghost).await?,
        TokenOutcome::LeaseLost,
        "complete of an unknown item",
    )?;
    ensure_eq(
        renew(env.store(), ghost, LEASE).await?,
        RenewOutcome::LeaseLost,
        "renew of an unknown item",
    )?;
    ensure_eq(
        release(env.store(), ghost).await?,
        TokenOutcome::LeaseLost,
        "release of an unknown item",
    )?;
    ensure_eq(
        fail(env.store(), permanent(ghost, "x")).await?,
        FailOutcome::LeaseLost,
        "fail of an unknown item",
    )?;
    let found = env.store().item_get(ghost.id).await.or_fail("item_get")?;
    ensure(found.is_none(), "no item to appear", found)?;
    pass()
}

async fn a_batch_complete_answers_each_token_in_order<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g03")?;
    let ids = enqueue_n(env.store(), &q, 3).await?;
    let leases = claim(env.store(), &q, &owner("w1")?, 3).await?;
    ensure_eq(leases.len(), 3, "leases claimed")?;
    let token_of = |id: ItemId| leases.iter().find(|l| l.token.id == id).map(|l| l.token);
    let (Some(a), Some(b), Some(c)) = (token_of(ids[0]), token_of(ids[1]), token_of(ids[2])) else {
        return Err(crate::Failure::new(
            "the claim to hold all three items",
            format!("{leases:?}"),
        ));
    };
    // Supersede b: give it back and let w2 claim it again (attempt 2).
    ensure_eq(
        release(env.store(), b).await?,
        TokenOutcome::Accepted,
        "w1's release of b",
    )?;
    let again = claim_one(env.store(), &q, &owner("w2")?, "the reclaim of b").await?;
    ensure_eq(again.token.item_attempt(), (b.id, 2), "b's new token")?;
    let b_now = get(env.store(), b.id).await?;

    let told = env
        .store()
        .complete(CompleteParams::new(vec![a, b, c]))
        .await
        .or_fail("complete")?;
    ensure_eq(
        told,
        vec![
            TokenOutcome::Accepted,
            TokenOutcome::LeaseLost,
            TokenOutcome::Accepted,
        ],
        "the answers to complete [a, stale b, c]",
    )?;
    expect_finished(env.store(), a.id, "after its complete").await?;
    expect_finished(env.store(), c.id, "after its complete").await?;
    expect_unchanged(env.store(), &b_now, "a stale token in a batch").await?;
    pass()
}

async fn one_token_completed_by_sixteen_racers_is_accepted_once<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g03")?;
    let handles = env.handles(HANDLES).await?;
    for round in 0..8 {
        let id = enqueue_one(env.store(), item(&q)).await?;
        let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
        let told = race(&handles, RACERS, |_, store| async move {
            let answers = retrying("complete", || {
                store.complete(CompleteParams::new(vec![lease.token]))
            })
            .await?;
            ensure_eq(answers.len(), 1, "answers to a complete of one token")?;
            Ok(answers[0])
        })
        .await?;
        let accepted = told
            .iter()
            .filter(|t| **t == TokenOutcome::Accepted)
            .count();
        let lost = told
            .iter()
            .filter(|t| **t == TokenOutcome::LeaseLost)
            .count();
        ensure(
            (accepted, lost) == (1, RACERS - 1),
            format!("one of {RACERS} racers completing one token to be told Accepted, the rest LeaseLost (round {round})"),
            &told,
        )?;
        expect_finished(env.store(), id, "after the race").await?;
    }
    pass()
}

/// What one racer of [`a_late_complete_racing_a_reclaim_is_told_the_truth`] was told.
#[derive(Debug)]
enum Told {
    Completed(TokenOutcome),
    Claimed(Vec<LeaseToken>),
}

async fn a_late_complete_racing_a_reclaim_is_told_the_truth<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g03")?;
    let handles = env.handles(HANDLES).await?;
    let racers = 8;
    for round in 0..8 {
        let id = enqueue_one(env.store(), item(&q)).await?;
        let lease = claim_one(env.store(), &q, &owner("late")?, "the claim").await?;
        env.advance(LEASE);
        let told = race(&handles, racers, |i, store| {
            let q = q.clone();
            async move {
                if i % 2 == 0 {
                    let answers = retrying("complete", || {
                        store.complete(CompleteParams::new(vec![lease.token]))
                    })
                    .await?;
                    ensure_eq(answers.len(), 1, "answers to a complete of one token")?;
                    Ok(Told::Completed(answers[0]))
                } else {
                    let me = owner(&format!("claimer-{i}"))?;
                    let leases = retrying("claim", || {
                        store.claim(ClaimParams::new(q.clone(), me.clone(), 1, LEASE))
                    })
                    .await?;
                    check_leases(&leases, &me, 1)?;
                    Ok(Told::Claimed(leases.iter().map(|l| l.token).collect()))
                }
            }
        })
        .await?;
        let accepted = told
            .iter()
            .filter(|t| matches!(t, Told::Completed(TokenOutcome::Accepted)))
            .count();
        let claimed: Vec<LeaseToken> = told
            .iter()
            .filter_map(|t| match t {
                Told::Claimed(tokens) => Some(tokens.clone()),
                Told::Completed(_) => None,
            })
            .flatten()
            .collect();
        match (accepted, claimed.as_slice()) {
            (1, []) => expect_finished(env.store(), id, "after its late complete won").await?,
            (0, [won]) => {
                ensure_eq(won.item_attempt(), (id, 2), "the reclaim's token")?;
                let it = expect_state(env.store(), id, ItemState::Running, "after the reclaim won")
                    .await?;
                ensure_eq(it.token(), *won, "the running token after the reclaim won")?;
                ensure_eq(
                    complete(env.store(), *won).await?,
                    TokenOutcome::Accepted,
                    "the reclaimer's complete",
                )?;
            }
            _ => {
                return Err(crate::Failure::new(
                    format!(
                        "either the late complete to be accepted once and nobody to reclaim, \
                         or one reclaim with attempt 2 and every late complete lease lost (round {round})"
                    ),
                    format!("{told:?}"),
                ))
            }
        }
    }
    pass()
}
