//! G2 Expiry and reclaim: an expired lease makes the item claimable again; the new
//! claim carries `attempt + 1`; the expiry counts a stall.

use std::time::Duration;

use tenure_core::{
    ClaimParams, ItemState, LeaseToken, RecoverParams, Recovered, RenewOutcome, Store,
};

use crate::case::{register, Case, CaseResult, Env};
use crate::check::{
    ensure, ensure_eq, expect_counts, expect_state, expect_unchanged, get, pass, OrFail,
};
use crate::fixtures::{
    check_leases, claim, claim_for, claim_none, claim_one, counts, enqueue_n, enqueue_one, item,
    owner, queue, race, renew, retrying, HANDLES, LEASE, LONG, RACERS, SHORT, TICK,
};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g02_expiry";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        an_expired_lease_is_reclaimed_with_the_next_attempt,
        a_lease_is_reclaimable_exactly_at_its_expiry_and_not_a_tick_before,
        recover_expired_puts_the_item_back_ready_counting_a_stall,
        recovery_leaves_live_leases_alone,
        a_renewed_lease_expires_from_its_new_expiry,
        sixteen_claimers_racing_for_an_expired_item_reclaim_it_once,
        the_claims_lease_duration_decides_the_expiry_and_when_the_item_is_reclaimed,
        a_recovery_pass_requeues_exactly_its_limit,
    ]
}

async fn an_expired_lease_is_reclaimed_with_the_next_attempt<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g02")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let first = claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    env.advance(LEASE);
    let peer = env.peer().await?;
    let second = claim_one(&*peer, &q, &owner("w2")?, "the claim after expiry").await?;
    ensure_eq(second.token.item_attempt(), (id, 2), "the reclaim's token")?;
    ensure_eq(second.item.stalls, 1, "stalls after one expiry")?;
    ensure_eq(
        second.expires_at,
        env.now() + LEASE,
        "the new lease's expiry",
    )?;
    let now = expect_state(env.store(), id, ItemState::Running, "after the reclaim").await?;
    ensure_eq(
        now.owner.clone(),
        Some(owner("w2")?),
        "the owner after the reclaim",
    )?;
    ensure(
        first.token != now.token(),
        "the old token to be superseded",
        first.token,
    )?;
    pass()
}

async fn a_lease_is_reclaimable_exactly_at_its_expiry_and_not_a_tick_before<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g02")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    env.advance(LEASE - TICK);
    claim_none(
        env.store(),
        &q,
        &owner("w2")?,
        "the lease has one tick left",
    )
    .await?;
    let recovered = env
        .store()
        .recover_expired(RecoverParams::default())
        .await
        .or_fail("recover_expired")?;
    ensure_eq(recovered, Recovered::default(), "recovery one tick early")?;
    env.advance(TICK);
    let lease = claim_one(env.store(), &q, &owner("w2")?, "the claim at the expiry").await?;
    ensure_eq(lease.token.item_attempt(), (id, 2), "the reclaim's token")?;
    pass()
}

async fn recover_expired_puts_the_item_back_ready_counting_a_stall<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g02")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    env.advance(LEASE + Duration::from_secs(5));
    let recovered = env
        .store()
        .recover_expired(RecoverParams::default())
        .await
        .or_fail("recover_expired")?;
    ensure_eq(
        (recovered.requeued, recovered.dead),
        (1, 0),
        "recovery of one expired lease (requeued, dead)",
    )?;
    let it = expect_state(env.store(), id, ItemState::Ready, "after recovery").await?;
    ensure_eq(it.attempt, 1, "the attempt after recovery (kept)")?;
    ensure_eq(it.stalls, 1, "stalls after recovery")?;
    ensure_eq(
        (it.owner.clone(), it.lease_expires_at),
        (None, None),
        "owner and expiry after recovery",
    )?;
    ensure_eq(it.run_at, env.now(), "run_at after recovery")?;
    let lease = claim_one(env.store(), &q, &owner("w2")?, "the claim after recovery").await?;
    ensure_eq(
        lease.token.item_attempt(),
        (id, 2),
        "the next claim's token",
    )?;
    pass()
}

async fn recovery_leaves_live_leases_alone<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g02")?;
    let old = enqueue_one(env.store(), item(&q)).await?;
    claim_one(
        env.store(),
        &q,
        &owner("w1")?,
        "the claim of the first item",
    )
    .await?;
    env.advance(Duration::from_secs(20));
    let young = enqueue_one(env.store(), item(&q)).await?;
    claim_one(
        env.store(),
        &q,
        &owner("w2")?,
        "the claim of the second item",
    )
    .await?;
    let before = get(env.store(), young).await?;
    env.advance(Duration::from_secs(10));
    let recovered = env
        .store()
        .recover_expired(RecoverParams::default())
        .await
        .or_fail("recover_expired")?;
    ensure_eq(
        recovered.requeued,
        1,
        "leases recovered (only the expired one)",
    )?;
    expect_state(
        env.store(),
        old,
        ItemState::Ready,
        "after its lease expired",
    )
    .await?;
    expect_unchanged(env.store(), &before, "recovery while its lease is live").await?;
    pass()
}

