//! Queue counts and the queue list: the oldest due item's wait, the pause flag, kept
//! finished items, and every queue with items or a pause.

use std::time::Duration;

use tenure_core::{PauseParams, QueueName, Store};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure_eq, get, pass, OrFail};
use crate::fixtures::{
    claim_for, claim_one, enqueue, enqueue_n, fail, item, kill_next, owner, queue, retry, LEASE,
    TICK,
};
use crate::harness::Harness;

pub(super) async fn queue_counts_report_the_oldest_due_wait_and_the_pause<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(
        (c.oldest_ready_age, c.paused),
        (None, false),
        "an empty queue's oldest age and pause flag",
    )?;
    let first = enqueue(env.store(), vec![item(&q)]).await?[0];
    env.advance(Duration::from_secs(5));
    enqueue(
        env.store(),
        vec![item(&q), item(&q).delay(Duration::from_secs(100))],
    )
    .await?;
    env.advance(Duration::from_secs(2));
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(
        c.oldest_ready_age,
        Some(Duration::from_secs(7)),
        "the oldest due item's wait (enqueued 7 s ago)",
    )?;
    // Claiming the oldest leaves the one enqueued 2 s ago as the oldest.
    let w = owner("w1")?;
    let lease = claim_one(env.store(), &q, &w, "the claim of the oldest").await?;
    ensure_eq(lease.token.id, first, "the claimed item (the oldest)")?;
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(
        c.oldest_ready_age,
        Some(Duration::from_secs(2)),
        "the oldest due item's wait once the oldest was claimed",
    )?;
    env.store()
        .queue_pause(PauseParams::new(q.clone()))
        .await
        .or_fail("queue_pause")?;
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(
        (c.ready, c.scheduled, c.running, c.paused),
        (1, 1, 1, true),
        "the counts of the paused queue",
    )?;
    env.store()
        .queue_resume(PauseParams::new(q.clone()))
        .await
        .or_fail("queue_resume")?;
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(c.paused, false, "the pause flag after resume")?;
    pass()
}

pub(super) async fn queue_list_names_every_queue_with_items_and_every_paused_queue<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    ensure_eq(
        env.store().queue_list().await.or_fail("queue_list")?,
        vec![],
        "the queues of a fresh store",
    )?;
    let (b, a, idle) = (queue("list-b")?, queue("list-a")?, queue("list-idle")?);
    enqueue_n(env.store(), &b, 1).await?;
    enqueue_n(env.store(), &a, 2).await?;
    let w = owner("w1")?;
    // A queue whose only item is dead is still known.
    kill_next(env.store(), &b, &w).await?;
    env.store()
        .queue_pause(PauseParams::new(idle.clone()))
        .await
        .or_fail("queue_pause")?;
    ensure_eq(
        env.store().queue_list().await.or_fail("queue_list")?,
        vec![a, b, idle],
        "the known queues, by name",
    )?;
    pass()
}

