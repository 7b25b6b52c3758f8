//! G7 Schedule: an item whose `run_at` is in the future is not claimable.

use std::time::Duration;

use crate::case::{register, Case, CaseResult, Env};
use crate::check::{ensure_eq, expect_counts, get, pass};
use crate::fixtures::{
    claim, claim_none, claim_one, counts, enqueue, enqueue_one, item, owner, queue, TICK,
};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g07_schedule";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        a_delayed_item_is_invisible_until_due,
        an_item_run_at_an_instant_is_claimable_from_that_instant,
        an_item_run_at_a_past_instant_is_claimable_at_once,
        a_future_item_does_not_hold_up_due_items,
        queue_counts_split_ready_items_into_due_and_scheduled,
        an_enqueue_delay_decides_when_the_item_is_due,
    ]
}

async fn a_delayed_item_is_invisible_until_due<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g07")?;
    let delay = Duration::from_secs(60);
    let id = enqueue_one(env.store(), item(&q).delay(delay)).await?;
    let it = get(env.store(), id).await?;
    ensure_eq(
        it.run_at,
        env.now() + delay,
        "run_at of an item delayed 60 s",
    )?;
    let w = owner("w1")?;
    claim_none(env.store(), &q, &w, "the only item is delayed 60 s").await?;
    env.advance(delay - TICK);
    claim_none(env.store(), &q, &w, "the only item is due in one tick").await?;
    env.advance(TICK);
    let lease = claim_one(env.store(), &q, &w, "the claim of the due item").await?;
    ensure_eq(lease.token.item_attempt(), (id, 1), "the due item's token")?;
    pass()
}

async fn an_item_run_at_an_instant_is_claimable_from_that_instant<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g07")?;
    let at = env.now() + Duration::from_secs(5);
    let id = enqueue_one(env.store(), item(&q).run_at(at)).await?;
    ensure_eq(get(env.store(), id).await?.run_at, at, "the stored run_at")?;
    let w = owner("w1")?;
    env.advance(Duration::from_secs(5) - TICK);
    claim_none(env.store(), &q, &w, "the item is due in one tick").await?;
    env.advance(TICK);
    claim_one(env.store(), &q, &w, "the claim at run_at").await?;
    pass()
}

async fn an_item_run_at_a_past_instant_is_claimable_at_once<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g07")?;
    let at = env.now() - Duration::from_secs(3600);
    let id = enqueue_one(env.store(), item(&q).run_at(at)).await?;
    ensure_eq(get(env.store(), id).await?.run_at, at, "the stored run_at")?;
    let lease = claim_one(
        env.store(),
        &q,
        &owner("w1")?,
        "the claim of an overdue item",
    )
    .await?;
    ensure_eq(lease.token.id, id, "the claimed item")?;
    pass()
}

async fn a_future_item_does_not_hold_up_due_items<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g07")?;
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).priority(-100).delay(Duration::from_secs(60)),
            item(&q),
            item(&q).priority(-100).delay(Duration::from_secs(60)),
        ],
    )
    .await?;
    let leases = claim(env.store(), &q, &owner("w1")?, 10).await?;
    let got: Vec<(tenure_core::ItemId, u32)> =
        leases.iter().map(|l| l.token.item_attempt()).collect();
    ensure_eq(got, vec![(ids[1], 1)], "a claim of 10 with one due item")?;
    pass()
}

async fn queue_counts_split_ready_items_into_due_and_scheduled<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g07")?;
    let delay = Duration::from_secs(60);
    enqueue(env.store(), vec![item(&q), item(&q), item(&q).delay(delay)]).await?;
    expect_counts(
        env.store(),
        &q,
        counts(2, 1, 0, 0, 0),
        "with one item delayed",
    )
    .await?;
    env.advance(delay);
    expect_counts(env.store(), &q, counts(3, 0, 0, 0, 0), "once it is due").await?;
    pass()
}

async fn an_enqueue_delay_decides_when_the_item_is_due<H: Harness>(env: Env<'_, H>) -> CaseResult {
    for (n, delay) in [Duration::from_secs(3), Duration::from_secs(2 * 24 * 3600)]
        .into_iter()
        .enumerate()
    {
        let q = queue(&format!("g07-delay-{n}"))?;
        let id = enqueue_one(env.store(), item(&q).delay(delay)).await?;
        ensure_eq(
            get(env.store(), id).await?.run_at,
            env.now() + delay,
            &format!("run_at of an item delayed {delay:?}"),
        )?;
        let w = owner("w1")?;
        env.advance(delay - TICK);
        claim_none(
            env.store(),
            &q,
            &w,
            &format!("an item delayed {delay:?} is due in one tick"),
        )
        .await?;
        env.advance(TICK);
        let lease = claim_one(env.store(), &q, &w, "the claim of the due item").await?;
        ensure_eq(lease.token.item_attempt(), (id, 1), "the due item's token")?;
    }
    pass()
}
