//! G9 under stream runs ([`ClaimParams::stream_runs`]): a claim may lease a stream's
//! head together with the ready items right behind it, and G9 still holds exactly: a
//! failure, release, expiry or eviction of one item of a run puts every later running
//! item of its stream back untouched, and a run's items complete only in stream order
//! (an item behind an unfinished one answers `OutOfOrder`, nothing changed).
//!
//! These cases belong to `g09_stream_fifo`. The first is mandatory (a store that does
//! not declare [`Capability::StreamRuns`] must answer heads only, which is a run of one;
//! one that does must serve runs); the rest need the capability.

use std::time::Duration;

use tenure_core::{
    ClaimParams, CompleteParams, EvictParams, FailOutcome, HeartbeatParams, Item, ItemId,
    ItemState, Lease, LeaseToken, OwnerId, QueueName, Store, TokenOutcome,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_invalid, get, pass, OrFail};
use crate::fixtures::{
    check_leases, claim_one, complete, enqueue, fail, item, owner, queue, release, retry, scope,
    stream, tokens, LEASE,
};
use crate::harness::Harness;

/// A claim of up to `limit` items of `queue` for `who`, with runs of up to `run`.
async fn rclaim<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
    who: &OwnerId,
    limit: u32,
    run: u32,
) -> Result<Vec<Lease>, Failure> {
    let leases = store
        .claim(ClaimParams::new(queue.clone(), who.clone(), limit, LEASE).stream_runs(run))
        .await
        .or_fail("claim (stream runs)")?;
    check_leases(&leases, who, limit)?;
    Ok(leases)
}

fn ids_of(leases: &[Lease]) -> Vec<ItemId> {
    leases.iter().map(|l| l.token.id).collect()
}

/// `n` items of one stream `s1` in queue `g09-runs`: the queue and their ids.
async fn one_stream<H: Harness>(
    env: &Env<'_, H>,
    n: usize,
) -> Result<(QueueName, Vec<ItemId>), Failure> {
    let q = queue("g09-runs")?;
    let s = stream("s1")?;
    let ids = enqueue(
        env.store(),
        (0..n).map(|_| item(&q).stream(s.clone())).collect(),
    )
    .await?;
    Ok((q, ids))
}

/// The item must be back to `ready` untouched by a put-back: the attempt of its claim
/// kept, one more attempt allowed than `before` (as claimed), no stall, no owner.
async fn expect_put_back<S: Store + ?Sized>(
    store: &S,
    before: &Item,
    when: &str,
) -> Result<(), Failure> {
    let now = get(store, before.id).await?;
    let untouched = now.state == ItemState::Ready
        && now.attempt == before.attempt
        && now.max_attempts == before.max_attempts + 1
        && now.stalls == before.stalls
        && now.owner.is_none()
        && now.lease_expires_at.is_none()
        && now.run_at == before.run_at;
    ensure(
        untouched,
        format!(
            "item {} {when} to be ready untouched: attempt {}, max_attempts {}, stalls {}, \
             no owner",
            before.id,
            before.attempt,
            before.max_attempts + 1,
            before.stalls
        ),
        now,
    )
}

/// Every token must answer lease lost to a complete, and nothing may change.
async fn expect_lost<S: Store + ?Sized>(
    store: &S,
    leases: &[Lease],
    why: &str,
) -> Result<(), Failure> {
    for l in leases {
        let before = get(store, l.token.id).await?;
        ensure_eq(
            complete(store, l.token).await?,
            TokenOutcome::LeaseLost,
            &format!("a complete of {:?} {why}", l.token),
        )?;
        crate::check::expect_unchanged(store, &before, "a lost complete").await?;
    }
    Ok(())
}

pub(super) async fn stream_runs_are_served_only_by_stores_that_declare_them<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let declared = env.store().capabilities().stream_runs;
    let (q, ids3) = one_stream(&env, 3).await?;
    let got = rclaim(env.store(), &q, &owner("w1")?, 10, 3).await?;
    let want = if declared { ids3 } else { ids3[..1].to_vec() };
    ensure_eq(
        ids_of(&got),
        want,
        if declared {
            "a claim with runs of 3 on a store declaring stream_runs (the whole stream)"
        } else {
            "a claim with runs of 3 on a store not declaring stream_runs (the head only)"
        },
    )?;
    pass()
}

