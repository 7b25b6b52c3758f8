//! G16 Concurrency limits: at most N running items per limit key and per queue,
//! across every handle, never exceeded through a crash, a stale finish or a failover,
//! and a saturated key never holds up the others. Optional: runs on stores that
//! declare [`Capabilities::limits`](tenure_core::Capabilities::limits).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tenure_core::{
    ClaimParams, CompleteParams, ItemId, Lease, LeaseToken, LimitKey, LimitsParams, QueueLimits,
    RenewOutcome, Store, TokenOutcome,
};

use crate::case::{register, Capability, Case, CaseResult, Env, Failure, Verdict};
use crate::check::{ensure, ensure_eq, expect_invalid, pass, OrFail};
use crate::fixtures::{
    check_leases, claim, claim_none, claim_one, complete, enqueue, fail, item, limit_key, owner,
    permanent, queue, release, renew, retrying, set_limits, LEASE, TICK,
};
use crate::harness::{Harness, Snapshot};

pub(crate) const GROUP: &str = "g16_concurrency_limits";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP, Capability::Limits;
        a_key_limit_hammered_by_eight_peers_is_never_exceeded,
        a_crashed_holders_slot_comes_back_at_its_lease_expiry_and_not_before,
        a_stale_finish_after_a_takeover_frees_no_slot,
        a_claim_lost_in_a_failover_frees_no_slot_through_its_token,
        a_saturated_key_is_passed_over_for_free_keys,
        a_key_override_wins_over_the_per_key_default,
        a_queue_wide_limit_caps_running_items_across_keys,
        lowering_a_limit_preempts_nothing_and_stops_new_claims,
        bad_limits_name_their_field_and_write_nothing,
        a_lease_list_names_the_limit_key_each_lease_holds_a_slot_of,
    ]
}

fn of_key(leases: &[Lease], ids: &[ItemId]) -> usize {
    leases.iter().filter(|l| ids.contains(&l.token.id)).count()
}

/// The peers and the limit of the hammer case.
const PEERS: usize = 8;
const N: u32 = 3;

