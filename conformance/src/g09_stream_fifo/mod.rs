//! G9 Stream FIFO: items with one `stream` key are claimed strictly in enqueue order.
//! While an item of stream S is running, waiting for a scheduled retry, or dead, no
//! later item of S is claimable. Other streams are not held up, in batches too.

mod runs;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tenure_core::{
    DiscardParams, FailOutcome, ItemId, LeaseToken, RequeueParams, Store, TokenOutcome,
};

use crate::case::{register, Capability, Case, CaseResult, Env};
use crate::check::{ensure, ensure_eq, expect_counts, pass, OrFail};
use crate::fixtures::{
    claim, claim_from, claim_none, claim_one, complete, counts, drain_keyed, enqueue, fail, item,
    keyed_items, kill_next, owner, queue, retry, stream, tokens, HANDLES, LEASE,
};
use crate::harness::Harness;

use runs::{
    a_failed_item_of_a_run_puts_every_later_item_back_untouched,
    a_released_item_of_a_run_puts_every_later_item_back_untouched,
    a_run_counts_towards_the_claim_limit,
    a_run_leases_the_head_and_the_ready_items_behind_it_in_order,
    a_run_stops_at_an_item_that_is_not_due_or_not_in_the_claimed_queues,
    a_run_stops_at_an_item_whose_scope_is_busy, a_stream_run_of_zero_is_refused_naming_the_field,
    an_expired_run_is_recovered_from_its_head_without_stalls_behind_it,
    completing_an_item_of_a_run_before_the_items_ahead_of_it_is_refused_and_changes_nothing,
    evicting_the_owner_of_a_run_puts_the_items_behind_its_head_back_untouched,
    one_call_completes_a_run_in_stream_order_and_refuses_it_in_reverse,
    stream_runs_are_served_only_by_stores_that_declare_them,
};

pub(crate) const GROUP: &str = "g09_stream_fifo";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    let mut all = register![GROUP;
        a_running_item_blocks_later_items_of_its_stream,
        retry_scheduled_item_blocks_later_items,
        a_dead_item_blocks_later_items_of_its_stream,
        discarding_a_dead_head_unblocks_its_stream,
        a_requeued_dead_head_runs_before_the_rest_of_its_stream,
        a_scheduled_head_blocks_its_stream,
        an_expired_head_keeps_its_place_ahead_of_later_items,
        stream_order_comes_before_priority,
        other_streams_and_unstreamed_items_are_not_held_up,
        a_batch_claim_takes_only_the_head_of_each_stream,
        concurrent_batch_claimers_keep_every_stream_in_order,
        stream_runs_are_served_only_by_stores_that_declare_them,
    ];
    all.extend(register![GROUP, Capability::StreamRuns;
        a_run_leases_the_head_and_the_ready_items_behind_it_in_order,
        a_run_stops_at_an_item_that_is_not_due_or_not_in_the_claimed_queues,
        a_run_stops_at_an_item_whose_scope_is_busy,
        a_run_counts_towards_the_claim_limit,
        completing_an_item_of_a_run_before_the_items_ahead_of_it_is_refused_and_changes_nothing,
        one_call_completes_a_run_in_stream_order_and_refuses_it_in_reverse,
        a_failed_item_of_a_run_puts_every_later_item_back_untouched,
        a_released_item_of_a_run_puts_every_later_item_back_untouched,
        an_expired_run_is_recovered_from_its_head_without_stalls_behind_it,
        evicting_the_owner_of_a_run_puts_the_items_behind_its_head_back_untouched,
        a_stream_run_of_zero_is_refused_naming_the_field,
    ]);
    all.extend(register![GROUP;
        a_stream_spanning_two_queues_is_claimed_in_enqueue_order_across_them,
    ]);
    all
}

fn ids_of(leases: &[tenure_core::Lease]) -> HashSet<ItemId> {
    leases.iter().map(|l| l.token.id).collect()
}

