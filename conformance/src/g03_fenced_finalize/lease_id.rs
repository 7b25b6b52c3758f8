//! G3's lease-id cases: a token names its lease, not only its attempt. A claim lost in
//! a failover (the harness's [`Harness::snapshot`]) and a token forged with the right
//! `(id, attempt)` and another lease id are refused on every finalize path, alone, in a
//! batch of such tokens and beside a current lease.

use std::time::Duration;

use tenure_core::{
    CompleteParams, FailOutcome, FailParams, ItemId, ItemState, LeaseToken, ReleaseParams,
    RenewOutcome, RenewParams, Store, TokenOutcome,
};

use crate::case::{CaseResult, Env, Verdict};
use crate::check::{
    ensure, ensure_eq, expect_finished, expect_state, expect_unchanged, get, pass, OrFail,
};
use crate::fixtures::{
    claim, complete, enqueue_n, fail, owner, permanent, queue, release, renew, retry, LEASE,
};
use crate::harness::{Harness, Snapshot};

/// The forgetful failover: a claim the store acknowledged is forgotten (the harness
/// restores a snapshot taken before it, as a replica promoted before the claim reached
/// it would hold), the item is claimed again, and the same attempt number may come
/// back. Every write with the lost lease's token is refused and changes nothing, each
/// call alone, in a batch of lost tokens and in a batch beside current leases; the new
/// lease's are accepted.
pub(super) async fn a_claim_lost_in_a_failover_leaves_its_token_refused<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g03")?;
    let ids = enqueue_n(env.store(), &q, 2).await?;
    let restore = match env.snapshot().await? {
        Snapshot::Taken(restore) => restore,
        Snapshot::NotOffered { reason } => {
            return Ok(Verdict::DidNotApply {
                reason: format!("the harness takes no snapshot: {reason}"),
            })
        }
    };
    let lost = claim(env.store(), &q, &owner("w1")?, 2).await?;
    ensure_eq(lost.len(), 2, "items taken by the claim the failover loses")?;
    restore
        .restore()
        .await
        .or_fail("the harness to restore the snapshot")?;
    let peer = env.peer().await?;
    let new = claim(&*peer, &q, &owner("w2")?, 2).await?;
    let new_ids: Vec<ItemId> = new.iter().map(|l| l.token.id).collect();
    ensure_eq(new_ids, ids.clone(), "the items claimed after the failover")?;
    let before = [
        get(env.store(), ids[0]).await?,
        get(env.store(), ids[1]).await?,
    ];
    ensure_eq(
        told_all(&env, lost[0].token).await?,
        (
            RenewOutcome::LeaseLost,
            FailOutcome::LeaseLost,
            TokenOutcome::LeaseLost,
            TokenOutcome::LeaseLost,
        ),
        &format!(
            "renew, fail, release and complete with the lost lease's token {} (the new \
             lease is {})",
            lost[0].token, new[0].token
        ),
    )?;
    // The same tokens in batches: every one refused, as alone.
    let stale: Vec<LeaseToken> = lost.iter().map(|l| l.token).collect();
    told_all_batched(env.store(), &stale, "the lost leases' tokens").await?;
    // And beside current leases, which are accepted in the same batch.
    enqueue_n(env.store(), &q, 4).await?;
    let beside = claim(&*peer, &q, &owner("w3")?, 4).await?;
    told_batched(&env, lost[0].token, &beside).await?;
    for (item, what) in before.iter().zip(["the first item", "the second item"]) {
        expect_unchanged(
            env.store(),
            item,
            &format!("the lost lease's writes ({what})"),
        )
        .await?;
    }
    for l in &new {
        ensure(
            matches!(
                renew(&*peer, l.token, LEASE).await?,
                RenewOutcome::Renewed { .. }
            ),
            "the new lease's renew to be accepted",
            l.token,
        )?;
        ensure_eq(
            complete(&*peer, l.token).await?,
            TokenOutcome::Accepted,
            "the new lease's complete",
        )?;
        expect_finished(env.store(), l.token.id, "after the new lease's complete").await?;
    }
    pass()
}

/// Renew, a permanent fail, release and complete, each one call with every token of
/// `tokens`: every answer must be lease lost.
async fn told_all_batched<S: Store + ?Sized>(
    store: &S,
    tokens: &[LeaseToken],
    what: &str,
) -> Result<(), crate::Failure> {
    let n = tokens.len();
    let renewed = store
        .renew(tenure_core::RenewParams::new(tokens.to_vec(), LEASE))
        .await
        .or_fail("renew")?;
    ensure_eq(
        renewed,
        vec![RenewOutcome::LeaseLost; n],
        &format!("one renew of {what}"),
    )?;
    let failed = store
        .fail(tenure_core::FailParams::new(
            tokens.iter().map(|t| permanent(*t, "forged")).collect(),
        ))
        .await
        .or_fail("fail")?;
    ensure_eq(
        failed,
        vec![FailOutcome::LeaseLost; n],
        &format!("one permanent fail of {what}"),
    )?;
    let released = store
        .release(tenure_core::ReleaseParams::new(tokens.to_vec()))
        .await
        .or_fail("release")?;
    ensure_eq(
        released,
        vec![TokenOutcome::LeaseLost; n],
        &format!("one release of {what}"),
    )?;
    let completed = store
        .complete(CompleteParams::new(tokens.to_vec()))
        .await
        .or_fail("complete")?;
    ensure_eq(
        completed,
        vec![TokenOutcome::LeaseLost; n],
        &format!("one complete of {what}"),
    )?;
    Ok(())
}