pub(super) async fn a_run_leases_the_head_and_the_ready_items_behind_it_in_order<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g09-runs")?;
    let (s1, s2) = (stream("s1")?, stream("s2")?);
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).stream(s1.clone()),
            item(&q).stream(s2.clone()),
            item(&q).stream(s1.clone()),
            item(&q),
            item(&q).stream(s1.clone()),
            item(&q).stream(s1.clone()),
            item(&q).stream(s2),
        ],
    )
    .await?;
    let w = owner("w1")?;
    let first = rclaim(env.store(), &q, &w, 10, 3).await?;
    // Claim order picks the heads; each head brings its run right behind it.
    ensure_eq(
        ids_of(&first),
        vec![ids[0], ids[2], ids[4], ids[1], ids[6], ids[3]],
        "a claim of 10 with runs of 3: s1's run of three, s2's run of two, the unstreamed \
         item, each run adjacent and in stream order",
    )?;
    ensure(
        first.iter().all(|l| l.token.attempt == 1),
        "every lease of a run to carry its own token at attempt 1",
        tokens(&first),
    )?;
    let behind = rclaim(env.store(), &q, &w, 10, 3).await?;
    ensure(
        behind.is_empty(),
        "a claim while both runs are running to find nothing (s1's fourth item waits)",
        tokens(&behind),
    )?;
    for l in &first {
        ensure_eq(
            complete(env.store(), l.token).await?,
            TokenOutcome::Accepted,
            "a complete of a run's item, in stream order",
        )?;
    }
    let rest = rclaim(env.store(), &q, &w, 10, 3).await?;
    ensure_eq(
        ids_of(&rest),
        vec![ids[5]],
        "the claim after both runs finished (s1's fourth item)",
    )?;
    pass()
}

pub(super) async fn a_run_stops_at_an_item_that_is_not_due_or_not_in_the_claimed_queues<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g09-runs")?;
    let other = queue("g09-runs-other")?;
    let s = stream("s1")?;
    let delay = Duration::from_secs(60);
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).stream(s.clone()),
            item(&q).stream(s.clone()).delay(delay),
            item(&q).stream(s.clone()),
            item(&other).stream(s.clone()),
            item(&q).stream(s.clone()),
        ],
    )
    .await?;
    let w = owner("w1")?;
    let got = rclaim(env.store(), &q, &w, 10, 5).await?;
    ensure_eq(
        ids_of(&got),
        vec![ids[0]],
        "a claim with runs of 5 whose second item is scheduled in 60 s (the head alone)",
    )?;
    complete(env.store(), got[0].token).await?;
    env.advance(delay);
    let got = rclaim(env.store(), &q, &w, 10, 5).await?;
    ensure_eq(
        ids_of(&got),
        vec![ids[1], ids[2]],
        "a claim of queue g09-runs once the item is due: the run stops at the stream's \
         item in another queue",
    )?;
    pass()
}

pub(super) async fn a_run_stops_at_an_item_whose_scope_is_busy<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g09-runs")?;
    let s = stream("s1")?;
    let sc = scope("tenant")?;
    // The scope's first item runs before the stream is claimed.
    let busy = enqueue(env.store(), vec![item(&q).scope(sc.clone())]).await?;
    let w = owner("w1")?;
    let holder = claim_one(env.store(), &q, &w, "the claim of the scope's item").await?;
    ensure_eq(holder.token.id, busy[0], "the scoped item")?;
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).stream(s.clone()),
            item(&q).stream(s.clone()).scope(sc.clone()),
            item(&q).stream(s.clone()),
        ],
    )
    .await?;
    let got = rclaim(env.store(), &q, &w, 10, 3).await?;
    ensure_eq(
        ids_of(&got),
        vec![ids[0]],
        "a claim with runs of 3 whose second item's scope is running (the head alone, G10)",
    )?;
    pass()
}

pub(super) async fn a_run_counts_towards_the_claim_limit<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, ids5) = one_stream(&env, 5).await?;
    let w = owner("w1")?;
    let got = rclaim(env.store(), &q, &w, 2, 5).await?;
    ensure_eq(
        ids_of(&got),
        ids5[..2].to_vec(),
        "a claim with limit 2 and runs of 5 (two leases)",
    )?;
    pass()
}

