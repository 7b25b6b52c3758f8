//! Control: operators cancel ready and scheduled items (never a running one), pause and
//! resume queues (held leases run on), and requeue or discard dead items by filter in
//! bounded batches.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tenure_core::{
    CancelOutcome, CancelParams, DeadFilter, DiscardParams, EnqueueParams, ErrorKind, FailOutcome,
    ItemId, ItemState, ListState, PauseParams, QueueName, RecoverParams, RenewOutcome,
    RequeueParams, Store, StoreExt, TokenOutcome,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{
    ensure, ensure_eq, expect_absent, expect_invalid, expect_state, get, pass, OrFail,
};
use crate::fixtures::{
    claim, claim_none, claim_one, complete, dedup, enqueue, enqueue_n, item, kill_next, owner,
    queue, race, release, renew, scope, stream, LEASE, RACERS, TICK,
};
use crate::harness::Harness;
use crate::op_inspection::listed;

pub(crate) const GROUP: &str = "op_control";

pub(crate) fn cases<H: Harness>() -> Vec<crate::case::Case<H>> {
    crate::register![GROUP;
        cancel_deletes_ready_and_scheduled_items_and_keeps_their_dedup_keys,
        cancel_leaves_running_dead_and_unknown_items_alone_and_says_which,
        a_cancelled_head_no_longer_holds_up_its_stream_or_scope,
        a_paused_queue_is_not_claimed_while_held_leases_run_on,
        a_pause_racing_claims_is_told_consistently_to_every_racer,
        dead_items_are_requeued_and_discarded_by_queue_and_age_in_bounded_batches,
        bad_cancel_and_filter_input_is_refused_and_writes_nothing,
        a_cancel_racing_claims_never_leaves_an_item_both_cancelled_and_leased,
        a_bounded_dead_filter_takes_the_earliest_dead_first,
        a_filtered_requeue_grants_attempts_and_resets_stalls_as_a_requeue_by_id_does,
        a_dead_head_discarded_or_requeued_by_filter_lets_its_stream_move_on,
        a_dead_filter_takes_an_item_dead_for_exactly_older_than,
        cancelling_an_item_behind_its_stream_head_leaves_the_rest_of_the_stream_in_order,
        cancel_leaves_a_kept_finished_item_alone_answering_done,
        a_paused_queues_expired_lease_is_recovered_and_its_failure_accepted_as_usual,
        a_bounded_dead_filter_takes_items_that_died_together_in_enqueue_order,
        bad_filter_ages_granted_attempts_and_cancel_batches_are_refused_naming_the_field,
    ]
}

async fn cancel<S: Store + ?Sized>(
    store: &S,
    ids: Vec<ItemId>,
) -> Result<Vec<CancelOutcome>, Failure> {
    let n = ids.len();
    let out = store
        .item_cancel(CancelParams::new(ids))
        .await
        .or_fail("item_cancel")?;
    ensure(
        out.len() == n,
        format!("{n} answers to a cancel of {n}"),
        &out,
    )?;
    Ok(out)
}

async fn cancel_deletes_ready_and_scheduled_items_and_keeps_their_dedup_keys<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let key = dedup("once")?;
    let ready = enqueue(env.store(), vec![item(&q).dedup_key(key.clone())]).await?[0];
    let later = enqueue(env.store(), vec![item(&q).delay(Duration::from_secs(60))]).await?[0];
    let kept = enqueue(env.store(), vec![item(&q)]).await?[0];
    ensure_eq(
        cancel(env.store(), vec![ready, later]).await?,
        vec![CancelOutcome::Cancelled, CancelOutcome::Cancelled],
        "the answers to cancelling a ready and a scheduled item",
    )?;
    expect_absent(env.store(), ready, "its cancel").await?;
    expect_absent(env.store(), later, "its cancel").await?;
    ensure_eq(
        cancel(env.store(), vec![ready]).await?,
        vec![CancelOutcome::NotFound],
        "a second cancel of the same item",
    )?;
    // The dedup key is kept: enqueueing it again is a duplicate of the cancelled item.
    let again = env
        .store()
        .enqueue(EnqueueParams::one(item(&q).dedup_key(key)))
        .await
        .or_fail("enqueue")?;
    ensure_eq(
        again
            .iter()
            .map(|e| (e.id, e.duplicate))
            .collect::<Vec<_>>(),
        vec![(ready, true)],
        "re-enqueueing the cancelled item's dedup key",
    )?;
    env.advance(Duration::from_secs(61));
    let w = owner("w1")?;
    let leases = claim(env.store(), &q, &w, 10).await?;
    let ids: Vec<ItemId> = leases.iter().map(|l| l.token.id).collect();
    ensure_eq(
        ids,
        vec![kept],
        "what a claim takes once the cancelled were due",
    )?;
    pass()
}

