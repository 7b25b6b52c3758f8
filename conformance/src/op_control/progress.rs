//! Progress travels with renewals: kept from the lease's holder, refused from a
//! superseded lease, read back by `item_get`.

use tenure_core::{ItemId, Lease, Progress, RenewOutcome, RenewParams, Store, TokenOutcome};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_invalid, get, pass, OrFail};
use crate::fixtures::{claim_one, enqueue_n, owner, queue, release, LEASE};
use crate::harness::Harness;

fn progress(fraction: f64, message: &str) -> Result<Progress, Failure> {
    Progress::new(fraction, message).or_fail("Progress::new")
}

/// Renews `leases` reporting `reports` (one per lease); the store's answers.
async fn renew_reporting<S: Store + ?Sized>(
    store: &S,
    leases: &[&Lease],
    reports: Vec<Option<Progress>>,
) -> Result<Vec<RenewOutcome>, Failure> {
    store
        .renew(
            RenewParams::new(leases.iter().map(|l| l.token).collect(), LEASE)
                .with_progress(reports),
        )
        .await
        .or_fail("renew with progress")
}

async fn kept<S: Store + ?Sized>(store: &S, id: ItemId) -> Result<Option<Progress>, Failure> {
    Ok(get(store, id).await?.progress)
}

pub(super) async fn progress_is_kept_from_the_holder_and_refused_from_a_superseded_lease<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let id = enqueue_n(env.store(), &q, 1).await?[0];
    ensure_eq(
        kept(env.store(), id).await?,
        None,
        "the progress of an item never claimed",
    )?;
    let first = claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    let quarter = progress(0.25, "a quarter")?;
    let answer = renew_reporting(env.store(), &[&first], vec![Some(quarter.clone())]).await?;
    ensure(
        matches!(answer.as_slice(), [RenewOutcome::Renewed { .. }]),
        "the holder's renewal with progress to be accepted",
        &answer,
    )?;
    ensure_eq(
        kept(env.store(), id).await?,
        Some(quarter.clone().for_attempt(1)),
        "the progress read back after the holder reported it",
    )?;
    // A renewal that reports nothing leaves it alone.
    renew_reporting(env.store(), &[&first], vec![]).await?;
    ensure_eq(
        kept(env.store(), id).await?,
        Some(quarter.clone().for_attempt(1)),
        "the progress after a renewal that reported none",
    )?;
    ensure_eq(
        release(env.store(), first.token).await?,
        TokenOutcome::Accepted,
        "the first holder's release",
    )?;
    let second = claim_one(env.store(), &q, &owner("w2")?, "the second claim").await?;
    // The superseded lease reports; its renewal is refused, and so is its progress.
    let stale = progress(0.9, "stale")?;
    ensure_eq(
        renew_reporting(env.store(), &[&first], vec![Some(stale)]).await?,
        vec![RenewOutcome::LeaseLost],
        "the superseded lease's renewal with progress",
    )?;
    ensure_eq(
        kept(env.store(), id).await?,
        Some(quarter.for_attempt(1)),
        "the progress after a superseded lease reported (not stored)",
    )?;
    let half = progress(0.5, "")?;
    renew_reporting(env.store(), &[&second], vec![Some(half.clone())]).await?;
    ensure_eq(
        kept(env.store(), id).await?,
        Some(half.for_attempt(second.token.attempt)),
        "the new holder's progress, naming its attempt",
    )?;
    expect_invalid(
        env.store()
            .renew(RenewParams::new(vec![second.token], LEASE).with_progress(vec![None, None]))
            .await,
        "progress",
        "progress entries that do not match the tokens",
    )?;
    pass()
}