async fn a_running_item_blocks_later_items_of_its_stream<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g09")?;
    let s = stream("s1")?;
    let ids = enqueue(
        env.store(),
        vec![item(&q).stream(s.clone()), item(&q).stream(s)],
    )
    .await?;
    let w = owner("w1")?;
    let head = claim_one(env.store(), &q, &w, "the claim of the head").await?;
    ensure_eq(
        head.token.id,
        ids[0],
        "the first item of the stream claimed",
    )?;
    claim_none(env.store(), &q, &w, "the stream's head is running").await?;
    ensure_eq(
        complete(env.store(), head.token).await?,
        TokenOutcome::Accepted,
        "the head's complete",
    )?;
    let next = claim_one(env.store(), &q, &w, "the claim after the head finished").await?;
    ensure_eq(next.token.id, ids[1], "the second item of the stream")?;
    pass()
}

async fn retry_scheduled_item_blocks_later_items<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g09")?;
    let s = stream("s1")?;
    let ids = enqueue(
        env.store(),
        vec![item(&q).stream(s.clone()), item(&q).stream(s)],
    )
    .await?;
    let w = owner("w1")?;
    let head = claim_one(env.store(), &q, &w, "the claim of the head").await?;
    let delay = Duration::from_secs(60);
    let told = fail(env.store(), retry(head.token, delay, "later")).await?;
    ensure_eq(
        told,
        FailOutcome::Retrying {
            run_at: env.now() + delay,
        },
        "the head's retry",
    )?;
    claim_none(env.store(), &q, &w, "the stream's head waits for its retry").await?;
    env.advance(delay);
    let again = claim_one(env.store(), &q, &w, "the claim once the retry is due").await?;
    ensure_eq(
        again.token.item_attempt(),
        (ids[0], 2),
        "the retried head, before the rest",
    )?;
    claim_none(env.store(), &q, &w, "the retried head is running").await?;
    pass()
}

async fn a_dead_item_blocks_later_items_of_its_stream<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g09")?;
    let s = stream("s1")?;
    enqueue(
        env.store(),
        vec![item(&q).stream(s.clone()), item(&q).stream(s)],
    )
    .await?;
    let w = owner("w1")?;
    kill_next(env.store(), &q, &w).await?;
    claim_none(env.store(), &q, &w, "the stream's head is dead").await?;
    env.advance(Duration::from_secs(3600));
    claim_none(
        env.store(),
        &q,
        &w,
        "the stream's head is still dead an hour later",
    )
    .await?;
    expect_counts(env.store(), &q, counts(1, 0, 0, 1, 0), "with a dead head").await?;
    pass()
}

async fn discarding_a_dead_head_unblocks_its_stream<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g09")?;
    let s = stream("s1")?;
    let ids = enqueue(
        env.store(),
        vec![item(&q).stream(s.clone()), item(&q).stream(s)],
    )
    .await?;
    let w = owner("w1")?;
    kill_next(env.store(), &q, &w).await?;
    let n = env
        .store()
        .dead_discard(DiscardParams::new(vec![ids[0]]))
        .await
        .or_fail("dead_discard")?;
    ensure_eq(n, 1, "dead heads discarded")?;
    let next = claim_one(
        env.store(),
        &q,
        &w,
        "the claim after the dead head was discarded",
    )
    .await?;
    ensure_eq(next.token.id, ids[1], "the next item of the stream")?;
    pass()
}

async fn a_requeued_dead_head_runs_before_the_rest_of_its_stream<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g09")?;
    let s = stream("s1")?;
    let ids = enqueue(
        env.store(),
        vec![item(&q).stream(s.clone()), item(&q).stream(s)],
    )
    .await?;
    let w = owner("w1")?;
    kill_next(env.store(), &q, &w).await?;
    env.advance(Duration::from_secs(60));
    let n = env
        .store()
        .dead_requeue(RequeueParams::new(vec![ids[0]]))
        .await
        .or_fail("dead_requeue")?;
    ensure_eq(n, 1, "dead heads requeued")?;
    let leases = claim(env.store(), &q, &w, 10).await?;
    let got: Vec<(ItemId, u32)> = leases.iter().map(|l| l.token.item_attempt()).collect();
    ensure_eq(
        got,
        vec![(ids[0], 2)],
        "a claim of 10 after the head was requeued",
    )?;
    pass()
}

async fn a_scheduled_head_blocks_its_stream<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g09")?;
    let s = stream("s1")?;
    let delay = Duration::from_secs(60);
    let ids = enqueue(
        env.store(),
        vec![item(&q).stream(s.clone()).delay(delay), item(&q).stream(s)],
    )
    .await?;
    let w = owner("w1")?;
    claim_none(
        env.store(),
        &q,
        &w,
        "the stream's head is scheduled in 60 s",
    )
    .await?;
    env.advance(delay);
    let head = claim_one(env.store(), &q, &w, "the claim once the head is due").await?;
    ensure_eq(head.token.id, ids[0], "the head of the stream")?;
    pass()
}

