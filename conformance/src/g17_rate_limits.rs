//! G17 Rate limits: at most R claims per period P per limit key and per queue, exact
//! in every window of length P, probed at the window's edges on the manual clock;
//! items held back use no attempt and hold up no other key; a handler can push its
//! key's next start back. Optional: runs on stores that declare
//! [`Capabilities::limits`](tenure_core::Capabilities::limits).

use std::time::Duration;

use tenure_core::{DeferParams, ItemId, Lease, QueueLimits, Rate, Store, TokenOutcome};

use crate::case::{register, Capability, Case, CaseResult, Env};
use crate::check::{ensure_eq, get, pass, OrFail};
use crate::fixtures::{claim, complete, enqueue, item, limit_key, owner, queue, set_limits, TICK};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g17_rate_limits";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP, Capability::Limits;
        a_key_rate_holds_in_every_window_probed_at_its_edges,
        a_key_at_its_rate_holds_up_no_other_key_and_its_items_use_no_attempt,
        a_queue_rate_caps_starts_across_keys,
        a_deferred_key_starts_nothing_until_its_time_and_holds_up_no_other_key,
    ]
}

const PERIOD: Duration = Duration::from_secs(10);

fn ids(leases: &[Lease]) -> Vec<ItemId> {
    leases.iter().map(|l| l.token.id).collect()
}

/// Claims up to `most` and completes what it got at once (a start counts for its whole
/// period whatever becomes of its lease); answers how many it got.
async fn starts<S: tenure_core::Store + ?Sized>(
    store: &S,
    q: &tenure_core::QueueName,
    most: u32,
) -> Result<usize, crate::Failure> {
    let leases = claim(store, q, &owner("w1")?, most).await?;
    for l in &leases {
        ensure_eq(
            complete(store, l.token).await?,
            TokenOutcome::Accepted,
            "a complete",
        )?;
    }
    Ok(leases.len())
}

async fn a_key_rate_holds_in_every_window_probed_at_its_edges<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g17-window")?;
    let k = limit_key("mail")?;
    set_limits(
        env.store(),
        &q,
        QueueLimits::new().key_rate(Rate::new(3, PERIOD)),
    )
    .await?;
    enqueue(
        env.store(),
        (0..20).map(|_| item(&q).limit_key(k.clone())).collect(),
    )
    .await?;
    // Three starts at t = 0, then the window's far edge, one tick before and at P.
    ensure_eq(starts(env.store(), &q, 10).await?, 3, "starts at t = 0")?;
    env.advance(PERIOD - TICK);
    ensure_eq(
        starts(env.store(), &q, 10).await?,
        0,
        "starts one tick before t = P",
    )?;
    env.advance(TICK);
    // A window that is not aligned to the first: one start at P, two at P + 6 s; at
    // 2P only the start at P has left the window, so one more start, not three (a
    // counter reset every P would allow three).
    ensure_eq(starts(env.store(), &q, 1).await?, 1, "starts at t = P")?;
    env.advance(Duration::from_secs(6));
    ensure_eq(
        starts(env.store(), &q, 10).await?,
        2,
        "starts at t = P + 6 s (the rest of the rate)",
    )?;
    env.advance(PERIOD - Duration::from_secs(6) - TICK);
    ensure_eq(
        starts(env.store(), &q, 10).await?,
        0,
        "starts one tick before t = 2P",
    )?;
    env.advance(TICK);
    ensure_eq(
        starts(env.store(), &q, 10).await?,
        1,
        "starts at t = 2P (the start at P left the window, the two at P + 6 s did not)",
    )?;
    env.advance(Duration::from_secs(6) - TICK);
    ensure_eq(
        starts(env.store(), &q, 10).await?,
        0,
        "starts one tick before t = 2P + 6 s",
    )?;
    env.advance(TICK);
    ensure_eq(
        starts(env.store(), &q, 10).await?,
        2,
        "starts at t = 2P + 6 s",
    )?;
    pass()
}

