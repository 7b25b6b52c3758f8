//! Dead items by filter: requeue and discard take a queue's dead items by age, in
//! bounded batches, earliest dead first, and let their streams move on.

use std::time::Duration;

use tenure_core::{
    DeadFilter, DiscardParams, FailOutcome, ItemId, ItemState, QueueName, RecoverParams,
    RequeueParams, Store, TokenOutcome,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_absent, expect_state, get, pass, OrFail};
use crate::fixtures::{
    claim, claim_none, claim_one, complete, enqueue, enqueue_n, item, kill_next, owner, queue,
    stream, LEASE, TICK,
};
use crate::harness::Harness;

/// Makes `n` items of `queue` dead, one at a time, and returns their ids.
pub(super) async fn make_dead<S: Store + ?Sized>(
    store: &S,
    queue: &tenure_core::QueueName,
    n: usize,
) -> Result<Vec<ItemId>, Failure> {
    let w = owner("killer")?;
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = enqueue(store, vec![item(queue)]).await?[0];
        kill_next(store, queue, &w).await?;
        ids.push(id);
    }
    Ok(ids)
}

pub(super) async fn dead_items_are_requeued_and_discarded_by_queue_and_age_in_bounded_batches<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, other) = (queue("control")?, queue("control-other")?);
    let old = make_dead(env.store(), &q, 3).await?;
    env.advance(Duration::from_secs(60));
    let young = make_dead(env.store(), &q, 2).await?;
    let elsewhere = make_dead(env.store(), &other, 1).await?[0];
    env.advance(Duration::from_secs(10));
    let ready = enqueue_n(env.store(), &q, 1).await?[0];
    // Dead for at least 30 s: the three old ones, two per call.
    let filter = DeadFilter::new(q.clone())
        .older_than(Duration::from_secs(30))
        .limit(2);
    let mut batches = Vec::new();
    for _ in 0..3 {
        batches.push(
            env.store()
                .dead_requeue(RequeueParams::matching(filter.clone()))
                .await
                .or_fail("dead_requeue")?,
        );
    }
    ensure_eq(batches, vec![2, 1, 0], "the filtered requeue's batches")?;
    for &id in &old {
        let it = expect_state(env.store(), id, ItemState::Ready, "a filtered requeue").await?;
        ensure_eq(it.attempt, 1, "a requeued item's attempt (kept)")?;
    }
    for &id in &young {
        expect_state(env.store(), id, ItemState::Dead, "a requeue of older items").await?;
    }
    // Discard every dead item of the queue: the two young ones; the other queue's stays.
    let n = env
        .store()
        .dead_discard(DiscardParams::matching(DeadFilter::new(q.clone()).limit(1)))
        .await
        .or_fail("dead_discard")?;
    ensure_eq(n, 1, "a discard batch of one")?;
    let n = env
        .store()
        .dead_discard(DiscardParams::matching(DeadFilter::new(q.clone())))
        .await
        .or_fail("dead_discard")?;
    ensure_eq(n, 1, "the rest of the discard")?;
    for &id in &young {
        expect_absent(env.store(), id, "the filtered discard").await?;
    }
    expect_state(
        env.store(),
        elsewhere,
        ItemState::Dead,
        "a discard of another queue",
    )
    .await?;
    expect_state(
        env.store(),
        ready,
        ItemState::Ready,
        "a discard of dead items",
    )
    .await?;
    for &id in &old {
        expect_state(env.store(), id, ItemState::Ready, "a discard of dead items").await?;
    }
    pass()
}