/// No snapshot needed: a token with an item's right id and attempt but a lease id the
/// claim never minted is refused by every finalize, alone and in a batch, and changes
/// nothing; the real tokens then work.
pub(super) async fn a_token_of_the_right_attempt_and_another_lease_id_is_refused_on_every_path<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g03")?;
    let ids = enqueue_n(env.store(), &q, 2).await?;
    let leases = claim(env.store(), &q, &owner("w1")?, 2).await?;
    ensure_eq(leases.len(), 2, "items claimed")?;
    let forged: Vec<LeaseToken> = leases
        .iter()
        .map(|l| {
            let mut lease = tenure_core::LeaseId::mint();
            while lease == l.token.lease {
                lease = tenure_core::LeaseId::mint();
            }
            LeaseToken::new(l.token.id, l.token.attempt, lease)
        })
        .collect();
    let before = [
        get(env.store(), ids[0]).await?,
        get(env.store(), ids[1]).await?,
    ];
    ensure_eq(
        told_all(&env, forged[0]).await?,
        (
            RenewOutcome::LeaseLost,
            FailOutcome::LeaseLost,
            TokenOutcome::LeaseLost,
            TokenOutcome::LeaseLost,
        ),
        "renew, fail, release and complete, each alone, with a forged lease id",
    )?;
    told_all_batched(env.store(), &forged, "two tokens with forged lease ids").await?;
    // And beside current leases, which are accepted in the same batch.
    enqueue_n(env.store(), &q, 4).await?;
    let beside = claim(env.store(), &q, &owner("w2")?, 4).await?;
    told_batched(&env, forged[0], &beside).await?;
    for (item, what) in before.iter().zip(["the first item", "the second item"]) {
        expect_unchanged(
            env.store(),
            item,
            &format!("forged tokens' writes ({what})"),
        )
        .await?;
    }
    let real: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
    let told = env
        .store()
        .complete(CompleteParams::new(real))
        .await
        .or_fail("complete")?;
    ensure_eq(
        told,
        vec![TokenOutcome::Accepted; 2],
        "one complete of the real tokens",
    )?;
    pass()
}

/// Renew, fail, release and complete, each one batch of the refused token `lost` and
/// one current lease of `beside` (four, one per call, the refused token first in two
/// calls and last in the others): `lost` must answer lease lost in every batch, and each
/// current lease must be accepted and read as its write left it.
async fn told_batched<H: Harness>(
    env: &Env<'_, H>,
    lost: LeaseToken,
    beside: &[tenure_core::Lease],
) -> Result<(), crate::Failure> {
    let [a, b, c, d] = beside else {
        return Err(crate::Failure::new(
            "four current leases to batch beside the refused token",
            format!("{beside:?}"),
        ));
    };
    let (a, b, c, d) = (a.token, b.token, c.token, d.token);
    let store = env.store();
    let told = store
        .renew(RenewParams::new(vec![lost, a], LEASE))
        .await
        .or_fail("renew")?;
    let renewed = RenewOutcome::Renewed {
        expires_at: env.now() + LEASE,
        renewals: 1,
    };
    ensure_eq(
        told,
        vec![RenewOutcome::LeaseLost, renewed],
        &format!("the answers to renew [refused {lost}, current {a}]"),
    )?;
    let it = expect_state(store, a.id, ItemState::Running, "after its batched renew").await?;
    ensure_eq(
        (it.token(), it.lease_expires_at, it.renewals),
        (a, Some(env.now() + LEASE), 1),
        "the current item after a batched renew: (token, expiry, renewals)",
    )?;
    let delay = Duration::from_secs(7);
    let told = store
        .fail(FailParams::new(vec![
            retry(b, delay, "current"),
            permanent(lost, "refused"),
        ]))
        .await
        .or_fail("fail")?;
    ensure_eq(
        told,
        vec![
            FailOutcome::Retrying {
                run_at: env.now() + delay,
            },
            FailOutcome::LeaseLost,
        ],
        &format!("the answers to fail [current {b}, refused {lost}]"),
    )?;
    let it = expect_state(store, b.id, ItemState::Ready, "after its batched fail").await?;
    ensure_eq(
        (it.last_error.as_deref(), it.run_at),
        (Some("current"), env.now() + delay),
        "the current item after a batched fail: (last_error, run_at)",
    )?;
    let told = store
        .release(ReleaseParams::new(vec![lost, c]))
        .await
        .or_fail("release")?;
    ensure_eq(
        told,
        vec![TokenOutcome::LeaseLost, TokenOutcome::Accepted],
        &format!("the answers to release [refused {lost}, current {c}]"),
    )?;
    expect_state(store, c.id, ItemState::Ready, "after its batched release").await?;
    let told = store
        .complete(CompleteParams::new(vec![d, lost]))
        .await
        .or_fail("complete")?;
    ensure_eq(
        told,
        vec![TokenOutcome::Accepted, TokenOutcome::LeaseLost],
        &format!("the answers to complete [current {d}, refused {lost}]"),
    )?;
    expect_finished(store, d.id, "after its batched complete").await
}

/// The answers to renew, a permanent fail, release and complete with `token`, each
/// its own call.
async fn told_all<H: Harness>(
    env: &Env<'_, H>,
    token: LeaseToken,
) -> Result<(RenewOutcome, FailOutcome, TokenOutcome, TokenOutcome), crate::Failure> {
    Ok((
        renew(env.store(), token, LEASE).await?,
        fail(env.store(), permanent(token, "superseded")).await?,
        release(env.store(), token).await?,
        complete(env.store(), token).await?,
    ))
}
