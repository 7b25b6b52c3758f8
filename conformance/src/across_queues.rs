//! The keyed guarantees across queues. Each key's reach is part of the contract:
//!
//! - G9: "items with one `stream` key are claimed strictly in enqueue order". The key
//!   is not qualified by a queue, so a stream spans queues: an item of stream S in
//!   queue B is not claimable while an earlier item of S in queue A is unfinished
//!   (ready, running, waiting for a retry or dead).
//! - G10: "at most one running item per `scope` key across all workers". A scope
//!   spans queues too: a running item of scope X in queue A makes every item of X in
//!   queue B pass over, and one batch claim over both queues takes one item of X.
//! - G11: dedup keys belong to their queue by design (`(queue, key)` is what the
//!   store records): the same key in two queues inserts both, and each queue still
//!   answers its own earlier item as the duplicate, however the queues interleave.
//! - G14: "a stream stays pinned to its instance until that instance is evicted". The
//!   pin is the stream's, so it holds in every queue the stream has items in.
//!
//! Each case registers in the group of its guarantee.

use std::time::Duration;

use tenure_core::{
    ClaimParams, EnqueueParams, Enqueued, FailOutcome, ItemId, Lease, NewItem, QueueName, Store,
    TokenOutcome,
};

use crate::case::{Capability, Case, CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_counts, pass, OrFail};
use crate::fixtures::{
    check_leases, claim, claim_none, claim_one, complete, counts, dedup, enqueue, fail, item,
    owner, queue, retry, scope, stream, LEASE,
};
use crate::g14_partitioned_claiming::{
    beat, id_set, in_share, pclaim, stream_where, three_instances,
};
use crate::harness::Harness;

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    let mut all = crate::register![crate::g09_stream_fifo::GROUP;
        a_stream_spanning_two_queues_is_claimed_in_enqueue_order_across_them,
    ];
    all.extend(crate::register![crate::g10_scope::GROUP;
        a_busy_scope_is_passed_over_in_every_queue,
    ]);
    all.extend(crate::register![crate::g11_dedup::GROUP;
        each_queue_answers_its_own_earlier_item_for_a_shared_dedup_key,
    ]);
    all.extend(crate::register![
        crate::g14_partitioned_claiming::GROUP, Capability::PartitionedClaiming;
        a_streams_pin_holds_in_every_queue_of_the_stream,
    ]);
    all
}

/// The item and attempt of each lease's token (its lease id is random).
fn tokens(leases: &[Lease]) -> Vec<(ItemId, u32)> {
    leases.iter().map(|l| l.token.item_attempt()).collect()
}

/// Claims from several queues at once.
async fn claim_from<S: Store + ?Sized>(
    store: &S,
    queues: &[&QueueName],
    who: &str,
    limit: u32,
) -> Result<Vec<Lease>, Failure> {
    let me = owner(who)?;
    let params = ClaimParams::new(queues[0].clone(), me.clone(), limit, LEASE)
        .queues(queues.iter().map(|q| (*q).clone()).collect());
    let leases = store.claim(params).await.or_fail("claim")?;
    check_leases(&leases, &me, limit)?;
    Ok(leases)
}

async fn a_stream_spanning_two_queues_is_claimed_in_enqueue_order_across_them<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (qa, qb) = (queue("g09-a")?, queue("g09-b")?);
    let s = stream("spans")?;
    let ids = enqueue(
        env.store(),
        vec![
            item(&qa).stream(s.clone()),
            item(&qb).stream(s.clone()),
            item(&qb),
        ],
    )
    .await?;
    let w = owner("w1")?;
    let first = claim(env.store(), &qb, &w, 10).await?;
    ensure_eq(
        tokens(&first),
        vec![(ids[2], 1)],
        "a claim of 10 from queue b while the stream's head waits, ready, in queue a \
         (only b's unstreamed item)",
    )?;
    ensure_eq(
        complete(env.store(), first[0].token).await?,
        TokenOutcome::Accepted,
        "the unstreamed item's complete",
    )?;
    let head = claim_one(env.store(), &qa, &w, "the claim of the head from queue a").await?;
    ensure_eq(head.token.id, ids[0], "the stream's head")?;
    claim_none(env.store(), &qb, &w, "the stream's head runs in queue a").await?;
    let delay = Duration::from_secs(60);
    let told = fail(env.store(), retry(head.token, delay, "later")).await?;
    ensure(
        matches!(told, FailOutcome::Retrying { .. }),
        "the head's retryable failure to be accepted",
        told,
    )?;
    claim_none(
        env.store(),
        &qb,
        &w,
        "the stream's head waits in queue a for its retry",
    )
    .await?;
    env.advance(delay);
    let both = claim_from(env.store(), &[&qb, &qa], "w2", 10).await?;
    ensure_eq(
        tokens(&both),
        vec![(ids[0], 2)],
        "a claim of 10 over queues [b, a] once the retry is due (the head alone)",
    )?;
    ensure_eq(
        complete(env.store(), both[0].token).await?,
        TokenOutcome::Accepted,
        "the head's complete",
    )?;
    let next = claim_one(
        env.store(),
        &qb,
        &w,
        "the claim from queue b after the head",
    )
    .await?;
    ensure_eq(
        next.token.id,
        ids[1],
        "the stream's second item, in queue b",
    )?;
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

