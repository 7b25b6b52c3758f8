//! G15 Bad input, the bounds of time and of a claim's queue list: a `run_at` further
//! than [`Limits::schedule_window`] from the store's `now` (either side) is refused
//! naming `run_at`, a delay longer than the window naming `delay`, and a claim naming
//! more than [`Limits::max_claim_queues`] queues naming `queues`; nothing is written.
//! At the bounds themselves everything is served.
//!
//! [`Limits::schedule_window`]: tenure_core::Limits::schedule_window
//! [`Limits::max_claim_queues`]: tenure_core::Limits::max_claim_queues

use std::time::Duration;

use tenure_core::{ClaimParams, EnqueueParams, NewItem, QueueName, Store};

use crate::case::{CaseResult, Env};
use crate::check::{
    ensure_eq, expect_absent, expect_counts, expect_invalid, expect_unchanged, get, pass,
};
use crate::fixtures::{counts, enqueue, enqueue_one, item, owner, queue, LEASE};
use crate::harness::Harness;

/// Enqueues `[a fine item, bad]`, which must be refused naming `field` with neither
/// item written.
async fn refused<H: Harness>(
    env: &Env<'_, H>,
    q: &QueueName,
    bad: NewItem,
    field: &str,
    what: &str,
) -> Result<(), crate::Failure> {
    let fine = item(q);
    let ids = [fine.id, bad.id];
    let r = env
        .store()
        .enqueue(EnqueueParams::new(vec![fine, bad]))
        .await;
    expect_invalid(r, field, &format!("enqueue of [a ready item, {what}]"))?;
    for id in ids {
        expect_absent(env.store(), id, &format!("a refused enqueue of {what}")).await?;
    }
    Ok(())
}

pub(super) async fn a_run_at_beyond_the_schedule_window_names_run_at_and_writes_nothing<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g15-window")?;
    let window = env.store().limits().schedule_window;
    // The window counts from the store's clock, not from the machine's: move it on.
    env.advance(Duration::from_secs(3600));
    let now = env.now();
    let second = Duration::from_secs(1);
    refused(
        &env,
        &q,
        item(&q).run_at(now + window + second),
        "run_at",
        "an item due one second past the window",
    )
    .await?;
    refused(
        &env,
        &q,
        item(&q).run_at(now - window - second),
        "run_at",
        "an item due one second before the window",
    )
    .await?;
    expect_counts(env.store(), &q, counts(0, 0, 0, 0, 0), "after refusals").await?;
    let ids = enqueue(
        env.store(),
        vec![item(&q).run_at(now + window), item(&q).run_at(now - window)],
    )
    .await?;
    ensure_eq(
        get(env.store(), ids[0]).await?.run_at,
        now + window,
        "run_at of an item due at the window's end",
    )?;
    expect_counts(
        env.store(),
        &q,
        counts(1, 1, 0, 0, 0),
        "after enqueueing at both ends of the window",
    )
    .await?;
    pass()
}

pub(super) async fn a_delay_beyond_the_schedule_window_names_delay_and_writes_nothing<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g15-window")?;
    let window = env.store().limits().schedule_window;
    for delay in [window + Duration::from_secs(1), Duration::MAX] {
        refused(
            &env,
            &q,
            item(&q).delay(delay),
            "delay",
            &format!("an item delayed {delay:?}"),
        )
        .await?;
    }
    expect_counts(env.store(), &q, counts(0, 0, 0, 0, 0), "after refusals").await?;
    let id = enqueue_one(env.store(), item(&q).delay(window)).await?;
    ensure_eq(
        get(env.store(), id).await?.run_at,
        env.now() + window,
        "run_at of an item delayed by the whole window",
    )?;
    pass()
}

pub(super) async fn a_claim_naming_more_queues_than_the_limit_names_queues_and_changes_nothing<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g15-queues")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let before = get(env.store(), id).await?;
    let max = env.store().limits().max_claim_queues;
    // The item's queue last, so a store that reads only the first `max` names would
    // miss it, and one that refuses nothing would claim it.
    let list = |n: usize| -> Result<Vec<QueueName>, crate::Failure> {
        let mut names = (1..n)
            .map(|i| queue(&format!("g15-other-{i}")))
            .collect::<Result<Vec<_>, _>>()?;
        names.push(q.clone());
        Ok(names)
    };
    let w = owner("w1")?;
    let over = ClaimParams::new(q.clone(), w.clone(), 1, LEASE).queues(list(max + 1)?);
    expect_invalid(
        env.store().claim(over).await,
        "queues",
        &format!("claim naming {} queues", max + 1),
    )?;
    expect_unchanged(env.store(), &before, "a refused claim").await?;
    let at_max = ClaimParams::new(q.clone(), w, 1, LEASE).queues(list(max)?);
    let leases = env.store().claim(at_max).await;
    let got: Vec<_> = leases
        .as_ref()
        .map(|ls| ls.iter().map(|l| l.token.id).collect())
        .unwrap_or_default();
    ensure_eq(
        got,
        vec![id],
        &format!("a claim naming {max} queues, the item's last (answer {leases:?})"),
    )?;
    pass()
}