async fn cancel_leaves_running_dead_and_unknown_items_alone_and_says_which<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let w = owner("w1")?;
    let dead = enqueue(env.store(), vec![item(&q)]).await?[0];
    kill_next(env.store(), &q, &w).await?;
    let running = enqueue(env.store(), vec![item(&q)]).await?[0];
    let lease = claim_one(env.store(), &q, &w, "the claim of the item to hold").await?;
    let before_running = get(env.store(), running).await?;
    let before_dead = get(env.store(), dead).await?;
    let unknown = ItemId::new();
    ensure_eq(
        cancel(env.store(), vec![running, dead, unknown]).await?,
        vec![
            CancelOutcome::Running {
                attempt: 1,
                owner: w.clone(),
            },
            CancelOutcome::Dead,
            CancelOutcome::NotFound,
        ],
        "the answers for a running, a dead and an unknown item",
    )?;
    ensure_eq(
        get(env.store(), running).await?,
        before_running,
        "the running item after the cancel",
    )?;
    ensure_eq(
        get(env.store(), dead).await?,
        before_dead,
        "the dead item after the cancel",
    )?;
    // The one-item convenience says so in its error.
    match env.store().cancel_one(running).await {
        Err(e) if e.kind() == ErrorKind::Conflict && e.to_string().contains("running") => {}
        other => {
            return Err(Failure::new(
                "cancel_one of a running item to be a Conflict saying it is running",
                format!("{other:?}"),
            ))
        }
    }
    // The holder finishes it as usual.
    ensure_eq(
        complete(env.store(), lease.token).await?,
        TokenOutcome::Accepted,
        "the holder's complete after the refused cancel",
    )?;
    pass()
}

async fn a_cancelled_head_no_longer_holds_up_its_stream_or_scope<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let (s, k) = (stream("s")?, scope("k")?);
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).stream(s.clone()),
            item(&q).stream(s.clone()),
            item(&q).scope(k.clone()).priority(-1),
            item(&q).scope(k.clone()).priority(-1),
        ],
    )
    .await?;
    ensure_eq(
        cancel(env.store(), vec![ids[0], ids[2]]).await?,
        vec![CancelOutcome::Cancelled, CancelOutcome::Cancelled],
        "cancelling the stream head and the first of the scope",
    )?;
    let w = owner("w1")?;
    let leases = claim(env.store(), &q, &w, 10).await?;
    let mut got: Vec<ItemId> = leases.iter().map(|l| l.token.id).collect();
    got.sort();
    let mut want = vec![ids[1], ids[3]];
    want.sort();
    ensure_eq(
        got,
        want,
        "the stream's next item and the scope's next item, claimable at once",
    )?;
    pass()
}

