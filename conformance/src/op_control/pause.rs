//! Pause: a paused queue is not claimed while its held leases run on, every racer of a
//! pause is told one story, and recovery goes on in a paused queue.

use std::sync::Arc;
use std::time::Duration;

use tenure_core::{
    FailOutcome, ItemId, ItemState, ListState, PauseParams, RecoverParams, RenewOutcome, Store,
    TokenOutcome,
};

use crate::case::{CaseResult, Env};
use crate::check::{ensure, ensure_eq, expect_state, pass, OrFail};
use crate::fixtures::{
    claim, claim_none, complete, enqueue, enqueue_n, item, listed, owner, queue, race, release,
    renew, LEASE, RACERS,
};
use crate::harness::Harness;

pub(super) async fn a_paused_queue_is_not_claimed_while_held_leases_run_on<H: Harness>(
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

pub(super) async fn a_pause_racing_claims_is_told_consistently_to_every_racer<H: Harness>(
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

pub(super) async fn a_paused_queues_expired_lease_is_recovered_and_its_failure_accepted_as_usual<
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