pub(super) async fn a_bounded_dead_filter_takes_the_earliest_dead_first<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    // Four items enqueued a, b, c, d, claimed together, then failed 10 s apart in the
    // order c, a, d, b: dying order differs from enqueue and id order.
    let ids = enqueue_n(env.store(), &q, 4).await?;
    let (a, b, c, d) = (ids[0], ids[1], ids[2], ids[3]);
    let w = owner("killer")?;
    let leases = claim(env.store(), &q, &w, 4).await?;
    ensure_eq(leases.len(), 4, "the claim of all four")?;
    let token = |id: ItemId| {
        leases
            .iter()
            .find(|l| l.token.id == id)
            .map(|l| l.token)
            .ok_or_else(|| Failure::new(format!("item {id} among the leases"), "absent"))
    };
    for id in [c, a, d, b] {
        env.advance(Duration::from_secs(10));
        crate::fixtures::fail(
            env.store(),
            crate::fixtures::permanent(token(id)?, "permanent"),
        )
        .await?;
    }
    env.advance(Duration::from_secs(10));
    let store = env.store();
    let states = |want: [ItemState; 4]| async move {
        let mut seen = Vec::new();
        for id in [a, b, c, d] {
            seen.push(get(store, id).await?.state);
        }
        ensure_eq(seen, want.to_vec(), "the states of a, b, c, d")
    };
    let requeue = |limit: u32| {
        let filter = DeadFilter::new(q.clone()).limit(limit);
        async move {
            store
                .dead_requeue(RequeueParams::matching(filter))
                .await
                .or_fail("dead_requeue")
        }
    };
    use ItemState::{Dead, Ready};
    // A batch of one takes c (dead first); a batch of two then takes a and d.
    ensure_eq(requeue(1).await?, 1, "a filtered requeue of one")?;
    states([Dead, Dead, Ready, Dead]).await?;
    ensure_eq(requeue(2).await?, 2, "a filtered requeue of two")?;
    states([Ready, Dead, Ready, Ready]).await?;
    // a dies again, now the latest death: b, enqueued after it, died before it.
    let mut again = claim(env.store(), &q, &w, 3).await?;
    ensure_eq(again.len(), 3, "the claim of the three requeued items")?;
    again.sort_by_key(|l| l.token.id == a);
    for l in &again {
        env.advance(Duration::from_secs(10));
        let failure = if l.token.id == a {
            crate::fixtures::permanent(l.token, "again")
        } else {
            crate::fixtures::retry(l.token, Duration::from_secs(3600), "later")
        };
        crate::fixtures::fail(env.store(), failure).await?;
    }
    env.advance(Duration::from_secs(10));
    states([Dead, Dead, Ready, Ready]).await?;
    let discard = |filter: DeadFilter| async move {
        store
            .dead_discard(DiscardParams::matching(filter))
            .await
            .or_fail("dead_discard")
    };
    ensure_eq(
        discard(DeadFilter::new(q.clone()).limit(1)).await?,
        1,
        "a filtered discard of one",
    )?;
    expect_absent(
        env.store(),
        b,
        "a discard of one (b died before a's second death)",
    )
    .await?;
    expect_state(env.store(), a, Dead, "a discard of one that took b").await?;
    ensure_eq(
        discard(
            DeadFilter::new(q.clone())
                .older_than(Duration::from_secs(20))
                .limit(5),
        )
        .await?,
        0,
        "a filtered discard of items dead for 20 s (a died 10 s ago)",
    )?;
    ensure_eq(
        discard(DeadFilter::new(q.clone())).await?,
        1,
        "a filtered discard of every dead item",
    )?;
    expect_absent(env.store(), a, "a discard of every dead item").await?;
    pass()
}

/// Requeues the dead items of `queue` by filter, granting `additional` attempts each.
pub(super) async fn requeue_matching<S: Store + ?Sized>(
    store: &S,
    filter: DeadFilter,
    additional: u32,
) -> Result<u64, Failure> {
    store
        .dead_requeue(RequeueParams::matching(filter).additional_attempts(additional))
        .await
        .or_fail("dead_requeue")
}