pub(super) async fn completing_an_item_of_a_run_before_the_items_ahead_of_it_is_refused_and_changes_nothing<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, ids) = one_stream(&env, 4).await?;
    let w = owner("w1")?;
    let run = rclaim(env.store(), &q, &w, 10, 3).await?;
    ensure_eq(
        ids_of(&run),
        ids[..3].to_vec(),
        "a claim with runs of 3 from a stream of four",
    )?;
    for l in [&run[2], &run[1]] {
        let before = get(env.store(), l.token.id).await?;
        ensure_eq(
            complete(env.store(), l.token).await?,
            TokenOutcome::OutOfOrder,
            "a complete of an item behind the run's head while the head runs",
        )?;
        crate::check::expect_unchanged(env.store(), &before, "an out-of-order complete").await?;
    }
    let none = rclaim(env.store(), &q, &w, 10, 3).await?;
    ensure(
        none.is_empty(),
        "a claim while the run's head still runs to find nothing (G9)",
        tokens(&none),
    )?;
    ensure_eq(
        complete(env.store(), run[0].token).await?,
        TokenOutcome::Accepted,
        "the complete of the run's head",
    )?;
    ensure_eq(
        complete(env.store(), run[2].token).await?,
        TokenOutcome::OutOfOrder,
        "a complete of the run's third item while its second runs",
    )?;
    for (l, what) in [
        (
            &run[1],
            "the complete of the run's second item, next in order",
        ),
        (&run[2], "the complete of the run's third item, last"),
    ] {
        ensure_eq(
            complete(env.store(), l.token).await?,
            TokenOutcome::Accepted,
            what,
        )?;
    }
    let rest = rclaim(env.store(), &q, &w, 10, 3).await?;
    ensure_eq(
        ids_of(&rest),
        vec![ids[3]],
        "the claim once the run completed in order (the stream's fourth item, alone)",
    )?;
    pass()
}

pub(super) async fn one_call_completes_a_run_in_stream_order_and_refuses_it_in_reverse<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, ids) = one_stream(&env, 4).await?;
    let w = owner("w1")?;
    let run = rclaim(env.store(), &q, &w, 10, 3).await?;
    ensure_eq(ids_of(&run), ids[..3].to_vec(), "a claim with runs of 3")?;
    let reversed: Vec<LeaseToken> = run.iter().map(|l| l.token).rev().collect();
    let answers = env
        .store()
        .complete(CompleteParams::new(reversed))
        .await
        .or_fail("complete (a run in reverse)")?;
    ensure_eq(
        answers,
        vec![
            TokenOutcome::OutOfOrder,
            TokenOutcome::OutOfOrder,
            TokenOutcome::Accepted,
        ],
        "one complete of a run's three tokens in reverse: each token sees only those \
         before it, so only the head completes",
    )?;
    let answers = env
        .store()
        .complete(CompleteParams::new(
            run[1..].iter().map(|l| l.token).collect(),
        ))
        .await
        .or_fail("complete (the rest of the run in order)")?;
    ensure_eq(
        answers,
        vec![TokenOutcome::Accepted, TokenOutcome::Accepted],
        "one complete of the run's second and third tokens, in stream order",
    )?;
    let rest = rclaim(env.store(), &q, &w, 10, 3).await?;
    ensure_eq(
        ids_of(&rest),
        vec![ids[3]],
        "the claim once the run completed (the stream's fourth item)",
    )?;
    pass()
}

/// Claims the whole stream of four as one run, completes the head and returns the
/// other three leases, each item as it was just after the claim.
async fn run_of_four<H: Harness>(
    env: &Env<'_, H>,
    who: &OwnerId,
) -> Result<(QueueName, Vec<ItemId>, Vec<Lease>), Failure> {
    let (q, ids) = one_stream(env, 4).await?;
    let run = rclaim(env.store(), &q, who, 10, 4).await?;
    ensure_eq(
        ids_of(&run),
        ids.clone(),
        "a claim with runs of 4 (the stream)",
    )?;
    ensure_eq(
        complete(env.store(), run[0].token).await?,
        TokenOutcome::Accepted,
        "the complete of the run's head",
    )?;
    Ok((q, ids, run[1..].to_vec()))
}

pub(super) async fn a_failed_item_of_a_run_puts_every_later_item_back_untouched<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let w = owner("w1")?;
    let (q, ids, rest) = run_of_four(&env, &w).await?;
    let delay = Duration::from_secs(60);
    ensure_eq(
        fail(env.store(), retry(rest[0].token, delay, "later")).await?,
        FailOutcome::Retrying {
            run_at: env.now() + delay,
        },
        "the retry of the run's second item",
    )?;
    for l in &rest[1..] {
        expect_put_back(env.store(), &l.item, "behind a failed item of its run").await?;
    }
    expect_lost(
        env.store(),
        &rest[1..],
        "after an earlier item of its run failed",
    )
    .await?;
    let none = rclaim(env.store(), &q, &w, 10, 4).await?;
    ensure(
        none.is_empty(),
        "a claim while the failed item waits for its retry to find nothing (G9)",
        tokens(&none),
    )?;
    env.advance(delay);
    let again = rclaim(env.store(), &q, &w, 10, 4).await?;
    ensure_eq(
        tokens(&again),
        vec![(ids[1], 2), (ids[2], 2), (ids[3], 2)],
        "the claim once the retry is due: the retried item first, then the rest",
    )?;
    pass()
}

