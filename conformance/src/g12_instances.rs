//! G12 Instances: workers register and heartbeat; an instance silent for `stale_after`
//! is evicted by any peer and all its leases are released at once (its late finalizes
//! then answer lease lost, G3).

use std::time::Duration;

use tenure_core::machine::STALLED_ERROR_PREFIX;
use tenure_core::{
    DeregisterParams, EvictParams, HeartbeatParams, Instance, ItemState, Lease, OwnerId, Store,
    TokenOutcome,
};

use crate::case::{register, Case, CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_state, expect_unchanged, get, pass, OrFail};
use crate::fixtures::{
    claim_for, claim_one, complete, enqueue_n, enqueue_one, item, owner, queue, TICK,
};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g12_instances";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        heartbeats_register_instances_oldest_first,
        a_silent_instance_is_evicted_and_its_leases_released_at_once,
        an_instance_is_evicted_exactly_at_stale_after_and_not_a_tick_before,
        eviction_counts_a_stall_and_kills_at_max_stalls,
        an_evicted_instance_registers_again_with_its_next_heartbeat,
        eviction_leaves_live_instances_leases_alone,
        a_deregistered_instance_leaves_at_once_releasing_its_leases,
        deregistering_an_owner_that_never_registered_still_releases_its_leases,
        the_stale_after_window_decides_which_instances_are_evicted,
    ]
}

const STALE: Duration = Duration::from_secs(30);
/// A lease far longer than `STALE`, so only eviction can free it.
const LONG_LEASE: Duration = Duration::from_secs(600);

async fn beat<S: Store + ?Sized>(store: &S, who: &OwnerId) -> Result<(), Failure> {
    store
        .instance_heartbeat(HeartbeatParams::new(who.clone()))
        .await
        .or_fail("instance_heartbeat")
}

async fn list<S: Store + ?Sized>(store: &S) -> Result<Vec<Instance>, Failure> {
    store.instance_list().await.or_fail("instance_list")
}

async fn heartbeats_register_instances_oldest_first<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let (a, b) = (owner("instance-a")?, owner("instance-b")?);
    let t0 = env.now();
    beat(env.store(), &a).await?;
    env.advance(Duration::from_secs(1));
    let peer = env.peer().await?;
    beat(&*peer, &b).await?;
    env.advance(Duration::from_secs(1));
    beat(env.store(), &a).await?;
    let seen: Vec<(OwnerId, i64, i64)> = list(&*peer)
        .await?
        .into_iter()
        .map(|i| (i.id, i.started_at.as_micros(), i.last_seen.as_micros()))
        .collect();
    let s = Duration::from_secs(1);
    ensure_eq(
        seen,
        vec![
            (a, t0.as_micros(), (t0 + s + s).as_micros()),
            (b, (t0 + s).as_micros(), (t0 + s).as_micros()),
        ],
        "the instances (id, started_at, last_seen), oldest registration first",
    )?;
    pass()
}

async fn a_silent_instance_is_evicted_and_its_leases_released_at_once<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g12")?;
    let (silent, alive) = (owner("instance-silent")?, owner("instance-alive")?);
    let peer = env.peer().await?;
    beat(env.store(), &silent).await?;
    beat(&*peer, &alive).await?;
    enqueue_n(env.store(), &q, 2).await?;
    let leases = claim_for(env.store(), &q, &silent, 2, LONG_LEASE).await?;
    ensure_eq(
        leases.len(),
        2,
        "leases claimed by the soon silent instance",
    )?;
    env.advance(STALE);
    beat(&*peer, &alive).await?;
    let evicted = peer
        .instance_evict_stale(EvictParams::new(STALE))
        .await
        .or_fail("instance_evict_stale")?;
    ensure_eq(
        evicted.instances,
        vec![silent.clone()],
        "the instances evicted",
    )?;
    ensure_eq(evicted.released, 2, "leases released by the eviction")?;
    for lease in &leases {
        let it = expect_state(
            env.store(),
            lease.token.id,
            ItemState::Ready,
            "after its owner was evicted",
        )
        .await?;
        ensure_eq(it.stalls, 1, "stalls after an eviction")?;
        ensure_eq(it.run_at, env.now(), "run_at after an eviction")?;
    }
    // A peer claims them at once, long before the evicted leases would have expired.
    let mut taken = Vec::new();
    for _ in 0..2 {
        taken.push(
            claim_one(&*peer, &q, &alive, "a peer's claim after the eviction")
                .await?
                .token
                .item_attempt(),
        );
    }
    taken.sort();
    let mut expected: Vec<(tenure_core::ItemId, u32)> =
        leases.iter().map(|l| (l.token.id, 2)).collect();
    expected.sort();
    ensure_eq(
        taken,
        expected,
        "the peer's tokens (attempt 2 of the released items)",
    )?;
    for lease in &leases {
        let before = get(env.store(), lease.token.id).await?;
        ensure_eq(
            complete(env.store(), lease.token).await?,
            TokenOutcome::LeaseLost,
            "the evicted instance's late complete",
        )?;
        expect_unchanged(env.store(), &before, "the evicted instance's late complete").await?;
    }
    let ids: Vec<OwnerId> = list(env.store()).await?.into_iter().map(|i| i.id).collect();
    ensure_eq(ids, vec![alive], "the instances left after the eviction")?;
    pass()
}