pub(super) async fn a_filtered_requeue_grants_attempts_and_resets_stalls_as_a_requeue_by_id_does<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let (spent_q, stalled_q) = (queue("control-spent")?, queue("control-stalled")?);
    let w = owner("w1")?;
    // One item dies out of attempts (1 of 1), another out of stalls (2 of 2).
    let spent = enqueue(env.store(), vec![item(&spent_q).max_attempts(1)]).await?[0];
    let lease = claim_one(env.store(), &spent_q, &w, "the claim of attempt 1 of 1").await?;
    ensure_eq(
        crate::fixtures::fail(
            env.store(),
            crate::fixtures::retry(lease.token, Duration::ZERO, "boom"),
        )
        .await?,
        FailOutcome::Dead,
        "attempt 1 of 1 failing",
    )?;
    let stalled = enqueue(env.store(), vec![item(&stalled_q).max_stalls(2)]).await?[0];
    for n in 1..=2 {
        claim_one(
            env.store(),
            &stalled_q,
            &w,
            "the claim of an attempt to stall",
        )
        .await?;
        env.advance(LEASE);
        let r = env
            .store()
            .recover_expired(RecoverParams::new(10))
            .await
            .or_fail("recover_expired")?;
        ensure_eq(
            r.requeued + r.dead,
            1,
            &format!("leases recovered (stall {n})"),
        )?;
    }
    let it = expect_state(env.store(), stalled, ItemState::Dead, "two stalls of two").await?;
    ensure_eq(it.stalls, 2, "the stalled item's stalls")?;
    env.advance(Duration::from_secs(60));
    for (q, id, attempt) in [(&spent_q, spent, 1), (&stalled_q, stalled, 2)] {
        let error = get(env.store(), id).await?.last_error;
        ensure(error.is_some(), "a dead item's last error", &error)?;
        ensure_eq(
            requeue_matching(env.store(), DeadFilter::new(q.clone()), 3).await?,
            1,
            &format!("a filtered requeue of {q} granting 3 attempts"),
        )?;
        let it = expect_state(env.store(), id, ItemState::Ready, "a filtered requeue").await?;
        ensure_eq(
            (it.attempt, it.stalls, it.run_at, it.last_error),
            (attempt, 0, env.now(), error),
            &format!(
                "{q}'s item's attempt (kept), stalls (0), run_at (now) and last error (kept) after a filtered requeue"
            ),
        )?;
        ensure(
            it.max_attempts >= attempt + 3,
            format!("{q}'s item's max_attempts at least attempt + 3 after a filtered requeue granting 3"),
            it.max_attempts,
        )?;
    }
    // The granted attempts are real: two more failures retry, the third is the last.
    for (attempt, expected) in [
        (2, FailOutcome::Retrying { run_at: env.now() }),
        (3, FailOutcome::Retrying { run_at: env.now() }),
        (4, FailOutcome::Dead),
    ] {
        let lease = claim_one(env.store(), &spent_q, &w, "the claim of a granted attempt").await?;
        ensure_eq(
            lease.token.item_attempt(),
            (spent, attempt),
            "the claimed token",
        )?;
        ensure_eq(
            crate::fixtures::fail(
                env.store(),
                crate::fixtures::retry(lease.token, Duration::ZERO, "again"),
            )
            .await?,
            expected,
            "a failure after a filtered requeue granting 3",
        )?;
    }
    // The stalls start again from 0: one more stall puts the item back, not dead.
    claim_one(
        env.store(),
        &stalled_q,
        &w,
        "the claim after the filtered requeue",
    )
    .await?;
    env.advance(LEASE);
    env.store()
        .recover_expired(RecoverParams::new(10))
        .await
        .or_fail("recover_expired")?;
    let it = expect_state(
        env.store(),
        stalled,
        ItemState::Ready,
        "its first stall after a filtered requeue (1 of 2)",
    )
    .await?;
    ensure_eq(it.stalls, 1, "stalls after one stall since the requeue")?;
    pass()
}

/// What a claim of up to ten items of `queue` takes.
pub(super) async fn claim_ten<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
) -> Result<Vec<tenure_core::Lease>, Failure> {
    claim(store, queue, &owner("w2")?, 10).await
}

pub(super) async fn a_dead_head_discarded_or_requeued_by_filter_lets_its_stream_move_on<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let (discarded, requeued) = (queue("control-discard")?, queue("control-requeue")?);
    let w = owner("w1")?;
    let ids_of = |leases: &[tenure_core::Lease]| -> Vec<ItemId> {
        leases.iter().map(|l| l.token.id).collect()
    };
    // A stream whose dead head is discarded by filter: the next item is the head.
    let s = stream("s")?;
    let d = enqueue(
        env.store(),
        vec![
            item(&discarded).stream(s.clone()),
            item(&discarded).stream(s),
        ],
    )
    .await?;
    kill_next(env.store(), &discarded, &w).await?;
    claim_none(env.store(), &discarded, &w, "the stream's head is dead").await?;
    let n = env
        .store()
        .dead_discard(DiscardParams::matching(DeadFilter::new(discarded.clone())))
        .await
        .or_fail("dead_discard")?;
    ensure_eq(n, 1, "items discarded by filter")?;
    expect_absent(env.store(), d[0], "its discard by filter").await?;
    let got = claim_ten(env.store(), &discarded).await?;
    ensure_eq(
        ids_of(&got),
        vec![d[1]],
        "what a claim takes once the stream's dead head was discarded by filter",
    )?;
    // A stream whose dead head is requeued by filter: it runs again, still first.
    let t = stream("t")?;
    let r = enqueue(
        env.store(),
        vec![item(&requeued).stream(t.clone()), item(&requeued).stream(t)],
    )
    .await?;
    kill_next(env.store(), &requeued, &w).await?;
    ensure_eq(
        requeue_matching(env.store(), DeadFilter::new(requeued.clone()), 1).await?,
        1,
        "items requeued by filter",
    )?;
    let got = claim_ten(env.store(), &requeued).await?;
    ensure_eq(
        got.iter()
            .map(|l| l.token.item_attempt())
            .collect::<Vec<_>>(),
        vec![(r[0], 2)],
        "what a claim takes once the stream's dead head was requeued by filter (the head \
         alone, at its next attempt)",
    )?;
    ensure_eq(
        complete(env.store(), got[0].token).await?,
        TokenOutcome::Accepted,
        "the requeued head's complete",
    )?;
    let got = claim_ten(env.store(), &requeued).await?;
    ensure_eq(
        ids_of(&got),
        vec![r[1]],
        "what a claim takes once the requeued head finished",
    )?;
    pass()
}