fn keyed(q: &QueueName, key: &str) -> Result<NewItem, Failure> {
    Ok(item(q).dedup_key(dedup(key)?))
}

async fn enqueue_answers<S: Store + ?Sized>(
    store: &S,
    items: Vec<NewItem>,
) -> Result<Vec<Enqueued>, Failure> {
    store
        .enqueue(EnqueueParams::new(items))
        .await
        .or_fail("enqueue")
}

fn answer(id: ItemId, duplicate: bool) -> Enqueued {
    Enqueued { id, duplicate }
}

async fn each_queue_answers_its_own_earlier_item_for_a_shared_dedup_key<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (qa, qb) = (queue("g11-a")?, queue("g11-b")?);
    let (a1, b1) = (keyed(&qa, "k")?, keyed(&qb, "k")?);
    let (a1_id, b1_id) = (a1.id, b1.id);
    for (it, id, which) in [(a1, a1_id, "queue a"), (b1, b1_id, "queue b")] {
        let told = enqueue_answers(env.store(), vec![it]).await?;
        ensure_eq(
            told,
            vec![answer(id, false)],
            &format!("the first enqueue of key k in {which}"),
        )?;
    }
    let told = enqueue_answers(env.store(), vec![keyed(&qa, "k")?, keyed(&qb, "k")?]).await?;
    ensure_eq(
        told,
        vec![answer(a1_id, true), answer(b1_id, true)],
        "an enqueue of key k in [queue a, queue b] after both queues used it \
         (each queue's own earlier item, as a duplicate)",
    )?;
    // Interleaved within one call.
    let batch = vec![
        keyed(&qa, "j")?,
        keyed(&qb, "j")?,
        keyed(&qa, "j")?,
        keyed(&qb, "j")?,
    ];
    let (ja, jb) = (batch[0].id, batch[1].id);
    let told = enqueue_answers(env.store(), batch).await?;
    ensure_eq(
        told,
        vec![
            answer(ja, false),
            answer(jb, false),
            answer(ja, true),
            answer(jb, true),
        ],
        "one enqueue of key j in [queue a, queue b, queue a, queue b]",
    )?;
    for q in [&qa, &qb] {
        expect_counts(env.store(), q, counts(2, 0, 0, 0, 0), "after the enqueues").await?;
    }
    pass()
}

async fn a_streams_pin_holds_in_every_queue_of_the_stream<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (qa, qb) = (queue("g14-a")?, queue("g14-b")?);
    let (a, b, c) = three_instances()?;
    beat(env.store(), &a).await?;
    beat(env.store(), &b).await?;
    // A stream that is b's while a and b are registered, and not b's once c joins.
    let s = stream_where("spans", |s| {
        let id = ItemId::new();
        in_share(Some(s), id, &b, &[&a, &b]) && !in_share(Some(s), id, &b, &[&a, &b, &c])
    })?;
    let ids = enqueue(
        env.store(),
        vec![item(&qa).stream(s.clone()), item(&qb).stream(s.clone())],
    )
    .await?;
    let head = pclaim(env.store(), &qa, &b, 10).await?;
    ensure_eq(
        id_set(&head),
        [ids[0]].into_iter().collect(),
        "instance-b's claim from queue a: the stream's head, which pins the stream to it",
    )?;
    for who in [&a, &b] {
        let took = pclaim(env.store(), &qb, who, 10).await?;
        ensure(
            took.is_empty(),
            format!("{who} to take nothing from queue b while the stream's head runs in queue a"),
            id_set(&took),
        )?;
    }
    ensure_eq(
        complete(env.store(), head[0].token).await?,
        TokenOutcome::Accepted,
        "the complete of the head",
    )?;
    // c joins: by partition the stream would now go elsewhere, but it is pinned to b,
    // in queue b as in queue a.
    beat(env.store(), &c).await?;
    for other in [&a, &c] {
        let took = pclaim(env.store(), &qb, other, 10).await?;
        ensure(
            took.is_empty(),
            format!("{other} to take nothing from queue b of a stream pinned to instance-b"),
            id_set(&took),
        )?;
    }
    let got = pclaim(env.store(), &qb, &b, 10).await?;
    ensure_eq(
        id_set(&got),
        [ids[1]].into_iter().collect(),
        "instance-b's claim from queue b: the pinned stream's next item",
    )?;
    pass()
}