async fn an_instance_is_evicted_exactly_at_stale_after_and_not_a_tick_before<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g12")?;
    let a = owner("instance-a")?;
    beat(env.store(), &a).await?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    claim_for(env.store(), &q, &a, 1, LONG_LEASE).await?;
    let before = get(env.store(), id).await?;
    env.advance(STALE - TICK);
    let evicted = env
        .store()
        .instance_evict_stale(EvictParams::new(STALE))
        .await
        .or_fail("instance_evict_stale")?;
    ensure(
        evicted.instances.is_empty() && evicted.released == 0,
        "no eviction one tick before stale_after",
        &evicted,
    )?;
    expect_unchanged(env.store(), &before, "an eviction pass one tick early").await?;
    env.advance(TICK);
    let evicted = env
        .store()
        .instance_evict_stale(EvictParams::new(STALE))
        .await
        .or_fail("instance_evict_stale")?;
    ensure_eq(
        (evicted.instances, evicted.released),
        (vec![a], 1),
        "the eviction at stale_after (instances, released)",
    )?;
    pass()
}

async fn eviction_counts_a_stall_and_kills_at_max_stalls<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g12")?;
    let a = owner("instance-a")?;
    beat(env.store(), &a).await?;
    let id = enqueue_one(env.store(), item(&q).max_stalls(1)).await?;
    claim_for(env.store(), &q, &a, 1, LONG_LEASE).await?;
    env.advance(STALE);
    let evicted = env
        .store()
        .instance_evict_stale(EvictParams::new(STALE))
        .await
        .or_fail("instance_evict_stale")?;
    ensure_eq(evicted.released, 1, "leases released by the eviction")?;
    let it = expect_state(env.store(), id, ItemState::Dead, "after its only stall").await?;
    ensure(
        it.last_error
            .as_deref()
            .is_some_and(|e| e.starts_with(STALLED_ERROR_PREFIX)),
        "the last_error of an item dead by eviction to say it stalled",
        &it.last_error,
    )?;
    pass()
}

async fn an_evicted_instance_registers_again_with_its_next_heartbeat<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let a = owner("instance-a")?;
    beat(env.store(), &a).await?;
    env.advance(STALE);
    env.store()
        .instance_evict_stale(EvictParams::new(STALE))
        .await
        .or_fail("instance_evict_stale")?;
    ensure_eq(
        list(env.store()).await?.len(),
        0,
        "instances after the eviction",
    )?;
    env.advance(Duration::from_secs(5));
    beat(env.store(), &a).await?;
    let seen = list(env.store()).await?;
    ensure_eq(seen.len(), 1, "instances after the next heartbeat")?;
    ensure_eq(
        (seen[0].id.clone(), seen[0].started_at, seen[0].last_seen),
        (a, env.now(), env.now()),
        "the re-registered instance (id, started_at, last_seen)",
    )?;
    pass()
}

async fn eviction_leaves_live_instances_leases_alone<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g12")?;
    let (silent, alive) = (owner("instance-silent")?, owner("instance-alive")?);
    beat(env.store(), &silent).await?;
    beat(env.store(), &alive).await?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    claim_for(env.store(), &q, &alive, 1, LONG_LEASE).await?;
    env.advance(STALE);
    beat(env.store(), &alive).await?;
    let before = get(env.store(), id).await?;
    let evicted = env
        .store()
        .instance_evict_stale(EvictParams::new(STALE))
        .await
        .or_fail("instance_evict_stale")?;
    ensure_eq(
        (evicted.instances, evicted.released),
        (vec![silent], 0),
        "the eviction of an instance holding nothing (instances, released)",
    )?;
    expect_unchanged(env.store(), &before, "the eviction of another instance").await?;
    pass()
}

