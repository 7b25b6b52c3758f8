//! Every input that changes behaviour, varied, with its effect observed: a store that
//! ignores one (claims with a fixed lease, renews by a fixed length, reads a default
//! instead of the caller's bound) passes every case that happens to use the default,
//! and fails these.
//!
//! - the lease duration of a claim (G2), of a renewal (G4) and of the leader lease
//!   (G13): the expiry is `now + lease_for`, and the item or lease is free exactly
//!   then, not a tick before;
//! - the limit of a claim (G8), of a recovery pass (G2) and of a purge pass (G11):
//!   exactly that many are taken when more are there, in order;
//! - the delay of an enqueue (G7): due exactly `delay` after the enqueue;
//! - the `stale_after` window of eviction (G12).
//!
//! Dedup windows (G11) and retry delays (G5) are varied in their own groups. Each case registers in the group of its guarantee.

use std::time::Duration;

use tenure_core::{
    EvictParams, HeartbeatParams, LeaderParams, LeaderStatus, PurgeParams, RecoverParams,
    RenewOutcome, Store,
};

use crate::case::{Case, CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_counts, get, pass, OrFail};
use crate::fixtures::{
    claim, claim_for, claim_none, claim_one, counts, dedup, enqueue, enqueue_n, enqueue_one, item,
    leader, owner, queue, renew, LEASE, TICK,
};
use crate::harness::Harness;

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    let mut all = crate::register![crate::g02_expiry::GROUP;
        the_claims_lease_duration_decides_the_expiry_and_when_the_item_is_reclaimed,
        a_recovery_pass_requeues_exactly_its_limit,
    ];
    all.extend(crate::register![crate::g04_renewal_cap::GROUP;
        the_renewals_lease_duration_decides_the_new_expiry,
    ]);
    all.extend(crate::register![crate::g07_schedule::GROUP;
        an_enqueue_delay_decides_when_the_item_is_due,
    ]);
    all.extend(crate::register![crate::g08_order::GROUP;
        a_claim_takes_exactly_its_limit_in_claim_order,
    ]);
    all.extend(crate::register![crate::g11_dedup::GROUP;
        a_purge_pass_forgets_exactly_its_limit_of_expired_keys,
    ]);
    all.extend(crate::register![crate::g12_instances::GROUP;
        the_stale_after_window_decides_which_instances_are_evicted,
    ]);
    all.extend(crate::register![crate::g13_leader::GROUP;
        the_leader_lease_duration_decides_when_another_may_lead,
    ]);
    all
}

/// Lease lengths on both sides of the suite's usual 30 s.
const SHORT: Duration = Duration::from_secs(7);
const LONG: Duration = Duration::from_secs(95);

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

async fn an_enqueue_delay_decides_when_the_item_is_due<H: Harness>(env: Env<'_, H>) -> CaseResult {
    for (n, delay) in [Duration::from_secs(3), Duration::from_secs(2 * 24 * 3600)]
        .into_iter()
        .enumerate()
    {
        let q = queue(&format!("g07-delay-{n}"))?;
        let id = enqueue_one(env.store(), item(&q).delay(delay)).await?;
        ensure_eq(
            get(env.store(), id).await?.run_at,
            env.now() + delay,
            &format!("run_at of an item delayed {delay:?}"),
        )?;
        let w = owner("w1")?;
        env.advance(delay - TICK);
        claim_none(
            env.store(),
            &q,
            &w,
            &format!("an item delayed {delay:?} is due in one tick"),
        )
        .await?;
        env.advance(TICK);
        let lease = claim_one(env.store(), &q, &w, "the claim of the due item").await?;
        ensure_eq(lease.token.item_attempt(), (id, 1), "the due item's token")?;
    }
    pass()
}

async fn a_claim_takes_exactly_its_limit_in_claim_order<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g08-limit")?;
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).priority(3),
            item(&q).priority(1),
            item(&q).priority(2),
            item(&q).priority(1),
            item(&q).priority(0),
            item(&q).priority(5),
        ],
    )
    .await?;
    let order = [ids[4], ids[1], ids[3], ids[2], ids[0], ids[5]];
    let w = owner("w1")?;
    let mut taken = 0;
    for (limit, expect) in [(1u32, 1usize), (3, 3), (10, 2)] {
        let leases = claim(env.store(), &q, &w, limit).await?;
        let mut got: Vec<_> = leases.iter().map(|l| l.token.id).collect();
        let mut want = order[taken..taken + expect].to_vec();
        got.sort();
        want.sort();
        ensure_eq(
            got,
            want,
            &format!(
                "a claim of {limit} with {} claimable: the next {expect} in claim order",
                6 - taken
            ),
        )?;
        taken += expect;
    }
    pass()
}