async fn a_key_limit_hammered_by_eight_peers_is_never_exceeded<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g16-hammer")?;
    let k = limit_key("api")?;
    set_limits(env.store(), &q, QueueLimits::new().per_key(N)).await?;
    let total = 48;
    enqueue(
        env.store(),
        (0..total).map(|_| item(&q).limit_key(k.clone())).collect(),
    )
    .await?;
    let handles = env.handles(PEERS).await?;
    // First, one claim through each peer in turn: together they hold at most N.
    let mut held: Vec<(Arc<H::Store>, LeaseToken)> = Vec::new();
    for (i, h) in handles.iter().enumerate() {
        for l in claim(&**h, &q, &owner(&format!("p{i}"))?, 2).await? {
            held.push((Arc::clone(h), l.token));
        }
    }
    ensure(
        held.len() == N as usize,
        format!("one claim of 2 through each of {PEERS} handles to take {N} items in all"),
        held.len(),
    )?;
    for (h, t) in held {
        ensure_eq(
            complete(&*h, t).await?,
            TokenOutcome::Accepted,
            "a complete",
        )?;
    }
    // Then one claim of 2 through each at once, all held until every one answered.
    let at_once = crate::fixtures::race(&handles, PEERS, |i, store| {
        let q = q.clone();
        async move {
            let me = owner(&format!("q{i}"))?;
            let leases = retrying("claim", || {
                store.claim(ClaimParams::new(q.clone(), me.clone(), 2, LEASE))
            })
            .await?;
            check_leases(&leases, &me, 2)?;
            Ok((store, leases))
        }
    })
    .await?;
    let took: usize = at_once.iter().map(|(_, l)| l.len()).sum();
    ensure(
        took == N as usize,
        format!("{PEERS} claims of 2 at once, one through each handle, to take {N} items in all"),
        took,
    )?;
    for (h, leases) in at_once {
        for l in leases {
            let told = complete(&*h, l.token).await?;
            ensure_eq(told, TokenOutcome::Accepted, "a complete")?;
        }
    }
    let settled = 2 * N as usize;
    // Then all of them draining at once, each holding what it claimed across a yield.
    let running = Arc::new(Mutex::new((0usize, 0usize))); // (now, most)
    let done = Arc::new(AtomicUsize::new(settled));
    let results = crate::fixtures::race(&handles, PEERS, |i, store| {
        let (q, running, done) = (q.clone(), Arc::clone(&running), Arc::clone(&done));
        async move {
            let me = owner(&format!("peer-{i}"))?;
            let mut spins = 0u32;
            while done.load(Ordering::SeqCst) < total {
                let leases = retrying("claim", || {
                    store.claim(ClaimParams::new(q.clone(), me.clone(), 2, LEASE))
                })
                .await?;
                check_leases(&leases, &me, 2)?;
                if leases.is_empty() {
                    spins += 1;
                    if spins > 1_000_000 {
                        return Err(Failure::new("the drain to finish", "a claimer spun on"));
                    }
                    tokio::task::yield_now().await;
                    continue;
                }
                {
                    let mut r = running.lock().map_err(|_| poisoned())?;
                    r.0 += leases.len();
                    r.1 = r.1.max(r.0);
                }
                tokio::task::yield_now().await;
                {
                    let mut r = running.lock().map_err(|_| poisoned())?;
                    r.0 -= leases.len();
                }
                let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
                let told = retrying("complete", || {
                    store.complete(CompleteParams::new(tokens.clone()))
                })
                .await?;
                ensure(
                    told.iter().all(|t| *t == TokenOutcome::Accepted),
                    "each claimer's complete of its own leases to be Accepted",
                    &told,
                )?;
                done.fetch_add(tokens.len(), Ordering::SeqCst);
            }
            Ok(())
        }
    })
    .await?;
    ensure_eq(results.len(), PEERS, "claimers that finished")?;
    let most = running.lock().map_err(|_| poisoned())?.1;
    ensure(
        most <= N as usize,
        format!("at most {N} items of the key held at once by {PEERS} claimers"),
        most,
    )?;
    pass()
}

fn poisoned() -> Failure {
    Failure::new("the case's shared count to be usable", "a poisoned lock")
}

/// A queue whose key `k` may run one item, with `n` items of `k`.
async fn one_slot<H: Harness>(
    env: &Env<'_, H>,
    name: &str,
    n: usize,
) -> Result<(tenure_core::QueueName, LimitKey, Vec<ItemId>), Failure> {
    let q = queue(name)?;
    let k = limit_key("k")?;
    set_limits(env.store(), &q, QueueLimits::new().per_key(1)).await?;
    let ids = enqueue(
        env.store(),
        (0..n).map(|_| item(&q).limit_key(k.clone())).collect(),
    )
    .await?;
    Ok((q, k, ids))
}

async fn a_crashed_holders_slot_comes_back_at_its_lease_expiry_and_not_before<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, _, ids) = one_slot(&env, "g16-crash", 2).await?;
    let held = claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    ensure_eq(held.token.id, ids[0], "the first item claimed")?;
    // w1 crashes: it never finalizes. Its slot is busy until its lease ends.
    let peer = env.peer().await?;
    env.advance(LEASE / 2);
    claim_none(
        &*peer,
        &q,
        &owner("w2")?,
        "the crashed holder's lease is live",
    )
    .await?;
    env.advance(LEASE - LEASE / 2 - TICK);
    claim_none(
        &*peer,
        &q,
        &owner("w2")?,
        "one tick before the crashed holder's lease expires",
    )
    .await?;
    env.advance(TICK);
    let next = claim(&*peer, &q, &owner("w2")?, 10).await?;
    ensure_eq(
        next.len(),
        1,
        "items claimed once the crashed holder's lease expired (its slot, one)",
    )?;
    claim_none(&*peer, &q, &owner("w3")?, "the slot is taken again").await?;
    pass()
}

