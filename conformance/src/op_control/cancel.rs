//! Cancel: ready and scheduled items are deleted, running, dead, finished and unknown
//! ones are left alone and the answer says which, and a cancel racing claims never
//! leaves an item both cancelled and leased.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tenure_core::{
    CancelOutcome, CancelParams, EnqueueParams, ErrorKind, ItemId, ItemState, Store, StoreExt,
    TokenOutcome,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_absent, expect_state, get, pass, OrFail};
use crate::fixtures::{
    claim, claim_one, complete, dedup, enqueue, enqueue_n, item, kill_next, owner, queue, race,
    scope, stream, LEASE, RACERS,
};
use crate::harness::Harness;

pub(super) async fn cancel<S: Store + ?Sized>(
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

pub(super) async fn cancel_deletes_ready_and_scheduled_items_and_keeps_their_dedup_keys<
    H: Harness,
>(
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

pub(super) async fn cancel_leaves_running_dead_and_unknown_items_alone_and_says_which<
    H: Harness,
>(
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

pub(super) async fn a_cancelled_head_no_longer_holds_up_its_stream_or_scope<H: Harness>(
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

pub(super) async fn a_cancel_racing_claims_never_leaves_an_item_both_cancelled_and_leased<
    H: Harness,
>(
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

pub(super) async fn cancelling_an_item_behind_its_stream_head_leaves_the_rest_of_the_stream_in_order<
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

pub(super) async fn cancel_leaves_a_kept_finished_item_alone_answering_done<H: Harness>(
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
