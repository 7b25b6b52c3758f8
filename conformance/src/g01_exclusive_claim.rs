//! G1 Exclusive claim: at any instant an item has at most one live lease; concurrent
//! claimers never get the same item while its lease is live.

use std::collections::{BTreeMap, HashSet};

use tenure_core::{
    ClaimParams, CompleteParams, ItemId, ItemState, LeaseToken, ReleaseParams, Store, TokenOutcome,
};

use crate::case::{register, Case, CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_counts, expect_state, pass};
use crate::fixtures::{
    check_leases, claim, claim_none, claim_one, complete, counts, enqueue, enqueue_n, enqueue_one,
    item, owner, queue, race, retrying, HANDLES, LEASE, RACERS, TICK,
};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g01_exclusive_claim";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        a_claimed_item_is_not_claimed_again_while_its_lease_is_live,
        a_claim_takes_its_limit_when_enough_items_are_ready,
        one_item_raced_by_sixteen_claimers_goes_to_exactly_one,
        sixteen_claimers_over_two_thousand_items_claim_each_once_per_attempt,
    ]
}

async fn a_claimed_item_is_not_claimed_again_while_its_lease_is_live<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g01")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let first = claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    ensure_eq(
        first.token.item_attempt(),
        (id, 1),
        "the first claim's token",
    )?;
    ensure_eq(first.expires_at, env.now() + LEASE, "the lease expiry")?;

    let peer = env.peer().await?;
    claim_none(&*peer, &q, &owner("w2")?, "the only item is leased").await?;
    env.advance(LEASE - TICK);
    claim_none(&*peer, &q, &owner("w2")?, "the lease has one tick left").await?;
    claim_none(
        env.store(),
        &q,
        &owner("w1")?,
        "the lease has one tick left",
    )
    .await?;

    let now = expect_state(env.store(), id, ItemState::Running, "while leased").await?;
    ensure_eq(now.token(), first.token, "the running item's token")?;
    ensure_eq(now.owner, Some(owner("w1")?), "the running item's owner")?;
    pass()
}

async fn a_claim_takes_its_limit_when_enough_items_are_ready<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g01")?;
    let ids = enqueue_n(env.store(), &q, 10).await?;
    let w = owner("w1")?;
    let first = claim(env.store(), &q, &w, 3).await?;
    ensure_eq(first.len(), 3, "leases from a claim of 3 with 10 ready")?;
    let rest = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(rest.len(), 7, "leases from a claim of 10 with 7 ready")?;
    let all: HashSet<ItemId> = first.iter().chain(&rest).map(|l| l.token.id).collect();
    ensure_eq(
        all,
        ids.into_iter().collect(),
        "the items claimed by both claims",
    )?;
    pass()
}

async fn one_item_raced_by_sixteen_claimers_goes_to_exactly_one<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g01")?;
    let handles = env.handles(HANDLES).await?;
    for round in 0..8 {
        let id = enqueue_one(env.store(), item(&q)).await?;
        let told = race(&handles, RACERS, |i, store| {
            let q = q.clone();
            async move {
                let me = owner(&format!("racer-{i}"))?;
                let leases = retrying("claim", || {
                    store.claim(ClaimParams::new(q.clone(), me.clone(), 1, LEASE))
                })
                .await?;
                check_leases(&leases, &me, 1)?;
                Ok((me, leases))
            }
        })
        .await?;
        let winners: Vec<_> = told.iter().filter(|(_, l)| !l.is_empty()).collect();
        ensure(
            winners.len() == 1,
            format!(
                "exactly one of {RACERS} racers to be told it claimed the item (round {round})"
            ),
            winners.iter().map(|(o, _)| o.as_str()).collect::<Vec<_>>(),
        )?;
        let (winner, leases) = winners[0];
        ensure_eq(
            leases[0].token.item_attempt(),
            (id, 1),
            "the winner's token",
        )?;
        let now = expect_state(env.store(), id, ItemState::Running, "after the race").await?;
        ensure_eq(now.owner.as_ref(), Some(winner), "the owner after the race")?;
        ensure_eq(
            complete(env.store(), leases[0].token).await?,
            TokenOutcome::Accepted,
            "the winner's complete",
        )?;
    }
    pass()
}

/// What one claimer of the big race was granted and told.
#[derive(Default)]
struct ClaimerLog {
    claimed: Vec<LeaseToken>,
    completed: Vec<(LeaseToken, TokenOutcome)>,
    released: Vec<(LeaseToken, TokenOutcome)>,
}

const RACE_ITEMS: usize = 2_000;
const RACE_BATCH: u32 = 10;