async fn a_paused_queue_is_not_claimed_while_held_leases_run_on<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, other) = (queue("control")?, queue("control-other")?);
    let w = owner("w1")?;
    let ids = enqueue_n(env.store(), &q, 3).await?;
    let other_id = enqueue_n(env.store(), &other, 1).await?[0];
    let held = claim(env.store(), &q, &w, 2).await?;
    let pause = PauseParams::new(q.clone());
    ensure_eq(
        env.store()
            .queue_pause(pause.clone())
            .await
            .or_fail("queue_pause")?,
        true,
        "the first pause's answer",
    )?;
    ensure_eq(
        env.store()
            .queue_pause(pause.clone())
            .await
            .or_fail("queue_pause")?,
        false,
        "pausing a paused queue",
    )?;
    claim_none(env.store(), &q, &w, "the queue is paused").await?;
    // A claim over both queues takes only the other queue's item.
    let both = env
        .store()
        .claim(
            tenure_core::ClaimParams::new(q.clone(), w.clone(), 10, LEASE)
                .queues(vec![q.clone(), other.clone()]),
        )
        .await
        .or_fail("claim")?;
    let got: Vec<ItemId> = both.iter().map(|l| l.token.id).collect();
    ensure_eq(
        got,
        vec![other_id],
        "a claim over a paused and a running queue",
    )?;
    // Held leases run on: renew, complete and release are accepted; enqueues too.
    let renewed = renew(env.store(), held[0].token, LEASE).await?;
    ensure(
        matches!(renewed, RenewOutcome::Renewed { .. }),
        "a held lease of a paused queue to renew",
        renewed,
    )?;
    ensure_eq(
        complete(env.store(), held[0].token).await?,
        TokenOutcome::Accepted,
        "completing a held lease of a paused queue",
    )?;
    ensure_eq(
        release(env.store(), held[1].token).await?,
        TokenOutcome::Accepted,
        "releasing a held lease of a paused queue",
    )?;
    let late = enqueue(env.store(), vec![item(&q)]).await?[0];
    claim_none(env.store(), &q, &w, "the queue is still paused").await?;
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(
        (c.ready, c.running, c.paused),
        (3, 0, true),
        "the paused queue's counts",
    )?;
    ensure_eq(
        env.store()
            .queue_resume(pause.clone())
            .await
            .or_fail("queue_resume")?,
        true,
        "resuming the paused queue",
    )?;
    ensure_eq(
        env.store()
            .queue_resume(pause)
            .await
            .or_fail("queue_resume")?,
        false,
        "resuming a queue that is not paused",
    )?;
    let leases = claim(env.store(), &q, &w, 10).await?;
    let mut got: Vec<ItemId> = leases.iter().map(|l| l.token.id).collect();
    got.sort();
    let mut want = vec![held[1].token.id, ids[2], late];
    want.sort();
    ensure_eq(got, want, "what a claim takes after resume")?;
    pass()
}

async fn a_pause_racing_claims_is_told_consistently_to_every_racer<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let ids = enqueue_n(env.store(), &q, RACERS * 2).await?;
    let handles = env.handles(4).await?;
    // Racer 0 pauses; every other racer claims two items, all released at one barrier.
    // A claim that took items before the pause keeps them; any claim after it takes
    // nothing.
    let qq = q.clone();
    let told = race(&handles, RACERS, move |i, h: Arc<H::Store>| {
        let q = qq.clone();
        async move {
            if i == 0 {
                let paused = h
                    .queue_pause(PauseParams::new(q.clone()))
                    .await
                    .or_fail("queue_pause")?;
                return Ok((i, Some(paused), Vec::new()));
            }
            let w = owner(&format!("racer-{i}"))?;
            let leases = crate::fixtures::retrying("claim", || {
                h.claim(tenure_core::ClaimParams::new(
                    q.clone(),
                    w.clone(),
                    2,
                    LEASE,
                ))
            })
            .await?;
            Ok((i, None, leases))
        }
    })
    .await?;
    ensure_eq(told[0].1, Some(true), "the pausing racer's answer")?;
    let mut claimed = Vec::new();
    for (i, _, leases) in &told {
        for l in leases {
            let w = owner(&format!("racer-{i}"))?;
            let it = expect_state(env.store(), l.token.id, ItemState::Running, "its claim").await?;
            ensure_eq(
                (it.owner, it.attempt),
                (Some(w), 1),
                "a claimed item's owner and attempt (what its claimer was told)",
            )?;
            claimed.push(l.token);
        }
    }
    let mut unique: Vec<ItemId> = claimed.iter().map(|t| t.id).collect();
    unique.sort();
    unique.dedup();
    ensure_eq(
        unique.len(),
        claimed.len(),
        "no item told claimed to two racers",
    )?;
    // After the pause returned, no claim on any handle takes anything.
    for h in &handles {
        claim_none(h.as_ref(), &q, &owner("after")?, "the queue was paused").await?;
    }
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(
        (c.running, c.ready, c.paused),
        (
            claimed.len() as u64,
            (ids.len() - claimed.len()) as u64,
            true,
        ),
        "the counts after the race (running = what the racers were told)",
    )?;
    ensure_eq(
        listed(env.store(), &q, ListState::Running).await?.len(),
        claimed.len(),
        "the running listing after the race",
    )?;
    // The racers' leases run on.
    for t in claimed {
        ensure_eq(
            complete(env.store(), t).await?,
            TokenOutcome::Accepted,
            "a racer's complete while paused",
        )?;
    }
    pass()
}

