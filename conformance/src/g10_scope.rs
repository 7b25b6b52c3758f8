//! G10 Scope exclusivity: at most one running item per `scope` key across all workers.
//! A claimer passes over a busy scope and takes the next eligible item; unscoped items
//! are never serialised.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tenure_core::{FailOutcome, ItemId, Lease, ScopeKey, TokenOutcome};

use crate::case::{register, Case, CaseResult, Env};
use crate::check::{ensure, ensure_eq, pass};
use crate::fixtures::{
    claim, claim_from, claim_none, claim_one, complete, drain_keyed, enqueue, enqueue_n, fail,
    item, keyed_items, owner, queue, release, retry, scope, tokens, HANDLES, LEASE,
};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g10_scope";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        a_busy_scope_is_passed_over_for_the_next_eligible_item,
        a_batch_claim_takes_one_item_per_scope,
        unscoped_work_is_never_held_up,
        a_finished_failed_or_released_item_frees_its_scope,
        an_expired_lease_frees_its_scope,
        a_busy_scope_is_busy_for_peers_too,
        concurrent_claimers_never_run_two_items_of_one_scope,
        a_busy_scope_is_passed_over_in_every_queue,
    ]
}

fn ids_of(leases: &[Lease]) -> HashSet<ItemId> {
    leases.iter().map(|l| l.token.id).collect()
}

fn in_scope(leases: &[Lease], key: &ScopeKey) -> usize {
    leases
        .iter()
        .filter(|l| l.item.scope.as_ref() == Some(key))
        .count()
}

async fn a_busy_scope_is_passed_over_for_the_next_eligible_item<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g10")?;
    let x = scope("tenant-x")?;
    let ids = enqueue(
        env.store(),
        vec![item(&q).scope(x.clone()), item(&q).scope(x), item(&q)],
    )
    .await?;
    let w = owner("w1")?;
    let first = claim_one(env.store(), &q, &w, "the first claim").await?;
    ensure_eq(first.token.id, ids[0], "the first item claimed")?;
    let second = claim_one(env.store(), &q, &w, "the claim while the scope is busy").await?;
    ensure_eq(
        second.token.id,
        ids[2],
        "the item claimed while its scope is busy (the unscoped one, passing the busy scope over)",
    )?;
    claim_none(env.store(), &q, &w, "the only ready item's scope is busy").await?;
    pass()
}

async fn a_batch_claim_takes_one_item_per_scope<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g10")?;
    let (x, y) = (scope("x")?, scope("y")?);
    enqueue(
        env.store(),
        vec![
            item(&q).scope(x.clone()),
            item(&q).scope(x.clone()),
            item(&q).scope(y.clone()),
            item(&q).scope(x.clone()),
            item(&q).scope(y.clone()),
        ],
    )
    .await?;
    let leases = claim(env.store(), &q, &owner("w1")?, 10).await?;
    ensure_eq(
        (in_scope(&leases, &x), in_scope(&leases, &y), leases.len()),
        (1, 1, 2),
        "a claim of 10 over scopes x (3 items) and y (2 items): (x, y, total)",
    )?;
    pass()
}

async fn unscoped_work_is_never_held_up<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g10")?;
    let x = scope("x")?;
    enqueue(
        env.store(),
        vec![item(&q).scope(x.clone()), item(&q).scope(x)],
    )
    .await?;
    let loose: HashSet<ItemId> = enqueue_n(env.store(), &q, 10).await?.into_iter().collect();
    let w = owner("w1")?;
    let first = claim(env.store(), &q, &w, 5).await?;
    let second = claim(env.store(), &q, &w, 10).await?;
    let all: HashSet<ItemId> = ids_of(&first).union(&ids_of(&second)).copied().collect();
    ensure_eq(
        all.intersection(&loose).count(),
        10,
        "unscoped items claimed by a claim of 5 and one of 10",
    )?;
    ensure_eq(
        all.len(),
        11,
        "items claimed in all (ten unscoped, one of scope x)",
    )?;
    pass()
}