async fn a_stale_finish_after_a_takeover_frees_no_slot<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let (q, _, _) = one_slot(&env, "g16-stale", 3).await?;
    let old = claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    env.advance(LEASE);
    let peer = env.peer().await?;
    // The expired lease is recovered and its slot taken by the next claim.
    let new = claim_one(&*peer, &q, &owner("w2")?, "the takeover").await?;
    // The superseded holder finishes late, every way it can: each is refused.
    ensure_eq(
        complete(env.store(), old.token).await?,
        TokenOutcome::LeaseLost,
        "the stale complete",
    )?;
    ensure_eq(
        release(env.store(), old.token).await?,
        TokenOutcome::LeaseLost,
        "the stale release",
    )?;
    let told = fail(env.store(), permanent(old.token, "late")).await?;
    ensure_eq(
        told,
        tenure_core::FailOutcome::LeaseLost,
        "the stale permanent fail",
    )?;
    claim_none(
        env.store(),
        &q,
        &owner("w3")?,
        "the one slot is the takeover's; the stale finishes freed nothing",
    )
    .await?;
    let told = renew(&*peer, new.token, LEASE).await?;
    ensure(
        matches!(told, RenewOutcome::Renewed { .. }),
        "the takeover's renew to be accepted",
        told,
    )?;
    pass()
}

async fn a_claim_lost_in_a_failover_frees_no_slot_through_its_token<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, _, _) = one_slot(&env, "g16-failover", 2).await?;
    let restore = match env.snapshot().await? {
        Snapshot::Taken(restore) => restore,
        Snapshot::NotOffered { reason } => {
            return Ok(Verdict::DidNotApply {
                reason: format!("the harness takes no snapshot: {reason}"),
            })
        }
    };
    let lost = claim_one(
        env.store(),
        &q,
        &owner("w1")?,
        "the claim the failover loses",
    )
    .await?;
    restore.restore().await.or_fail("restore")?;
    let peer = env.peer().await?;
    let again = claim_one(&*peer, &q, &owner("w2")?, "the claim after the failover").await?;
    ensure_eq(
        again.token.item_attempt(),
        lost.token.item_attempt(),
        "the attempt handed out again after the failover",
    )?;
    ensure_eq(
        complete(env.store(), lost.token).await?,
        TokenOutcome::LeaseLost,
        "the lost claim's complete",
    )?;
    claim_none(
        &*peer,
        &q,
        &owner("w3")?,
        "the one slot is the new claim's; the lost claim's token freed nothing",
    )
    .await?;
    pass()
}

async fn a_saturated_key_is_passed_over_for_free_keys<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g16-hol")?;
    let hot = limit_key("hot")?;
    set_limits(env.store(), &q, QueueLimits::new().per_key(1)).await?;
    let hot_ids = enqueue(
        env.store(),
        (0..20).map(|_| item(&q).limit_key(hot.clone())).collect(),
    )
    .await?;
    let cold = enqueue(
        env.store(),
        vec![
            item(&q).limit_key(limit_key("cold-1")?),
            item(&q).limit_key(limit_key("cold-2")?),
            item(&q),
        ],
    )
    .await?;
    let w = owner("w1")?;
    let first = claim_one(env.store(), &q, &w, "the first claim").await?;
    ensure_eq(first.token.id, hot_ids[0], "the first item claimed")?;
    let next = claim(env.store(), &q, &w, 2).await?;
    let got: Vec<ItemId> = next.iter().map(|l| l.token.id).collect();
    ensure_eq(
        got,
        cold[..2].to_vec(),
        "a claim of 2 behind the saturated key's backlog (the first two cold items)",
    )?;
    let last = claim(env.store(), &q, &w, 10).await?;
    let got: Vec<ItemId> = last.iter().map(|l| l.token.id).collect();
    ensure_eq(got, vec![cold[2]], "a claim of 10 (the unkeyed item only)")?;
    ensure_eq(
        complete(env.store(), first.token).await?,
        TokenOutcome::Accepted,
        "the hot item's complete",
    )?;
    let freed = claim(env.store(), &q, &w, 10).await?;
    let got: Vec<ItemId> = freed.iter().map(|l| l.token.id).collect();
    ensure_eq(
        got,
        vec![hot_ids[1]],
        "a claim of 10 once the hot key's slot came back (its next item)",
    )?;
    pass()
}