pub(super) async fn the_oldest_due_wait_of_a_delayed_or_retried_item_counts_from_its_run_at<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let (delayed, retried) = (queue("inspect-delayed")?, queue("inspect-retried")?);
    let age = |q: QueueName| oldest_age(env.store(), q);
    // A delayed item: enqueued now, due in 100 s.
    enqueue(
        env.store(),
        vec![item(&delayed).delay(Duration::from_secs(100))],
    )
    .await?;
    // A retried item: enqueued now, failed 10 s later with a retry 30 s after that.
    let id = enqueue(env.store(), vec![item(&retried)]).await?[0];
    env.advance(Duration::from_secs(10));
    let w = owner("w1")?;
    let lease = claim_one(env.store(), &retried, &w, "the claim of the item to retry").await?;
    fail(
        env.store(),
        retry(lease.token, Duration::from_secs(30), "try later"),
    )
    .await?;
    let run_at = get(env.store(), id).await?.run_at;
    ensure_eq(
        run_at,
        env.now() + Duration::from_secs(30),
        "the retried item's run_at",
    )?;
    env.advance(Duration::from_secs(30) - TICK);
    ensure_eq(
        (age(delayed.clone()).await?, age(retried.clone()).await?),
        (None, None),
        "the oldest due waits one tick before the retry is due (nothing due)",
    )?;
    env.advance(TICK);
    ensure_eq(
        age(retried.clone()).await?,
        Some(Duration::ZERO),
        "the oldest due wait of a retry at the instant it is due (run_at = now)",
    )?;
    env.advance(Duration::from_secs(4));
    ensure_eq(
        age(retried.clone()).await?,
        Some(Duration::from_secs(4)),
        "the oldest due wait of a retry due 4 s ago (enqueued 44 s ago, failed 34 s ago)",
    )?;
    env.advance(Duration::from_secs(56));
    ensure_eq(
        age(delayed.clone()).await?,
        Some(Duration::ZERO),
        "the oldest due wait of a delayed item at the instant it is due",
    )?;
    env.advance(Duration::from_secs(3));
    ensure_eq(
        age(delayed.clone()).await?,
        Some(Duration::from_secs(3)),
        "the oldest due wait of an item delayed 100 s, 103 s after its enqueue",
    )?;
    // The earliest run_at decides, not the earliest enqueue: an item delayed 100 s,
    // then one enqueued 50 s later to run at once; 60 s on, the second has waited 60 s.
    let mixed = queue("inspect-mixed")?;
    enqueue(
        env.store(),
        vec![item(&mixed).delay(Duration::from_secs(100))],
    )
    .await?;
    env.advance(Duration::from_secs(50));
    enqueue(env.store(), vec![item(&mixed)]).await?;
    env.advance(Duration::from_secs(60));
    ensure_eq(
        age(mixed).await?,
        Some(Duration::from_secs(60)),
        "the oldest due wait of an item enqueued after a delayed one but due before it",
    )?;
    pass()
}

async fn oldest_age<S: Store + ?Sized>(
    store: &S,
    q: QueueName,
) -> Result<Option<Duration>, Failure> {
    let c = store.queue_counts(&q).await.or_fail("queue_counts")?;
    Ok(c.oldest_ready_age)
}

pub(super) async fn queue_list_names_a_queue_whose_only_items_are_scheduled_running_or_kept_done<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let (later, held, finished) = (
        queue("list-scheduled")?,
        queue("list-running")?,
        queue("list-done")?,
    );
    let w = owner("w1")?;
    // One queue's only item is not due for an hour, another's is running, and a third's
    // finished (kept as done by a store that keeps finished items).
    enqueue(
        env.store(),
        vec![item(&later).delay(Duration::from_secs(3600))],
    )
    .await?;
    enqueue_n(env.store(), &held, 1).await?;
    claim_one(
        env.store(),
        &held,
        &w,
        "the claim of the running queue's item",
    )
    .await?;
    let done = enqueue_n(env.store(), &finished, 1).await?[0];
    let lease = claim_one(
        env.store(),
        &finished,
        &w,
        "the claim of the item to finish",
    )
    .await?;
    crate::fixtures::complete(env.store(), lease.token).await?;
    let kept = env
        .store()
        .item_get(done)
        .await
        .or_fail("item_get")?
        .is_some();
    let mut want = vec![later, held];
    if kept {
        want.push(finished.clone());
    }
    want.sort();
    let mut known = env.store().queue_list().await.or_fail("queue_list")?;
    if !kept {
        // Whether a queue whose items were all deleted is still known is the store's
        // choice.
        known.retain(|q| q != &finished);
    }
    ensure_eq(
        known,
        want,
        &format!(
            "the known queues: one with only a scheduled item, one with only a running \
             item{}",
            if kept {
                ", one with only a kept finished item"
            } else {
                ""
            }
        ),
    )?;
    pass()
}

pub(super) async fn queue_counts_count_kept_finished_items_as_done<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    let w = owner("w1")?;
    let ids = enqueue_n(env.store(), &q, 3).await?;
    for lease in claim_for(env.store(), &q, &w, 2, LEASE).await? {
        crate::fixtures::complete(env.store(), lease.token).await?;
    }
    let mut kept = 0;
    for &id in &ids[..2] {
        match env.store().item_get(id).await.or_fail("item_get")? {
            None => {}
            Some(it) if it.state == tenure_core::ItemState::Done => kept += 1,
            Some(it) => {
                return Err(Failure::new(
                    format!("item {id} to be done or deleted after its complete"),
                    format!("{}", it.state),
                ))
            }
        }
    }
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(
        (c.ready, c.running, c.dead, c.done),
        (1, 0, 0, kept),
        &format!(
            "the counts once two of three finished ({kept} of them kept as done, which \
             `done` counts)"
        ),
    )?;
    pass()
}