async fn a_finished_failed_or_released_item_frees_its_scope<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g10")?;
    let x = scope("x")?;
    let ids = enqueue(
        env.store(),
        (0..4).map(|_| item(&q).scope(x.clone())).collect(),
    )
    .await?;
    let w = owner("w1")?;
    let a = claim_one(env.store(), &q, &w, "the claim of the first item").await?;
    ensure_eq(
        complete(env.store(), a.token).await?,
        TokenOutcome::Accepted,
        "the complete",
    )?;
    let b = claim_one(env.store(), &q, &w, "the claim after a complete").await?;
    let told = fail(
        env.store(),
        retry(b.token, Duration::from_secs(600), "later"),
    )
    .await?;
    ensure(
        matches!(told, FailOutcome::Retrying { .. }),
        "the retryable failure to be accepted",
        told,
    )?;
    let c = claim_one(env.store(), &q, &w, "the claim after a failure").await?;
    ensure_eq(
        release(env.store(), c.token).await?,
        TokenOutcome::Accepted,
        "the release",
    )?;
    let again = claim_one(env.store(), &q, &w, "the claim after a release").await?;
    ensure(
        [ids[2], ids[3]].contains(&again.token.id),
        "the claim after a release to take a ready item of the freed scope",
        again.token,
    )?;
    pass()
}

async fn an_expired_lease_frees_its_scope<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g10")?;
    let x = scope("x")?;
    let ids = enqueue(
        env.store(),
        vec![item(&q).scope(x.clone()), item(&q).scope(x.clone())],
    )
    .await?;
    claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    env.advance(LEASE);
    let peer = env.peer().await?;
    let leases = claim(&*peer, &q, &owner("w2")?, 10).await?;
    ensure_eq(
        (leases.len(), in_scope(&leases, &x)),
        (1, 1),
        "a claim of 10 after the scope's lease expired (one item of the scope)",
    )?;
    ensure(
        ids.contains(&leases[0].token.id),
        "the claimed item to be of the freed scope",
        leases[0].token,
    )?;
    pass()
}

async fn a_busy_scope_is_busy_for_peers_too<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g10")?;
    let x = scope("x")?;
    enqueue(
        env.store(),
        vec![item(&q).scope(x.clone()), item(&q).scope(x)],
    )
    .await?;
    claim_one(env.store(), &q, &owner("w1")?, "the first claim").await?;
    let peer = env.peer().await?;
    claim_none(
        &*peer,
        &q,
        &owner("w2")?,
        "the scope runs an item through another handle",
    )
    .await?;
    pass()
}

async fn concurrent_claimers_never_run_two_items_of_one_scope<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g10-race")?;
    let (scopes, per_scope) = (4, 8);
    let (items, keys) = keyed_items(&q, scopes, per_scope, 1, |it, s| {
        Ok(it.scope(scope(&format!("x{s}"))?))
    })?;
    let total = items.len();
    enqueue(env.store(), items).await?;
    let handles = env.handles(HANDLES).await?;
    let run = drain_keyed(&handles, &q, Arc::new(keys), total, 8, 4).await?;
    ensure(
        run.overlaps.is_empty(),
        "no two items of one scope to be running at once (scope, position)",
        &run.overlaps,
    )?;
    run.expect_all_finished(env.store(), &q, total).await?;
    pass()
}

async fn a_busy_scope_is_passed_over_in_every_queue<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let (qa, qb) = (queue("g10-a")?, queue("g10-b")?);
    let (x, y) = (scope("x")?, scope("y")?);
    let ids = enqueue(
        env.store(),
        vec![
            item(&qa).scope(x.clone()),
            item(&qb).scope(x.clone()),
            item(&qb),
        ],
    )
    .await?;
    let w = owner("w1")?;
    let a = claim_one(
        env.store(),
        &qa,
        &w,
        "the claim of scope x's item in queue a",
    )
    .await?;
    ensure_eq(a.token.id, ids[0], "the item claimed from queue a")?;
    let peer = env.peer().await?;
    let from_b = claim(&*peer, &qb, &owner("w2")?, 10).await?;
    ensure_eq(
        tokens(&from_b),
        vec![(ids[2], 1)],
        "a claim of 10 from queue b while scope x runs in queue a (the unscoped item, \
         passing x's over)",
    )?;
    ensure_eq(
        complete(env.store(), a.token).await?,
        TokenOutcome::Accepted,
        "the complete of x's item in queue a",
    )?;
    let freed = claim(&*peer, &qb, &owner("w2")?, 10).await?;
    ensure_eq(
        tokens(&freed),
        vec![(ids[1], 1)],
        "a claim of 10 from queue b once scope x is free",
    )?;
    // One batch over both queues: scope y has a ready item in each.
    let ys = enqueue(
        env.store(),
        vec![item(&qa).scope(y.clone()), item(&qb).scope(y.clone())],
    )
    .await?;
    let batch = claim_from(env.store(), &[&qa, &qb], "w3", 10).await?;
    let of_y = batch.iter().filter(|l| ys.contains(&l.token.id)).count();
    ensure_eq(
        (of_y, batch.len()),
        (1, 1),
        "a claim of 10 over queues [a, b] with one ready item of scope y in each: \
         (items of y, total)",
    )?;
    pass()
}