async fn a_key_override_wins_over_the_per_key_default<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g16-override")?;
    let (hot, cold) = (limit_key("hot")?, limit_key("cold")?);
    set_limits(
        env.store(),
        &q,
        QueueLimits::new().per_key(1).key_override(hot.clone(), 3),
    )
    .await?;
    let hot_ids = enqueue(
        env.store(),
        (0..5).map(|_| item(&q).limit_key(hot.clone())).collect(),
    )
    .await?;
    let cold_ids = enqueue(
        env.store(),
        (0..5).map(|_| item(&q).limit_key(cold.clone())).collect(),
    )
    .await?;
    let leases = claim(env.store(), &q, &owner("w1")?, 20).await?;
    ensure_eq(
        (of_key(&leases, &hot_ids), of_key(&leases, &cold_ids)),
        (3, 1),
        "items claimed by a claim of 20: (hot, override 3; cold, default 1)",
    )?;
    pass()
}

async fn a_queue_wide_limit_caps_running_items_across_keys<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g16-queue")?;
    set_limits(env.store(), &q, QueueLimits::new().concurrency(2)).await?;
    enqueue(
        env.store(),
        vec![
            item(&q).limit_key(limit_key("a")?),
            item(&q).limit_key(limit_key("b")?),
            item(&q),
            item(&q),
        ],
    )
    .await?;
    let w = owner("w1")?;
    let leases = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(
        leases.len(),
        2,
        "items claimed under a queue-wide limit of 2",
    )?;
    let peer = env.peer().await?;
    claim_none(&*peer, &q, &owner("w2")?, "the queue runs its limit").await?;
    ensure_eq(
        complete(env.store(), leases[0].token).await?,
        TokenOutcome::Accepted,
        "a complete",
    )?;
    let next = claim(&*peer, &q, &owner("w2")?, 10).await?;
    ensure_eq(next.len(), 1, "items claimed once one slot came back")?;
    pass()
}

async fn lowering_a_limit_preempts_nothing_and_stops_new_claims<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g16-lower")?;
    let k = limit_key("k")?;
    set_limits(env.store(), &q, QueueLimits::new().per_key(3)).await?;
    enqueue(
        env.store(),
        (0..6).map(|_| item(&q).limit_key(k.clone())).collect(),
    )
    .await?;
    let w = owner("w1")?;
    let leases = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(leases.len(), 3, "items claimed under a limit of 3")?;
    set_limits(env.store(), &q, QueueLimits::new().per_key(1)).await?;
    for l in &leases {
        let told = renew(env.store(), l.token, LEASE).await?;
        ensure(
            matches!(told, RenewOutcome::Renewed { .. }),
            "a running lease's renew after the limit was lowered to be accepted",
            told,
        )?;
    }
    claim_none(env.store(), &q, &w, "3 run under a limit lowered to 1").await?;
    ensure_eq(
        complete(env.store(), leases[0].token).await?,
        TokenOutcome::Accepted,
        "a complete",
    )?;
    claim_none(env.store(), &q, &w, "2 run under a limit of 1").await?;
    ensure_eq(
        complete(env.store(), leases[1].token).await?,
        TokenOutcome::Accepted,
        "a complete",
    )?;
    claim_none(env.store(), &q, &w, "1 runs under a limit of 1").await?;
    ensure_eq(
        complete(env.store(), leases[2].token).await?,
        TokenOutcome::Accepted,
        "a complete",
    )?;
    let next = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(
        next.len(),
        1,
        "items claimed with none running under a limit of 1",
    )?;
    pass()
}