/// Makes `n` items of `queue` dead, one at a time, and returns their ids.
async fn make_dead<S: Store + ?Sized>(
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

/// Both filtered calls, a requeue and a discard, must refuse `filter` as invalid
/// input naming `field` (`what` says how the filter is bad).
async fn expect_filter_refused<S: Store + ?Sized>(
    store: &S,
    filter: DeadFilter,
    field: &str,
    what: &str,
) -> Result<(), Failure> {
    expect_invalid(
        store
            .dead_requeue(RequeueParams::matching(filter.clone()))
            .await,
        field,
        &format!("a filtered requeue {what}"),
    )?;
    expect_invalid(
        store.dead_discard(DiscardParams::matching(filter)).await,
        field,
        &format!("a filtered discard {what}"),
    )
}

async fn dead_items_are_requeued_and_discarded_by_queue_and_age_in_bounded_batches<H: Harness>(
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

async fn bad_cancel_and_filter_input_is_refused_and_writes_nothing<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let dead = make_dead(env.store(), &q, 1).await?[0];
    let ready = enqueue_n(env.store(), &q, 1).await?[0];
    expect_invalid(
        env.store().item_cancel(CancelParams::new(vec![])).await,
        "ids",
        "a cancel of no items",
    )?;
    expect_invalid(
        env.store()
            .item_cancel(CancelParams::new(vec![ready, ready]))
            .await,
        "ids",
        "a cancel naming an item twice",
    )?;
    for bad in [0, tenure_core::MAX_DEAD_BATCH + 1] {
        let filter = DeadFilter::new(q.clone()).limit(bad);
        expect_filter_refused(env.store(), filter, "limit", "with a limit out of bounds").await?;
    }
    expect_state(env.store(), ready, ItemState::Ready, "refused cancels").await?;
    expect_state(env.store(), dead, ItemState::Dead, "refused filters").await?;
    pass()
}

/// Items in the cancel race; every one is both cancelled and claimed for.
const CANCEL_RACE_ITEMS: usize = 96;

/// Keeps the two sides of the cancel race in step: neither starts more than `SLACK`
/// calls beyond the other's while the other still runs, so they meet mid-way with both
/// sides active, however the runtime schedules them. A call counts from its start, so
/// one side's slow call never holds the other back.
#[derive(Debug)]
struct Pace {
    calls: [AtomicUsize; 2],
    running: [AtomicUsize; 2],
}

impl Pace {
    const SLACK: usize = 4;

    fn new(cancellers: usize, claimers: usize) -> Self {
        Pace {
            calls: [AtomicUsize::new(0), AtomicUsize::new(0)],
            running: [AtomicUsize::new(cancellers), AtomicUsize::new(claimers)],
        }
    }

    /// Waits until side `me` (0 cancel, 1 claim) may start its next call, and counts it.
    async fn turn(&self, me: usize) {
        let other = 1 - me;
        while self.calls[me].load(Ordering::SeqCst)
            > self.calls[other].load(Ordering::SeqCst) + Self::SLACK
            && self.running[other].load(Ordering::SeqCst) > 0
        {
            tokio::task::yield_now().await;
        }
        self.calls[me].fetch_add(1, Ordering::SeqCst);
    }

    fn done(&self, me: usize) {
        self.running[me].fetch_sub(1, Ordering::SeqCst);
    }
}

async fn a_cancel_racing_claims_never_leaves_an_item_both_cancelled_and_leased<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let ids = enqueue_n(env.store(), &q, CANCEL_RACE_ITEMS).await?;
    let handles = env.handles(crate::fixtures::HANDLES).await?;
    // Half the racers cancel, one item per call, each its own share of the items, from
    // the last in claim order back; the other half claim one at a time from the first
    // until a claim finds nothing. Whatever their speeds, cancels and claims meet on
    // the same items somewhere between; every racer yields after each call, so they
    // interleave there even on a store that never awaits.
    let cancellers = RACERS / 2;
    let shared = Arc::new(ids.clone());
    let pace = Arc::new(Pace::new(cancellers, RACERS - cancellers));
    let qq = q.clone();
    let told = race(&handles, RACERS, move |i, h: Arc<H::Store>| {
        let (q, ids, pace) = (qq.clone(), Arc::clone(&shared), Arc::clone(&pace));
        async move {
            let mut cancels = Vec::new();
            let mut leases = Vec::new();
            if i % 2 == 0 {
                let k = i / 2;
                for &id in ids.iter().rev().skip(k).step_by(cancellers) {
                    pace.turn(0).await;
                    let out = crate::fixtures::retrying("item_cancel", || {
                        h.item_cancel(CancelParams::new(vec![id]))
                    });
                    let out = out.await;
                    match out {
                        Ok(out) => cancels.push((id, out)),
                        Err(e) => {
                            pace.done(0);
                            return Err(e);
                        }
                    }
                    tokio::task::yield_now().await;
                }
                pace.done(0);
            } else {
                let w = owner(&format!("racer-{i}"))?;
                // Bounded, so a store that hands items out again cannot keep a
                // claimer here for ever.
                for _ in 0..CANCEL_RACE_ITEMS {
                    pace.turn(1).await;
                    let got = crate::fixtures::retrying("claim", || {
                        h.claim(tenure_core::ClaimParams::new(
                            q.clone(),
                            w.clone(),
                            1,
                            LEASE,
                        ))
                    })
                    .await;
                    let got = match got {
                        Ok(got) => got,
                        Err(e) => {
                            pace.done(1);
                            return Err(e);
                        }
                    };
                    if got.is_empty() {
                        break;
                    }
                    leases.extend(got);
                    tokio::task::yield_now().await;
                }
                pace.done(1);
            }
            Ok((i, cancels, leases))
        }
    })
    .await?;
    // What each claimer was told, by item.
    let mut leased = std::collections::HashMap::new();
    for (i, _, leases) in &told {
        for l in leases {
            let w = owner(&format!("racer-{i}"))?;
            if let Some(before) = leased.insert(l.token.id, (w, l.token)) {
                return Err(Failure::new(
                    "no item to be leased to two racers",
                    format!("{} leased to {} and to racer-{i}", l.token.id, before.0),
                ));
            }
        }
    }
    let mut cancelled = 0usize;
    let mut answered = 0usize;
    for (_, cancels, _) in &told {
        for (id, out) in cancels {
            answered += 1;
            ensure(out.len() == 1, "one answer to a cancel of one item", out)?;
            let lease = leased.get(id);
            match (&out[0], lease) {
                (CancelOutcome::Cancelled, None) => {
                    cancelled += 1;
                    expect_absent(env.store(), *id, "a cancel answered Cancelled").await?;
                }
                (CancelOutcome::Cancelled, Some((w, t))) => {
                    return Err(Failure::new(
                        format!(
                            "item {id}, leased to {w} at attempt {}, not to be told cancelled",
                            t.attempt
                        ),
                        "the cancel answered Cancelled".to_owned(),
                    ));
                }
                (CancelOutcome::Running { attempt, owner }, Some((w, t))) => {
                    ensure_eq(
                        (owner, *attempt),
                        (w, t.attempt),
                        "the owner and attempt a cancel of a claimed item names (its claimer's)",
                    )?;
                    let it = expect_state(
                        env.store(),
                        *id,
                        ItemState::Running,
                        "a claim the cancel answered Running for",
                    )
                    .await?;
                    ensure_eq(
                        (it.owner.as_ref(), it.attempt),
                        (Some(w), t.attempt),
                        "the claimed item's owner and attempt (what its claimer was told)",
                    )?;
                }
                (other, lease) => {
                    return Err(Failure::new(
                        format!(
                            "a cancel of item {id} to answer Cancelled (nobody leased it) or \
                             Running naming its claimer ({lease:?})"
                        ),
                        format!("{other:?}"),
                    ));
                }
            }
        }
    }
    ensure_eq(answered, ids.len(), "cancels answered (one per item)")?;
    ensure_eq(
        cancelled + leased.len(),
        ids.len(),
        "items cancelled plus items leased (every item ended one way, once)",
    )?;
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(
        (c.ready, c.scheduled, c.running, c.dead),
        (0, 0, leased.len() as u64, 0),
        "the counts after the race (running = what the claimers were told)",
    )?;
    // Every lease a claimer was told of is real: it completes.
    for (w, t) in leased.values() {
        ensure_eq(
            complete(env.store(), *t).await?,
            TokenOutcome::Accepted,
            &format!("{w}'s complete of a lease it won against a cancel"),
        )?;
    }
    pass()
}