pub(super) async fn a_released_item_of_a_run_puts_every_later_item_back_untouched<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let w = owner("w1")?;
    let (q, ids, rest) = run_of_four(&env, &w).await?;
    ensure_eq(
        release(env.store(), rest[0].token).await?,
        TokenOutcome::Accepted,
        "the release of the run's second item",
    )?;
    for l in &rest[1..] {
        expect_put_back(env.store(), &l.item, "behind a released item of its run").await?;
    }
    expect_lost(
        env.store(),
        &rest[1..],
        "after an earlier item of its run was released",
    )
    .await?;
    let again = rclaim(env.store(), &q, &owner("w2")?, 10, 1).await?;
    ensure_eq(
        tokens(&again),
        vec![(ids[1], 2)],
        "a claim without runs after the release (the released item alone, G9)",
    )?;
    pass()
}

pub(super) async fn an_expired_run_is_recovered_from_its_head_without_stalls_behind_it<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, ids) = one_stream(&env, 3).await?;
    let run = rclaim(env.store(), &q, &owner("w1")?, 10, 3).await?;
    ensure_eq(ids_of(&run), ids.clone(), "a claim with runs of 3")?;
    env.advance(LEASE);
    let recovered = env
        .store()
        .recover_expired(tenure_core::RecoverParams::default())
        .await
        .or_fail("recover_expired")?;
    ensure_eq(
        (recovered.requeued, recovered.dead),
        (1, 0),
        "recovery of an expired run of three (its head; the rest are put back, not recovered)",
    )?;
    let head = get(env.store(), ids[0]).await?;
    ensure(
        head.state == ItemState::Ready && head.stalls == 1,
        "the run's head to be ready with one stall",
        &head,
    )?;
    for l in &run[1..] {
        expect_put_back(env.store(), &l.item, "behind an expired head").await?;
    }
    let again = rclaim(env.store(), &q, &owner("w2")?, 10, 3).await?;
    ensure_eq(
        tokens(&again),
        ids.iter().map(|id| (*id, 2)).collect::<Vec<_>>(),
        "the claim after recovery: the whole run again, in order, at attempt 2",
    )?;
    pass()
}

pub(super) async fn evicting_the_owner_of_a_run_puts_the_items_behind_its_head_back_untouched<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let who = owner("instance-a")?;
    env.store()
        .instance_heartbeat(HeartbeatParams::new(who.clone()))
        .await
        .or_fail("instance_heartbeat")?;
    let (q, ids) = one_stream(&env, 3).await?;
    let run = rclaim(env.store(), &q, &who, 10, 3).await?;
    ensure_eq(ids_of(&run), ids.clone(), "a claim with runs of 3")?;
    env.advance(Duration::from_secs(31));
    let evicted = env
        .store()
        .instance_evict_stale(EvictParams::new(Duration::from_secs(30)))
        .await
        .or_fail("instance_evict_stale")?;
    ensure_eq(
        (evicted.instances, evicted.released),
        (vec![who.clone()], 1),
        "the eviction of the run's owner (its head released; the rest put back)",
    )?;
    let head = get(env.store(), ids[0]).await?;
    ensure(
        head.state == ItemState::Ready && head.stalls == 1,
        "the run's head to be ready with one stall",
        &head,
    )?;
    for l in &run[1..] {
        expect_put_back(env.store(), &l.item, "behind an evicted head").await?;
    }
    expect_lost(env.store(), &run, "after its owner was evicted").await?;
    pass()
}

pub(super) async fn a_stream_run_of_zero_is_refused_naming_the_field<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, ids) = one_stream(&env, 2).await?;
    let before = get(env.store(), ids[0]).await?;
    let answer = env
        .store()
        .claim(ClaimParams::new(q.clone(), owner("w1")?, 10, LEASE).stream_runs(0))
        .await;
    expect_invalid(answer, "stream_run", "a claim with runs of 0")?;
    crate::check::expect_unchanged(env.store(), &before, "a refused claim").await?;
    pass()
}