async fn a_purge_pass_forgets_exactly_its_limit_of_expired_keys<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g11-purge")?;
    let window = Duration::from_secs(10);
    for n in 0..5 {
        let it = item(&q)
            .dedup_key(dedup(&format!("k{n}"))?)
            .dedup_window(window);
        enqueue_one(env.store(), it).await?;
    }
    env.advance(window);
    for (limit, purged) in [(2, 2), (1, 1), (10, 2), (10, 0)] {
        let p = env
            .store()
            .purge(PurgeParams::new(Duration::from_secs(3600), limit))
            .await
            .or_fail("purge")?;
        ensure_eq(
            p.dedup_keys,
            purged,
            &format!("expired dedup keys forgotten by a purge pass with limit {limit}"),
        )?;
    }
    pass()
}

async fn beat<S: Store + ?Sized>(store: &S, who: &str) -> Result<(), Failure> {
    store
        .instance_heartbeat(HeartbeatParams::new(owner(who)?))
        .await
        .or_fail("instance_heartbeat")
}

async fn the_stale_after_window_decides_which_instances_are_evicted<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    beat(env.store(), "silent-20s").await?;
    env.advance(Duration::from_secs(12));
    beat(env.store(), "silent-8s").await?;
    env.advance(Duration::from_secs(8));
    for (stale_after, evicted) in [
        (25, vec![]),
        (20, vec!["silent-20s"]),
        (9, vec![]),
        (8, vec!["silent-8s"]),
    ] {
        let gone = env
            .store()
            .instance_evict_stale(EvictParams::new(Duration::from_secs(stale_after)))
            .await
            .or_fail("instance_evict_stale")?;
        let want = evicted
            .into_iter()
            .map(owner)
            .collect::<Result<Vec<_>, _>>()?;
        ensure_eq(
            gone.instances,
            want,
            &format!(
                "the instances evicted with stale_after {stale_after}s (silences 20 s and 8 s)"
            ),
        )?;
    }
    let left = env.store().instance_list().await.or_fail("instance_list")?;
    ensure(left.is_empty(), "no instance left registered", left)?;
    pass()
}

async fn the_leader_lease_duration_decides_when_another_may_lead<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    for (n, lease_for) in [Duration::from_secs(4), LONG].into_iter().enumerate() {
        let name = leader(&format!("varied-{n}"))?;
        let (a, b) = (owner("a")?, owner("b")?);
        let first = env
            .store()
            .leader_acquire(LeaderParams::new(name.clone(), a.clone(), lease_for))
            .await
            .or_fail("leader_acquire")?;
        let LeaderStatus::Leader { term, expires_at } = first else {
            return Err(Failure::new(
                format!("a's acquisition of a free lease for {lease_for:?} to lead"),
                format!("{first:?}"),
            ));
        };
        ensure_eq(
            expires_at,
            env.now() + lease_for,
            &format!("the expiry of a leader lease of {lease_for:?}"),
        )?;
        env.advance(lease_for - TICK);
        let early = env
            .store()
            .leader_acquire(LeaderParams::new(name.clone(), b.clone(), LEASE))
            .await
            .or_fail("leader_acquire")?;
        ensure(
            matches!(&early, LeaderStatus::Follower { holder, .. } if *holder == a),
            format!("b to follow a a tick before a's lease of {lease_for:?} ends"),
            &early,
        )?;
        env.advance(TICK);
        let late = env
            .store()
            .leader_acquire(LeaderParams::new(name, b, LEASE))
            .await
            .or_fail("leader_acquire")?;
        ensure(
            matches!(late, LeaderStatus::Leader { term: t, .. } if t > term),
            format!(
                "b to lead with a greater term than {term} once a's lease of {lease_for:?} ended"
            ),
            &late,
        )?;
    }
    pass()
}