pub(super) async fn a_dead_filter_takes_an_item_dead_for_exactly_older_than<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let age = Duration::from_secs(30);
    let id = make_dead(env.store(), &q, 1).await?[0];
    let filter = DeadFilter::new(q.clone()).older_than(age);
    env.advance(age - TICK);
    ensure_eq(
        requeue_matching(env.store(), filter.clone(), 1).await?,
        0,
        "a requeue of items dead for 30 s, one tick before the item has been",
    )?;
    ensure_eq(
        env.store()
            .dead_discard(DiscardParams::matching(filter.clone()))
            .await
            .or_fail("dead_discard")?,
        0,
        "a discard of items dead for 30 s, one tick before the item has been",
    )?;
    env.advance(TICK);
    ensure_eq(
        requeue_matching(env.store(), filter.clone(), 1).await?,
        1,
        "a requeue of items dead for 30 s, when the item has been dead exactly 30 s",
    )?;
    expect_state(env.store(), id, ItemState::Ready, "its requeue").await?;
    kill_next(env.store(), &q, &owner("killer")?).await?;
    env.advance(age);
    ensure_eq(
        env.store()
            .dead_discard(DiscardParams::matching(filter))
            .await
            .or_fail("dead_discard")?,
        1,
        "a discard of items dead for 30 s, when the item has been dead exactly 30 s",
    )?;
    expect_absent(env.store(), id, "its discard").await?;
    pass()
}

pub(super) async fn a_bounded_dead_filter_takes_items_that_died_together_in_enqueue_order<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let w = owner("killer")?;
    let ids = enqueue_n(env.store(), &q, 4).await?;
    let leases = claim(env.store(), &q, &w, 4).await?;
    ensure_eq(leases.len(), 4, "the claim of all four")?;
    // All four die in one call, at one instant, listed in reverse enqueue order.
    let mut failures: Vec<_> = leases
        .iter()
        .map(|l| crate::fixtures::permanent(l.token, "permanent"))
        .collect();
    failures.reverse();
    let told = env
        .store()
        .fail(tenure_core::FailParams::new(failures))
        .await
        .or_fail("fail")?;
    ensure_eq(
        told,
        vec![FailOutcome::Dead; 4],
        "the answers to four permanent failures",
    )?;
    env.advance(Duration::from_secs(10));
    let mut taken = Vec::new();
    for batch in [1, 2] {
        let before: Vec<ItemState> = {
            let mut v = Vec::new();
            for &id in &ids {
                v.push(get(env.store(), id).await?.state);
            }
            v
        };
        ensure_eq(
            requeue_matching(env.store(), DeadFilter::new(q.clone()).limit(batch), 1).await?,
            u64::from(batch),
            &format!("a filtered requeue of {batch}"),
        )?;
        for (i, &id) in ids.iter().enumerate() {
            let now = get(env.store(), id).await?.state;
            if before[i] == ItemState::Dead && now == ItemState::Ready {
                taken.push(i);
            }
        }
    }
    ensure_eq(
        taken,
        vec![0, 1, 2],
        "the items (by enqueue position) filtered requeues of one then two take of four that \
         died at one instant: the earliest enqueued first",
    )?;
    let n = env
        .store()
        .dead_discard(DiscardParams::matching(DeadFilter::new(q.clone()).limit(1)))
        .await
        .or_fail("dead_discard")?;
    ensure_eq(n, 1, "a filtered discard of one")?;
    expect_absent(env.store(), ids[3], "a discard of the last dead item").await?;
    pass()
}
