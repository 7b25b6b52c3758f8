//! G4 Renewal cap: renew extends the expiry; after `max_renewals` renewals in one
//! attempt (default 6) renew is refused, so a hung handler surfaces by expiry.

use std::time::Duration;

use tenure_core::{
    ItemState, LeaseToken, RenewOutcome, RenewParams, Store, TokenOutcome, DEFAULT_MAX_RENEWALS,
};

use crate::case::{register, Case, CaseResult, Env, Failure};
use crate::check::{ensure_eq, expect_state, expect_unchanged, get, pass, OrFail};
use crate::fixtures::{
    claim, claim_none, claim_one, enqueue_n, enqueue_one, item, owner, queue, release, renew,
    LEASE, LONG, TICK,
};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g04_renewal_cap";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        renew_extends_the_lease_from_now,
        renewal_beyond_the_cap_is_refused_and_keeps_the_expiry,
        the_default_cap_is_six_renewals,
        a_refused_renewal_lets_the_lease_expire_and_be_reclaimed,
        the_renewal_count_starts_again_with_each_attempt,
        an_item_allowed_no_renewals_refuses_the_first,
        a_batch_renew_answers_each_token_by_its_own_cap,
        the_renewals_lease_duration_decides_the_new_expiry,
    ]
}

fn renewed(expected_renewals: u32, told: RenewOutcome) -> Result<(), Failure> {
    match told {
        RenewOutcome::Renewed { renewals, .. } if renewals == expected_renewals => Ok(()),
        other => Err(Failure::new(
            format!("renewal {expected_renewals} to be accepted"),
            format!("{other:?}"),
        )),
    }
}

async fn renew_extends_the_lease_from_now<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g04")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    env.advance(Duration::from_secs(10));
    let longer = Duration::from_secs(60);
    let told = renew(env.store(), lease.token, longer).await?;
    let expires_at = env.now() + longer;
    ensure_eq(
        told,
        RenewOutcome::Renewed {
            expires_at,
            renewals: 1,
        },
        "the answer to the first renewal",
    )?;
    let it = expect_state(env.store(), id, ItemState::Running, "after a renewal").await?;
    ensure_eq(it.lease_expires_at, Some(expires_at), "the stored expiry")?;
    ensure_eq(it.renewals, 1, "the stored renewals")?;
    ensure_eq(
        it.token(),
        lease.token,
        "the token after a renewal (unchanged)",
    )?;
    pass()
}

async fn renewal_beyond_the_cap_is_refused_and_keeps_the_expiry<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g04")?;
    let id = enqueue_one(env.store(), item(&q).max_renewals(2)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    for n in 1..=2 {
        env.advance(Duration::from_secs(5));
        renewed(n, renew(env.store(), lease.token, LEASE).await?)?;
    }
    let before = get(env.store(), id).await?;
    env.advance(Duration::from_secs(5));
    let told = renew(env.store(), lease.token, LEASE).await?;
    ensure_eq(
        told,
        RenewOutcome::LimitReached { limit: 2 },
        "the answer to a third renewal with max_renewals 2",
    )?;
    expect_unchanged(env.store(), &before, "a refused renewal").await?;
    pass()
}