async fn a_bounded_dead_filter_takes_the_earliest_dead_first<H: Harness>(
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
async fn requeue_matching<S: Store + ?Sized>(
    store: &S,
    filter: DeadFilter,
    additional: u32,
) -> Result<u64, Failure> {
    store
        .dead_requeue(RequeueParams::matching(filter).additional_attempts(additional))
        .await
        .or_fail("dead_requeue")
}

async fn a_filtered_requeue_grants_attempts_and_resets_stalls_as_a_requeue_by_id_does<
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
async fn claim_ten<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
) -> Result<Vec<tenure_core::Lease>, Failure> {
    claim(store, queue, &owner("w2")?, 10).await
}

async fn a_dead_head_discarded_or_requeued_by_filter_lets_its_stream_move_on<H: Harness>(
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

async fn a_dead_filter_takes_an_item_dead_for_exactly_older_than<H: Harness>(
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

async fn cancelling_an_item_behind_its_stream_head_leaves_the_rest_of_the_stream_in_order<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let s = stream("s")?;
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).stream(s.clone()),
            item(&q).stream(s.clone()),
            item(&q).stream(s.clone()),
            item(&q).stream(s),
        ],
    )
    .await?;
    // The second item is cancelled while the head waits, the third while the head runs.
    ensure_eq(
        cancel(env.store(), vec![ids[1]]).await?,
        vec![CancelOutcome::Cancelled],
        "cancelling the item behind a waiting head",
    )?;
    let w = owner("w1")?;
    let head = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(
        head.iter().map(|l| l.token.id).collect::<Vec<_>>(),
        vec![ids[0]],
        "what a claim takes: the stream's head alone",
    )?;
    ensure_eq(
        cancel(env.store(), vec![ids[2]]).await?,
        vec![CancelOutcome::Cancelled],
        "cancelling an item behind a running head",
    )?;
    expect_absent(env.store(), ids[1], "its cancel").await?;
    expect_absent(env.store(), ids[2], "its cancel").await?;
    ensure_eq(
        complete(env.store(), head[0].token).await?,
        TokenOutcome::Accepted,
        "the head's complete",
    )?;
    let next = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(
        next.iter().map(|l| l.token.id).collect::<Vec<_>>(),
        vec![ids[3]],
        "what a claim takes once the head finished: the last item, past both cancelled",
    )?;
    pass()
}