async fn bad_limits_name_their_field_and_write_nothing<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g16-bad")?;
    let good = QueueLimits::new().per_key(2);
    set_limits(env.store(), &q, good.clone()).await?;
    let k = limit_key("k")?;
    let bad: Vec<(QueueLimits, &str)> = vec![
        (QueueLimits::new().concurrency(0), "concurrency"),
        (
            QueueLimits::new().concurrency(tenure_core::MAX_CONCURRENCY + 1),
            "concurrency",
        ),
        (QueueLimits::new().per_key(0), "key_concurrency"),
        (
            QueueLimits::new().key_override(k.clone(), 0),
            "key_override",
        ),
        (
            QueueLimits::new()
                .key_rate(tenure_core::Rate::new(0, std::time::Duration::from_secs(1))),
            "rate",
        ),
        (
            QueueLimits::new().key_rate(tenure_core::Rate::new(
                5,
                std::time::Duration::from_millis(999),
            )),
            "period",
        ),
    ];
    for (limits, field) in bad {
        let told = env
            .store()
            .limits_set(LimitsParams::new(q.clone(), limits))
            .await;
        expect_invalid(told, field, "limits_set")?;
    }
    let kept = env.store().limits_get(&q).await.or_fail("limits_get")?;
    ensure_eq(kept, Some(good), "the limits after refused changes")?;
    let told = env
        .store()
        .enqueue(tenure_core::EnqueueParams::one(
            item(&q).limit_key(k).weight(0),
        ))
        .await;
    expect_invalid(told, "weight", "enqueue")?;
    claim_none(
        env.store(),
        &q,
        &owner("w1")?,
        "the refused enqueue wrote nothing",
    )
    .await?;
    pass()
}

async fn a_lease_list_names_the_limit_key_each_lease_holds_a_slot_of<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g16-leases")?;
    // Any non-control text is a key: spaces, markup and non-ASCII round-trip as they are.
    let (a, b) = (limit_key("tenant a")?, limit_key("<b> & \"é\"")?);
    set_limits(env.store(), &q, QueueLimits::new().per_key(2)).await?;
    let a_ids = enqueue(
        env.store(),
        (0..3).map(|_| item(&q).limit_key(a.clone())).collect(),
    )
    .await?;
    let b_ids = enqueue(env.store(), vec![item(&q).limit_key(b.clone())]).await?;
    let free = enqueue(env.store(), vec![item(&q)]).await?;
    let leases = claim(env.store(), &q, &owner("w1")?, 10).await?;
    ensure_eq(
        leases.len(),
        4,
        "items claimed: two of a, limited to 2, one of b, one without a key",
    )?;
    let page = env
        .store()
        .lease_list(tenure_core::LeaseListParams::new(q.clone()))
        .await
        .or_fail("lease_list")?;
    let mut told: Vec<(ItemId, Option<LimitKey>)> = page
        .leases
        .iter()
        .map(|l| (l.token.id, l.limit_key.clone()))
        .collect();
    told.sort();
    let mut want: Vec<(ItemId, Option<LimitKey>)> = leases
        .iter()
        .map(|l| {
            let id = l.token.id;
            let key = if a_ids.contains(&id) {
                Some(a.clone())
            } else if b_ids.contains(&id) {
                Some(b.clone())
            } else {
                None
            };
            (id, key)
        })
        .collect();
    want.sort();
    ensure(
        want.iter().any(|(id, _)| free.contains(id)),
        "the unkeyed item among the leases",
        &want,
    )?;
    ensure_eq(told, want, "the leases listed, each with its limit key")?;
    pass()
}