async fn the_default_cap_is_six_renewals<H: Harness>(env: Env<'_, H>) -> CaseResult {
    ensure_eq(DEFAULT_MAX_RENEWALS, 6, "the default renewal cap")?;
    let q = queue("g04")?;
    enqueue_one(env.store(), item(&q)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    for n in 1..=6 {
        renewed(n, renew(env.store(), lease.token, LEASE).await?)?;
    }
    ensure_eq(
        renew(env.store(), lease.token, LEASE).await?,
        RenewOutcome::LimitReached { limit: 6 },
        "the answer to a seventh renewal by default",
    )?;
    pass()
}

async fn a_refused_renewal_lets_the_lease_expire_and_be_reclaimed<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g04")?;
    let id = enqueue_one(env.store(), item(&q).max_renewals(1)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    env.advance(Duration::from_secs(20));
    renewed(1, renew(env.store(), lease.token, LEASE).await?)?;
    let capped_expiry = env.now() + LEASE;
    env.advance(Duration::from_secs(20));
    ensure_eq(
        renew(env.store(), lease.token, LEASE).await?,
        RenewOutcome::LimitReached { limit: 1 },
        "the answer to a renewal past the cap",
    )?;
    let peer = env.peer().await?;
    claim_none(&*peer, &q, &owner("w2")?, "the capped lease has 10 s left").await?;
    env.advance(capped_expiry.duration_since(env.now()));
    let next = claim_one(&*peer, &q, &owner("w2")?, "the claim at the capped expiry").await?;
    ensure_eq(next.token.item_attempt(), (id, 2), "the reclaim's token")?;
    pass()
}

async fn the_renewal_count_starts_again_with_each_attempt<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g04")?;
    enqueue_one(env.store(), item(&q).max_renewals(1)).await?;
    let first = claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    renewed(1, renew(env.store(), first.token, LEASE).await?)?;
    ensure_eq(
        renew(env.store(), first.token, LEASE).await?,
        RenewOutcome::LimitReached { limit: 1 },
        "a second renewal in attempt 1",
    )?;
    ensure_eq(
        release(env.store(), first.token).await?,
        TokenOutcome::Accepted,
        "the release",
    )?;
    let second = claim_one(env.store(), &q, &owner("w1")?, "the second claim").await?;
    ensure_eq(
        second.item.renewals,
        0,
        "renewals at the start of attempt 2",
    )?;
    renewed(1, renew(env.store(), second.token, LEASE).await?)?;
    pass()
}

async fn an_item_allowed_no_renewals_refuses_the_first<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g04")?;
    let id = enqueue_one(env.store(), item(&q).max_renewals(0)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    let before = get(env.store(), id).await?;
    ensure_eq(
        renew(env.store(), lease.token, LEASE).await?,
        RenewOutcome::LimitReached { limit: 0 },
        "the first renewal with max_renewals 0",
    )?;
    expect_unchanged(env.store(), &before, "a refused renewal").await?;
    pass()
}

async fn a_batch_renew_answers_each_token_by_its_own_cap<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g04")?;
    let capped = enqueue_one(env.store(), item(&q).max_renewals(0)).await?;
    enqueue_n(env.store(), &q, 1).await?;
    let leases = claim(env.store(), &q, &owner("w1")?, 2).await?;
    ensure_eq(leases.len(), 2, "leases claimed")?;
    let mut tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
    tokens.sort_by_key(|t| t.id != capped);
    let told = env
        .store()
        .renew(RenewParams::new(tokens, LEASE))
        .await
        .or_fail("renew")?;
    ensure_eq(
        told,
        vec![
            RenewOutcome::LimitReached { limit: 0 },
            RenewOutcome::Renewed {
                expires_at: env.now() + LEASE,
                renewals: 1,
            },
        ],
        "the answers to renewing [capped, uncapped]",
    )?;
    pass()
}

async fn the_renewals_lease_duration_decides_the_new_expiry<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    // A renewal sets the expiry to now + its own length, shorter or longer than the
    // claim's.
    for (n, lease_for) in [Duration::from_secs(5), LONG].into_iter().enumerate() {
        let q = queue(&format!("g04-renew-{n}"))?;
        let id = enqueue_one(env.store(), item(&q)).await?;
        let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
        env.advance(Duration::from_secs(10));
        ensure_eq(
            renew(env.store(), lease.token, lease_for).await?,
            RenewOutcome::Renewed {
                expires_at: env.now() + lease_for,
                renewals: 1,
            },
            &format!("a renewal for {lease_for:?}"),
        )?;
        env.advance(lease_for - TICK);
        claim_none(
            env.store(),
            &q,
            &owner("w2")?,
            &format!("a lease renewed for {lease_for:?} has a tick left"),
        )
        .await?;
        env.advance(TICK);
        let again = claim_one(
            env.store(),
            &q,
            &owner("w2")?,
            &format!("the claim once a lease renewed for {lease_for:?} ran out"),
        )
        .await?;
        ensure_eq(again.token.item_attempt(), (id, 2), "the reclaim's token")?;
    }
    pass()
}