async fn a_renewed_lease_expires_from_its_new_expiry<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g02")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    env.advance(Duration::from_secs(20));
    let renewed = renew(env.store(), lease.token, LEASE).await?;
    ensure(
        matches!(renewed, RenewOutcome::Renewed { .. }),
        "a renewal of a live lease to be accepted",
        renewed,
    )?;
    env.advance(Duration::from_secs(20));
    let peer = env.peer().await?;
    claim_none(&*peer, &q, &owner("w2")?, "the renewed lease has 10 s left").await?;
    env.advance(Duration::from_secs(10));
    let next = claim_one(&*peer, &q, &owner("w2")?, "the claim at the renewed expiry").await?;
    ensure_eq(next.token.item_attempt(), (id, 2), "the reclaim's token")?;
    pass()
}

async fn sixteen_claimers_racing_for_an_expired_item_reclaim_it_once<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g02")?;
    let handles = env.handles(HANDLES).await?;
    for round in 0..4 {
        let id = enqueue_one(env.store(), item(&q)).await?;
        let first = claim(env.store(), &q, &owner("sleeper")?, 1).await?;
        ensure_eq(first.len(), 1, "the first claim")?;
        env.advance(LEASE);
        let told = race(&handles, RACERS, |i, store| {
            let q = q.clone();
            async move {
                let me = owner(&format!("racer-{i}"))?;
                let leases = retrying("claim", || {
                    store.claim(ClaimParams::new(q.clone(), me.clone(), 1, LEASE))
                })
                .await?;
                check_leases(&leases, &me, 1)?;
                Ok(leases)
            }
        })
        .await?;
        let won: Vec<LeaseToken> = told.iter().flatten().map(|l| l.token).collect();
        let numbered: Vec<_> = won.iter().map(LeaseToken::item_attempt).collect();
        ensure(
            numbered == vec![(id, 2)],
            format!(
                "exactly one racer to be told it reclaimed {id} with attempt 2 (round {round})"
            ),
            &won,
        )?;
        let it = expect_state(env.store(), id, ItemState::Running, "after the race").await?;
        ensure_eq(it.stalls, 1, "stalls after one expiry")?;
        // Finish it so the next round races for a fresh item only.
        ensure_eq(
            crate::fixtures::complete(env.store(), won[0]).await?,
            tenure_core::TokenOutcome::Accepted,
            "the winner's complete",
        )?;
    }
    pass()
}

async fn the_claims_lease_duration_decides_the_expiry_and_when_the_item_is_reclaimed<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    for (n, lease_for) in [SHORT, LONG].into_iter().enumerate() {
        let q = queue(&format!("g02-lease-{n}"))?;
        let id = enqueue_one(env.store(), item(&q)).await?;
        let lease = claim_for(env.store(), &q, &owner("w1")?, 1, lease_for).await?;
        ensure_eq(
            lease
                .iter()
                .map(|l| (l.token.item_attempt(), l.expires_at))
                .collect::<Vec<_>>(),
            vec![((id, 1), env.now() + lease_for)],
            &format!("a claim leased for {lease_for:?}: (token, expiry)"),
        )?;
        env.advance(lease_for - TICK);
        claim_none(
            env.store(),
            &q,
            &owner("w2")?,
            &format!("a lease of {lease_for:?} has a tick left"),
        )
        .await?;
        env.advance(TICK);
        let again = claim_one(
            env.store(),
            &q,
            &owner("w2")?,
            &format!("the claim once a lease of {lease_for:?} ran out"),
        )
        .await?;
        ensure_eq(again.token.item_attempt(), (id, 2), "the reclaim's token")?;
    }
    pass()
}

async fn a_recovery_pass_requeues_exactly_its_limit<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g02-recover")?;
    enqueue_n(env.store(), &q, 5).await?;
    let leases = claim(env.store(), &q, &owner("w1")?, 5).await?;
    ensure_eq(leases.len(), 5, "items claimed")?;
    env.advance(LEASE);
    for (limit, requeued, left) in [(2, 2, 3), (1, 1, 2), (10, 2, 0)] {
        let r = env
            .store()
            .recover_expired(RecoverParams::new(limit))
            .await
            .or_fail("recover_expired")?;
        ensure_eq(
            (r.requeued, r.dead),
            (requeued, 0),
            &format!("a recovery pass with limit {limit}: (requeued, dead)"),
        )?;
        expect_counts(
            env.store(),
            &q,
            counts(5 - left, 0, left, 0, 0),
            &format!("after a recovery pass with limit {limit}"),
        )
        .await?;
    }
    pass()
}
