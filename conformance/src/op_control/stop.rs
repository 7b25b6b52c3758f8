//! Stopping running items: a cancel with `stop_running` revokes the running attempt's
//! lease, leaves the item `dead` naming who cancelled it and when, and every renew and
//! finish with the revoked token is refused, alone or in a batch.

use std::time::Duration;

use tenure_core::machine::{cancelled_by, cancelled_error};
use tenure_core::{
    CancelOutcome, CancelParams, CompleteParams, ItemId, ItemState, ListState, RenewOutcome,
    RenewParams, Store, TokenOutcome, MAX_CANCEL_BY_BYTES,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_invalid, expect_state, get, pass, OrFail};
use crate::fixtures::{
    claim, claim_one, complete, enqueue, enqueue_n, fail, item, listed, owner, permanent, queue,
    release, renew, scope, LEASE,
};
use crate::harness::Harness;

/// Cancels `ids`, stopping running ones on behalf of `by`; one answer per id.
async fn stop<S: Store + ?Sized>(
    store: &S,
    ids: Vec<ItemId>,
    by: &str,
) -> Result<Vec<CancelOutcome>, Failure> {
    let n = ids.len();
    let out = store
        .item_cancel(CancelParams::new(ids).stop_running(by))
        .await
        .or_fail("item_cancel stopping running items")?;
    ensure(
        out.len() == n,
        format!("{n} answers to a cancel of {n}"),
        &out,
    )?;
    Ok(out)
}

pub(super) async fn cancelling_a_running_item_stops_it_dead_naming_who_and_when<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let w = owner("w1")?;
    let s = scope("account")?;
    let running = enqueue(env.store(), vec![item(&q).scope(s.clone())]).await?[0];
    let lease = claim_one(env.store(), &q, &w, "the claim of the item to stop").await?;
    let waiting = enqueue(env.store(), vec![item(&q).scope(s)]).await?[0];
    let ready = enqueue_n(env.store(), &q, 1).await?[0];
    env.advance(Duration::from_secs(5));
    let at = env.now();
    ensure_eq(
        stop(env.store(), vec![running, ready], "alice").await?,
        vec![
            CancelOutcome::Stopped {
                attempt: lease.token.attempt,
                owner: w.clone(),
            },
            CancelOutcome::Cancelled,
        ],
        "the answers to stopping a running item and cancelling a ready one",
    )?;
    let stopped = expect_state(env.store(), running, ItemState::Dead, "after its stop").await?;
    ensure_eq(
        (
            stopped.last_error.clone(),
            cancelled_by(&stopped),
            stopped.updated_at,
        ),
        (Some(cancelled_error("alice")), Some("alice"), at),
        "the stopped item's last_error, who cancelled it and when (updated_at)",
    )?;
    ensure_eq(
        (
            stopped.attempt,
            stopped.owner.clone(),
            stopped.lease_expires_at,
        ),
        (lease.token.attempt, None, None),
        "the stopped item's attempt, owner and lease expiry",
    )?;
    ensure_eq(
        (
            listed(env.store(), &q, ListState::Dead).await?,
            listed(env.store(), &q, ListState::Running).await?,
        ),
        (vec![running], vec![]),
        "the dead and running listings after the stop",
    )?;
    // Its scope is free at once; the stopped item itself is never claimed again.
    let w2 = owner("w2")?;
    let taken = claim(env.store(), &q, &w2, 10).await?;
    ensure_eq(
        taken.iter().map(|l| l.token.id).collect::<Vec<ItemId>>(),
        vec![waiting],
        "what a claim takes after the stop (the item waiting on the freed scope)",
    )?;
    ensure_eq(
        complete(env.store(), taken[0].token).await?,
        TokenOutcome::Accepted,
        "the complete of the item that waited on the scope",
    )?;
    env.advance(LEASE * 4);
    ensure_eq(
        claim(env.store(), &q, &w2, 10).await?.len(),
        0,
        "items claimable once the leases could have expired (the stopped one stays dead)",
    )?;
    pass()
}

pub(super) async fn a_stopped_lease_is_refused_on_every_renew_and_finish<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let w = owner("w1")?;
    let ids = enqueue_n(env.store(), &q, 2).await?;
    let leases = claim(env.store(), &q, &w, 2).await?;
    let (stopped, other) = match leases.as_slice() {
        [a, b] if a.token.id == ids[0] => (a.token, b.token),
        [a, b] => (b.token, a.token),
        _ => {
            return Err(Failure::new(
                "a claim of 2 to take both items",
                format!("{leases:?}"),
            ))
        }
    };
    ensure(
        stop(env.store(), vec![stopped.id], "ops").await?[0].is_stopped(),
        "the running item to be stopped",
        stopped.id,
    )?;
    let after = get(env.store(), stopped.id).await?;
    // The holder learns it at its next renew, alone or beside a live lease.
    let renewed = env
        .store()
        .renew(RenewParams::new(vec![stopped, other], LEASE))
        .await
        .or_fail("renew")?;
    ensure(
        matches!(
            renewed.as_slice(),
            [RenewOutcome::LeaseLost, RenewOutcome::Renewed { .. }]
        ),
        "a batched renew to refuse the stopped lease and renew the live one",
        &renewed,
    )?;
    ensure_eq(
        renew(env.store(), stopped, LEASE).await?,
        RenewOutcome::LeaseLost,
        "a renew of the stopped lease",
    )?;
    ensure_eq(
        complete(env.store(), stopped).await?,
        TokenOutcome::LeaseLost,
        "a complete of the stopped lease",
    )?;
    ensure_eq(
        fail(env.store(), permanent(stopped, "late")).await?,
        tenure_core::FailOutcome::LeaseLost,
        "a fail of the stopped lease",
    )?;
    ensure_eq(
        release(env.store(), stopped).await?,
        TokenOutcome::LeaseLost,
        "a release of the stopped lease",
    )?;
    ensure_eq(
        env.store()
            .complete(CompleteParams::new(vec![stopped, other]))
            .await
            .or_fail("complete")?,
        vec![TokenOutcome::LeaseLost, TokenOutcome::Accepted],
        "a batched complete of the stopped and the live lease",
    )?;
    ensure_eq(
        get(env.store(), stopped.id).await?,
        after,
        "the stopped item after every refused renew and finish",
    )?;
    pass()
}

pub(super) async fn a_stop_naming_no_valid_operator_is_refused_and_writes_nothing<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let w = owner("w1")?;
    let running = enqueue_n(env.store(), &q, 1).await?[0];
    claim_one(env.store(), &q, &w, "the claim of the item to stop").await?;
    let ready = enqueue_n(env.store(), &q, 1).await?[0];
    let before = get(env.store(), running).await?;
    let too_long = "o".repeat(MAX_CANCEL_BY_BYTES + 1);
    for (by, what) in [
        ("", "an empty operator name"),
        ("ops\nroot", "an operator name with a newline"),
        (too_long.as_str(), "an operator name over the bound"),
    ] {
        expect_invalid(
            env.store()
                .item_cancel(CancelParams::new(vec![running, ready]).stop_running(by))
                .await,
            "by",
            &format!("a stop naming {what}"),
        )?;
    }
    ensure_eq(
        get(env.store(), running).await?,
        before,
        "the running item after the refused stops",
    )?;
    expect_state(
        env.store(),
        ready,
        ItemState::Ready,
        "after the refused stops",
    )
    .await?;
    pass()
}