async fn cancel_leaves_a_kept_finished_item_alone_answering_done<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let w = owner("w1")?;
    let id = enqueue_n(env.store(), &q, 1).await?[0];
    let lease = claim_one(env.store(), &q, &w, "the claim of the item to finish").await?;
    ensure_eq(
        complete(env.store(), lease.token).await?,
        TokenOutcome::Accepted,
        "the complete",
    )?;
    let Some(before) = env.store().item_get(id).await.or_fail("item_get")? else {
        // Deleted when it finished: nothing left to cancel.
        ensure_eq(
            cancel(env.store(), vec![id]).await?,
            vec![CancelOutcome::NotFound],
            "a cancel of an item deleted when it finished",
        )?;
        return pass();
    };
    ensure_eq(
        cancel(env.store(), vec![id]).await?,
        vec![CancelOutcome::Done],
        "a cancel of a finished item kept as done",
    )?;
    ensure_eq(
        get(env.store(), id).await?,
        before,
        "the kept finished item after the cancel",
    )?;
    pass()
}

async fn a_paused_queues_expired_lease_is_recovered_and_its_failure_accepted_as_usual<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let w = owner("w1")?;
    enqueue_n(env.store(), &q, 2).await?;
    let held = claim(env.store(), &q, &w, 2).await?;
    ensure_eq(held.len(), 2, "the claim of both")?;
    ensure_eq(
        env.store()
            .queue_pause(PauseParams::new(q.clone()))
            .await
            .or_fail("queue_pause")?,
        true,
        "the pause",
    )?;
    // A failure of one held lease is taken as usual while the queue is paused.
    ensure_eq(
        crate::fixtures::fail(
            env.store(),
            crate::fixtures::retry(held[1].token, Duration::ZERO, "soft"),
        )
        .await?,
        FailOutcome::Retrying { run_at: env.now() },
        "a retryable failure of a held lease of a paused queue",
    )?;
    // The other expires and recovery takes it back as usual: a stall, ready again.
    env.advance(LEASE);
    let r = env
        .store()
        .recover_expired(RecoverParams::new(10))
        .await
        .or_fail("recover_expired")?;
    ensure_eq(
        (r.requeued, r.dead),
        (1, 0),
        "the expired leases of a paused queue recovered",
    )?;
    let it = expect_state(
        env.store(),
        held[0].token.id,
        ItemState::Ready,
        "the recovery of its expired lease in a paused queue",
    )
    .await?;
    ensure_eq(it.stalls, 1, "the recovered item's stalls")?;
    ensure_eq(
        complete(env.store(), held[0].token).await?,
        TokenOutcome::LeaseLost,
        "a late complete of the recovered lease",
    )?;
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(
        (c.ready, c.running, c.paused),
        (2, 0, true),
        "the paused queue's counts after the failure and the recovery",
    )?;
    claim_none(env.store(), &q, &w, "the queue is still paused").await?;
    env.store()
        .queue_resume(PauseParams::new(q.clone()))
        .await
        .or_fail("queue_resume")?;
    let mut got: Vec<ItemId> = claim(env.store(), &q, &w, 10)
        .await?
        .iter()
        .map(|l| l.token.id)
        .collect();
    got.sort();
    let mut want = vec![held[0].token.id, held[1].token.id];
    want.sort();
    ensure_eq(got, want, "what a claim takes after resume")?;
    pass()
}