async fn a_deregistered_instance_leaves_at_once_releasing_its_leases<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g12")?;
    let (leaving, staying) = (owner("instance-leaving")?, owner("instance-staying")?);
    beat(env.store(), &leaving).await?;
    beat(env.store(), &staying).await?;
    enqueue_n(env.store(), &q, 3).await?;
    let held = claim_for(env.store(), &q, &leaving, 2, LONG_LEASE).await?;
    let kept = claim_for(env.store(), &q, &staying, 1, LONG_LEASE).await?;
    ensure_eq(
        (held.len(), kept.len()),
        (2, 1),
        "leases claimed before leaving",
    )?;
    let gone = env
        .store()
        .instance_deregister(DeregisterParams::new(leaving.clone()))
        .await
        .or_fail("instance_deregister")?;
    ensure_eq(
        gone.instances,
        vec![leaving.clone()],
        "the instances removed",
    )?;
    ensure_eq(gone.released, 2, "leases released by leaving")?;
    let listed: Vec<OwnerId> = env
        .store()
        .instance_list()
        .await
        .or_fail("instance_list")?
        .into_iter()
        .map(|i| i.id)
        .collect();
    ensure_eq(
        listed,
        vec![staying.clone()],
        "the instances listed after leaving",
    )?;
    expect_given_up(env.store(), &held, &kept[0], "after leaving").await?;
    let again = env
        .store()
        .instance_deregister(DeregisterParams::new(leaving))
        .await
        .or_fail("a second instance_deregister")?;
    ensure_eq(
        (again.instances.len(), again.released),
        (0, 0),
        "a second deregistration (nothing left to do)",
    )?;
    pass()
}

async fn deregistering_an_owner_that_never_registered_still_releases_its_leases<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g12")?;
    let (unknown, other) = (owner("never-registered")?, owner("instance-other")?);
    beat(env.store(), &other).await?;
    enqueue_n(env.store(), &q, 3).await?;
    // An owner that claims without ever heartbeating (or whose registration is gone).
    let held = claim_for(env.store(), &q, &unknown, 2, LONG_LEASE).await?;
    let kept = claim_for(env.store(), &q, &other, 1, LONG_LEASE).await?;
    ensure_eq((held.len(), kept.len()), (2, 1), "leases claimed")?;
    let gone = env
        .store()
        .instance_deregister(DeregisterParams::new(unknown.clone()))
        .await
        .or_fail("instance_deregister")?;
    ensure_eq(
        (gone.instances, gone.released),
        (vec![], 2),
        "the deregistration of an owner that never registered (no instance, its two leases \
         released)",
    )?;
    expect_given_up(env.store(), &held, &kept[0], "its owner's deregistration").await?;
    let listed: Vec<OwnerId> = list(env.store()).await?.into_iter().map(|i| i.id).collect();
    ensure_eq(listed, vec![other], "the instances listed")?;
    pass()
}

/// After a deregistration (`when`): each of `held` is ready again with one stall
/// counted and its late complete refused, and `kept`, another instance's lease, runs
/// on.
async fn expect_given_up<S: Store + ?Sized>(
    store: &S,
    held: &[Lease],
    kept: &Lease,
    when: &str,
) -> Result<(), Failure> {
    for lease in held {
        let it = expect_state(store, lease.token.id, ItemState::Ready, when).await?;
        ensure_eq(it.stalls, 1, "stalls of a released lease")?;
        ensure_eq(
            complete(store, lease.token).await?,
            TokenOutcome::LeaseLost,
            "a late complete of a lease its owner gave up",
        )?;
    }
    expect_state(
        store,
        kept.token.id,
        ItemState::Running,
        "another instance's lease",
    )
    .await?;
    Ok(())
}

async fn the_stale_after_window_decides_which_instances_are_evicted<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    beat(env.store(), &owner("silent-20s")?).await?;
    env.advance(Duration::from_secs(12));
    beat(env.store(), &owner("silent-8s")?).await?;
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