async fn a_key_at_its_rate_holds_up_no_other_key_and_its_items_use_no_attempt<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g17-others")?;
    let (hot, cold) = (limit_key("hot")?, limit_key("cold")?);
    set_limits(
        env.store(),
        &q,
        QueueLimits::new().key_rate(Rate::new(1, PERIOD)),
    )
    .await?;
    let hot_ids = enqueue(
        env.store(),
        (0..3).map(|_| item(&q).limit_key(hot.clone())).collect(),
    )
    .await?;
    let cold_ids = enqueue(
        env.store(),
        vec![item(&q).limit_key(cold.clone()), item(&q)],
    )
    .await?;
    let w = owner("w1")?;
    let first = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(
        ids(&first),
        vec![hot_ids[0], cold_ids[0], cold_ids[1]],
        "a claim of 10 under a rate of 1 per key (one per key, and the unkeyed item)",
    )?;
    for _ in 0..3 {
        ensure_eq(
            claim(env.store(), &q, &w, 10).await?.len(),
            0,
            "items claimed while every key is at its rate",
        )?;
    }
    let held = get(env.store(), hot_ids[1]).await?;
    ensure_eq(
        (held.state, held.attempt),
        (tenure_core::ItemState::Ready, 0),
        "an item held back by its key's rate (ready, no attempt used)",
    )?;
    env.advance(PERIOD);
    let next = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(
        ids(&next),
        vec![hot_ids[1]],
        "a claim of 10 once the key's period passed",
    )?;
    ensure_eq(next[0].item.attempt, 1, "its attempt (the first)")?;
    pass()
}

async fn a_queue_rate_caps_starts_across_keys<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g17-queue")?;
    set_limits(
        env.store(),
        &q,
        QueueLimits::new().rate(Rate::new(2, PERIOD)),
    )
    .await?;
    enqueue(
        env.store(),
        vec![
            item(&q).limit_key(limit_key("a")?),
            item(&q).limit_key(limit_key("b")?),
            item(&q),
            item(&q),
            item(&q),
        ],
    )
    .await?;
    ensure_eq(starts(env.store(), &q, 10).await?, 2, "starts at t = 0")?;
    env.advance(PERIOD - TICK);
    ensure_eq(
        starts(env.store(), &q, 10).await?,
        0,
        "starts one tick before the period ends",
    )?;
    env.advance(TICK);
    ensure_eq(starts(env.store(), &q, 10).await?, 2, "starts at t = P")?;
    pass()
}

async fn a_deferred_key_starts_nothing_until_its_time_and_holds_up_no_other_key<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g17-defer")?;
    let (k, j) = (limit_key("k")?, limit_key("j")?);
    let k_ids = enqueue(env.store(), vec![item(&q).limit_key(k.clone())]).await?;
    let j_ids = enqueue(env.store(), vec![item(&q).limit_key(j)]).await?;
    let wait = Duration::from_secs(30);
    env.store()
        .limits_defer(DeferParams::new(q.clone(), Some(k.clone()), wait))
        .await
        .or_fail("limits_defer")?;
    // A shorter deferral later does not shorten it.
    env.store()
        .limits_defer(DeferParams::new(q.clone(), Some(k), Duration::from_secs(1)))
        .await
        .or_fail("limits_defer")?;
    let w = owner("w1")?;
    let first = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(ids(&first), j_ids, "a claim while key k is deferred")?;
    ensure_eq(
        complete(env.store(), first[0].token).await?,
        TokenOutcome::Accepted,
        "a complete",
    )?;
    env.advance(wait - TICK);
    ensure_eq(
        claim(env.store(), &q, &w, 10).await?.len(),
        0,
        "items claimed one tick before the deferral ends",
    )?;
    env.advance(TICK);
    let next = claim(env.store(), &q, &w, 10).await?;
    ensure_eq(ids(&next), k_ids, "a claim once the deferral ended")?;
    pass()
}