async fn an_expired_head_keeps_its_place_ahead_of_later_items<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g09")?;
    let s = stream("s1")?;
    let ids = enqueue(
        env.store(),
        vec![item(&q).stream(s.clone()), item(&q).stream(s)],
    )
    .await?;
    claim_one(env.store(), &q, &owner("w1")?, "the claim of the head").await?;
    env.advance(LEASE);
    let leases = claim(env.store(), &q, &owner("w2")?, 10).await?;
    let got: Vec<(ItemId, u32)> = leases.iter().map(|l| l.token.item_attempt()).collect();
    ensure_eq(
        got,
        vec![(ids[0], 2)],
        "a claim of 10 after the head's lease expired (the head again, alone)",
    )?;
    pass()
}

async fn stream_order_comes_before_priority<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g09")?;
    let s = stream("s1")?;
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).stream(s.clone()).priority(10),
            item(&q).stream(s).priority(-10),
        ],
    )
    .await?;
    let leases = claim(env.store(), &q, &owner("w1")?, 10).await?;
    ensure_eq(
        ids_of(&leases),
        HashSet::from([ids[0]]),
        "a claim of 10 (the head only, despite priority)",
    )?;
    pass()
}

async fn other_streams_and_unstreamed_items_are_not_held_up<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g09")?;
    let (s1, s2) = (stream("s1")?, stream("s2")?);
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).stream(s1.clone()),
            item(&q).stream(s1),
            item(&q).stream(s2),
            item(&q),
        ],
    )
    .await?;
    let w = owner("w1")?;
    let head = claim_one(env.store(), &q, &w, "the claim of s1's head").await?;
    ensure_eq(head.token.id, ids[0], "s1's head")?;
    let leases = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(
        ids_of(&leases),
        HashSet::from([ids[2], ids[3]]),
        "a claim of 10 while s1's head runs (s2's head and the unstreamed item)",
    )?;
    pass()
}

async fn a_batch_claim_takes_only_the_head_of_each_stream<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g09")?;
    let (s1, s2) = (stream("s1")?, stream("s2")?);
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).stream(s1.clone()),
            item(&q).stream(s2.clone()),
            item(&q).stream(s1.clone()),
            item(&q).stream(s1),
            item(&q).stream(s2),
            item(&q),
        ],
    )
    .await?;
    let w = owner("w1")?;
    let first = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(
        ids_of(&first),
        HashSet::from([ids[0], ids[1], ids[5]]),
        "a claim of 10 (each stream's head and the unstreamed item)",
    )?;
    let tokens: Vec<LeaseToken> = first.iter().map(|l| l.token).collect();
    for t in tokens {
        ensure_eq(
            complete(env.store(), t).await?,
            TokenOutcome::Accepted,
            "a head's complete",
        )?;
    }
    let second = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(
        ids_of(&second),
        HashSet::from([ids[2], ids[4]]),
        "a claim of 10 after the heads finished (the next of each stream)",
    )?;
    pass()
}

async fn concurrent_batch_claimers_keep_every_stream_in_order<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g09-race")?;
    let (streams, per_stream) = (6, 6);
    // Two unstreamed items per round, which no stream may hold up.
    let (items, keys) = keyed_items(&q, streams, per_stream, 2, |it, s| {
        Ok(it.stream(stream(&format!("s{s}"))?))
    })?;
    let total = items.len();
    enqueue(env.store(), items).await?;
    let handles = env.handles(HANDLES).await?;
    let run = drain_keyed(&handles, &q, Arc::new(keys), total, 8, 4).await?;
    ensure(
        run.overlaps.is_empty(),
        "no two items of one stream to be running at once (stream, position)",
        &run.overlaps,
    )?;
    for s in 0..streams {
        let order = run.order.get(&s).cloned().unwrap_or_default();
        ensure_eq(
            order,
            (0..per_stream).collect::<Vec<_>>(),
            &format!("the claim order of stream s{s}"),
        )?;
    }
    run.expect_all_finished(env.store(), &q, total).await?;
    pass()
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