/// Every eighth item is released on its first attempt, so it is claimed twice.
fn released_on_first_attempt(token: &LeaseToken) -> bool {
    token.attempt == 1 && token.id.as_bytes()[15] % 8 == 0
}

async fn sixteen_claimers_over_two_thousand_items_claim_each_once_per_attempt<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g01-race")?;
    let chunk = env.store().limits().max_enqueue_batch.clamp(1, 500);
    let mut ids = Vec::with_capacity(RACE_ITEMS);
    while ids.len() < RACE_ITEMS {
        let n = chunk.min(RACE_ITEMS - ids.len());
        ids.extend(enqueue(env.store(), (0..n).map(|_| item(&q)).collect()).await?);
    }
    let handles = env.handles(HANDLES).await?;
    let logs = race(&handles, RACERS, |i, store| {
        let q = q.clone();
        async move {
            let me = owner(&format!("claimer-{i}"))?;
            let mut log = ClaimerLog::default();
            for _ in 0..RACE_ITEMS * 2 {
                let leases = retrying("claim", || {
                    store.claim(ClaimParams::new(q.clone(), me.clone(), RACE_BATCH, LEASE))
                })
                .await?;
                check_leases(&leases, &me, RACE_BATCH)?;
                if leases.is_empty() {
                    return Ok(log);
                }
                let (release, finish): (Vec<LeaseToken>, Vec<LeaseToken>) = leases
                    .iter()
                    .map(|l| l.token)
                    .partition(released_on_first_attempt);
                log.claimed.extend(release.iter().chain(&finish));
                for (tokens, released) in [(finish, false), (release, true)] {
                    if tokens.is_empty() {
                        continue;
                    }
                    let answers = if released {
                        retrying("release", || {
                            store.release(ReleaseParams::new(tokens.clone()))
                        })
                        .await?
                    } else {
                        retrying("complete", || {
                            store.complete(CompleteParams::new(tokens.clone()))
                        })
                        .await?
                    };
                    ensure(
                        answers.len() == tokens.len(),
                        "one answer per token",
                        (tokens.len(), answers.len()),
                    )?;
                    let log_to = if released {
                        &mut log.released
                    } else {
                        &mut log.completed
                    };
                    log_to.extend(tokens.into_iter().zip(answers));
                }
            }
            Err(Failure::new(
                "a claimer to drain the queue",
                format!("{me} still claimed after {} rounds", RACE_ITEMS * 2),
            ))
        }
    })
    .await?;

    // What each racer was told: every finalize of a lease it was just granted, by
    // the one live owner, is accepted.
    for (i, log) in logs.iter().enumerate() {
        for (token, outcome) in log.completed.iter().chain(&log.released) {
            ensure(
                *outcome == TokenOutcome::Accepted,
                format!("claimer-{i}'s finalize of its own live lease {token} to be Accepted"),
                outcome,
            )?;
        }
    }
    // Where the items went: each claimed exactly once per attempt, finished exactly once.
    let mut attempts: BTreeMap<ItemId, Vec<u32>> = BTreeMap::new();
    let mut finished: BTreeMap<ItemId, Vec<u32>> = BTreeMap::new();
    for log in &logs {
        for t in &log.claimed {
            attempts.entry(t.id).or_default().push(t.attempt);
        }
        for (t, _) in &log.completed {
            finished.entry(t.id).or_default().push(t.attempt);
        }
    }
    let enqueued: HashSet<ItemId> = ids.iter().copied().collect();
    for (id, list) in &mut attempts {
        ensure(
            enqueued.contains(id),
            "claims to hand out only enqueued items",
            id,
        )?;
        list.sort_unstable();
        let expected: Vec<u32> = (1..=list.len() as u32).collect();
        ensure(
            *list == expected,
            format!("item {id} to be claimed exactly once per attempt"),
            list.clone(),
        )?;
    }
    ensure_eq(attempts.len(), RACE_ITEMS, "distinct items claimed")?;
    for id in &ids {
        let last = attempts.get(id).and_then(|a| a.last()).copied();
        let done = finished.get(id).cloned().unwrap_or_default();
        ensure(
            done.len() == 1 && done.first().copied() == last,
            format!("item {id} to be completed exactly once, by its last attempt {last:?}"),
            done,
        )?;
    }
    expect_counts(
        env.store(),
        &q,
        counts(0, 0, 0, 0, RACE_ITEMS as u64),
        "after the race",
    )
    .await?;
    claim_none(env.store(), &q, &owner("late")?, "every item finished").await?;
    pass()
}