async fn a_bounded_dead_filter_takes_items_that_died_together_in_enqueue_order<H: Harness>(
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

async fn bad_filter_ages_granted_attempts_and_cancel_batches_are_refused_naming_the_field<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let dead = make_dead(env.store(), &q, 1).await?[0];
    let ready = enqueue_n(env.store(), &q, 1).await?[0];
    let before = (
        get(env.store(), dead).await?,
        get(env.store(), ready).await?,
    );
    // Eleven years: over the ten a filter's age may be.
    let absurd = DeadFilter::new(q.clone()).older_than(Duration::from_secs(11 * 366 * 24 * 3600));
    expect_filter_refused(
        env.store(),
        absurd,
        "older_than",
        "of items dead for over ten years",
    )
    .await?;
    for bad in [0, tenure_core::MAX_ATTEMPTS_LIMIT + 1] {
        expect_invalid(
            env.store()
                .dead_requeue(
                    RequeueParams::matching(DeadFilter::new(q.clone())).additional_attempts(bad),
                )
                .await,
            "additional_attempts",
            &format!("a filtered requeue granting {bad} attempts"),
        )?;
    }
    let mut many = vec![ready];
    many.extend((0..env.store().limits().max_batch).map(|_| ItemId::new()));
    expect_invalid(
        env.store().item_cancel(CancelParams::new(many)).await,
        "ids",
        "a cancel of more ids than a batch may hold",
    )?;
    ensure_eq(
        (
            get(env.store(), dead).await?,
            get(env.store(), ready).await?,
        ),
        before,
        "the dead and the ready item after the refused calls",
    )?;
    pass()
}
