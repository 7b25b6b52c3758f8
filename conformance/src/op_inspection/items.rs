//! Item listings: a queue's items by state, in enqueue order, paged by an opaque
//! cursor, never another queue's.

use std::time::Duration;

use tenure_core::{
    Cursor, DeadFilter, ItemId, ItemListParams, LeaseListParams, ListState, QueueName,
    RequeueParams, Store,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_invalid, get, pass, OrFail};
use crate::fixtures::{
    claim_for, claim_one, enqueue, enqueue_n, fail, item, kill_next, listed, owner, queue, retry,
    LEASE, TICK,
};
use crate::harness::Harness;

/// Pages through a listing, `limit` items a page, and returns the ids page by page.
pub(crate) async fn pages<S: Store + ?Sized>(
    store: &S,
    params: ItemListParams,
    limit: u32,
) -> Result<Vec<Vec<ItemId>>, Failure> {
    let mut out = Vec::new();
    let mut cursor: Option<Cursor> = None;
    for _ in 0..100 {
        let mut p = params.clone().limit(limit);
        if let Some(c) = cursor.take() {
            p = p.after(c);
        }
        let page = store.item_list(p).await.or_fail("item_list")?;
        ensure(
            page.items.len() <= limit as usize,
            format!("a page of at most {limit} items"),
            page.items.len(),
        )?;
        out.push(page.items.iter().map(|i| i.id).collect());
        match page.next {
            Some(c) => cursor = Some(c),
            None => return Ok(out),
        }
    }
    Err(Failure::new(
        "paging to reach the end within 100 pages",
        format!("{out:?}"),
    ))
}

pub(super) async fn pages_show_every_item_once_in_enqueue_order_either_way<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    let ids = enqueue_n(env.store(), &q, 5).await?;
    let oldest = pages(
        env.store(),
        ItemListParams::new(q.clone(), ListState::Ready),
        2,
    )
    .await?;
    // The last page may be empty when the store could not tell it was the end.
    let flat: Vec<ItemId> = oldest.iter().flatten().copied().collect();
    ensure_eq(flat, ids.clone(), "every ready item, oldest first, once")?;
    let filled: Vec<Vec<ItemId>> = oldest.into_iter().filter(|p| !p.is_empty()).collect();
    ensure_eq(
        filled,
        vec![ids[0..2].to_vec(), ids[2..4].to_vec(), ids[4..5].to_vec()],
        "pages of two, oldest first",
    )?;
    let newest = pages(
        env.store(),
        ItemListParams::new(q.clone(), ListState::Ready).newest_first(),
        2,
    )
    .await?;
    let flat: Vec<ItemId> = newest.iter().flatten().copied().collect();
    let mut reversed = ids.clone();
    reversed.reverse();
    ensure_eq(flat, reversed, "every ready item, newest first, once")?;
    // A cursor continues after its position even when the item there is gone.
    let first = env
        .store()
        .item_list(ItemListParams::new(q.clone(), ListState::Ready).limit(2))
        .await
        .or_fail("item_list")?;
    let next = first.next.ok_or_else(|| {
        Failure::new("a first page of 2 of 5 items to have a next cursor", "None")
    })?;
    let w = owner("w1")?;
    claim_for(env.store(), &q, &w, 2, LEASE).await?;
    let rest = env
        .store()
        .item_list(
            ItemListParams::new(q.clone(), ListState::Ready)
                .limit(10)
                .after(next),
        )
        .await
        .or_fail("item_list")?;
    let rest: Vec<ItemId> = rest.items.iter().map(|i| i.id).collect();
    ensure_eq(
        rest,
        ids[2..].to_vec(),
        "the page after the cursor once the listed items were claimed",
    )?;
    pass()
}

pub(super) async fn listings_split_items_by_state_and_carry_attempt_owner_expiry_and_error<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    let w = owner("w1")?;
    // Claimed one at a time, so each becomes what the next step makes it.
    let dead = enqueue(env.store(), vec![item(&q)]).await?[0];
    kill_next(env.store(), &q, &w).await?;
    let retrying = enqueue(env.store(), vec![item(&q)]).await?[0];
    let lease = claim_one(env.store(), &q, &w, "the claim of the item to retry").await?;
    fail(
        env.store(),
        retry(lease.token, Duration::from_secs(60), "try later"),
    )
    .await?;
    let running = enqueue(env.store(), vec![item(&q)]).await?[0];
    let held = claim_one(env.store(), &q, &w, "the claim of the item to hold").await?;
    let later = enqueue(env.store(), vec![item(&q).delay(Duration::from_secs(30))]).await?[0];
    let ready = enqueue(env.store(), vec![item(&q)]).await?[0];

    ensure_eq(
        listed(env.store(), &q, ListState::Ready).await?,
        vec![ready],
        "the ready listing",
    )?;
    ensure_eq(
        listed(env.store(), &q, ListState::Scheduled).await?,
        vec![retrying, later],
        "the scheduled listing (a waiting retry and a delayed item, in enqueue order)",
    )?;
    ensure_eq(
        listed(env.store(), &q, ListState::Running).await?,
        vec![running],
        "the running listing",
    )?;
    ensure_eq(
        listed(env.store(), &q, ListState::Dead).await?,
        vec![dead],
        "the dead listing",
    )?;
    for (id, state) in [
        (running, ListState::Running),
        (dead, ListState::Dead),
        (retrying, ListState::Scheduled),
    ] {
        let page = env
            .store()
            .item_list(ItemListParams::new(q.clone(), state))
            .await
            .or_fail("item_list")?;
        let shown = page.items.iter().find(|i| i.id == id).cloned();
        let stored = get(env.store(), id).await?;
        ensure_eq(
            shown,
            Some(stored),
            "a listed item to read as item_get reads it",
        )?;
        ensure_eq(page.as_of, env.now(), "the page's as_of (the store's now)")?;
    }
    let page = env
        .store()
        .item_list(ItemListParams::new(q.clone(), ListState::Running))
        .await
        .or_fail("item_list")?;
    let it = &page.items[0];
    ensure_eq(
        (it.attempt, it.owner.clone(), it.lease_expires_at),
        (1, Some(w.clone()), Some(held.expires_at)),
        "the running item's attempt, owner and lease expiry",
    )?;
    let page = env
        .store()
        .item_list(ItemListParams::new(q.clone(), ListState::Dead))
        .await
        .or_fail("item_list")?;
    ensure_eq(
        page.items[0].last_error.as_deref(),
        Some("permanent"),
        "the dead item's last error",
    )?;
    // Another queue's listing shows none of these.
    let other = queue("inspect-other")?;
    for state in ListState::ALL {
        ensure_eq(
            listed(env.store(), &other, state).await?,
            vec![],
            "another queue's listing",
        )?;
    }
    pass()
}

pub(super) async fn page_size_and_foreign_cursors_are_refused_naming_the_field<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    enqueue_n(env.store(), &q, 2).await?;
    for bad in [0, tenure_core::MAX_PAGE + 1] {
        expect_invalid(
            env.store()
                .item_list(ItemListParams::new(q.clone(), ListState::Ready).limit(bad))
                .await,
            "limit",
            "item_list with a page size out of bounds",
        )?;
        expect_invalid(
            env.store()
                .lease_list(LeaseListParams::new(q.clone()).limit(bad))
                .await,
            "limit",
            "lease_list with a page size out of bounds",
        )?;
    }
    let foreign = Cursor::new("not-a-cursor-of-any-store").or_fail("Cursor::new")?;
    expect_invalid(
        env.store()
            .item_list(ItemListParams::new(q.clone(), ListState::Ready).after(foreign.clone()))
            .await,
        "cursor",
        "item_list with a cursor no store handed out",
    )?;
    expect_invalid(
        env.store()
            .lease_list(LeaseListParams::new(q.clone()).after(foreign))
            .await,
        "cursor",
        "lease_list with a cursor no store handed out",
    )?;
    pass()
}

pub(super) async fn a_queue_shows_nothing_of_the_queues_whose_names_it_begins<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("mail")?;
    let empty = queue("mai")?;
    let longer: Vec<QueueName> = ["mail-b", "mail.b", "mail:b", "mail_b", "mailb", "mail0"]
        .into_iter()
        .map(queue)
        .collect::<Result<_, _>>()?;
    let w = owner("w1")?;
    // Every queue gets one item in each state: dead, scheduled, running, ready.
    let mut mine = Vec::new();
    for name in std::iter::once(&q).chain(&longer) {
        let dead = enqueue(env.store(), vec![item(name)]).await?[0];
        kill_next(env.store(), name, &w).await?;
        let later = enqueue(
            env.store(),
            vec![item(name).delay(Duration::from_secs(600))],
        )
        .await?[0];
        let running = enqueue(env.store(), vec![item(name)]).await?[0];
        let lease = claim_one(env.store(), name, &w, "the claim of the item to hold").await?;
        let ready = enqueue(env.store(), vec![item(name)]).await?[0];
        if name == &q {
            mine = vec![ready, later, lease.token.id, dead];
            ensure_eq(lease.token.id, running, "the claimed item")?;
        }
    }
    for (state, want) in ListState::ALL.into_iter().zip(mine.iter().copied()) {
        for order in [false, true] {
            let mut params = ItemListParams::new(q.clone(), state);
            if order {
                params = params.newest_first();
            }
            let paged: Vec<ItemId> = pages(env.store(), params, 1)
                .await?
                .into_iter()
                .flatten()
                .collect();
            ensure_eq(
                paged,
                vec![want],
                &format!(
                    "mail's {state:?} listing ({}), paged one by one, beside queues \
                     named mail-b, mail.b, mail:b, mail_b, mailb and mail0",
                    if order {
                        "newest first"
                    } else {
                        "oldest first"
                    }
                ),
            )?;
        }
        ensure_eq(
            listed(env.store(), &empty, state).await?,
            vec![],
            &format!("the {state:?} listing of the empty queue mai"),
        )?;
    }
    let leases = env
        .store()
        .lease_list(LeaseListParams::new(q.clone()).limit(1))
        .await
        .or_fail("lease_list")?;
    let tokens: Vec<ItemId> = leases.leases.iter().map(|l| l.token.id).collect();
    ensure_eq(tokens, vec![mine[2]], "mail's first lease page of one")?;
    if let Some(next) = leases.next {
        let rest = env
            .store()
            .lease_list(LeaseListParams::new(q.clone()).after(next))
            .await
            .or_fail("lease_list")?;
        ensure_eq(
            rest.leases,
            vec![],
            "mail's lease page after its only lease",
        )?;
    }
    let none = env
        .store()
        .lease_list(LeaseListParams::new(empty.clone()))
        .await
        .or_fail("lease_list")?;
    ensure_eq(none.leases, vec![], "the leases of the empty queue mai")?;
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(
        (c.ready, c.scheduled, c.running, c.dead),
        (1, 1, 1, 1),
        "mail's counts",
    )?;
    let c = env
        .store()
        .queue_counts(&empty)
        .await
        .or_fail("queue_counts")?;
    ensure_eq(
        (c.ready, c.scheduled, c.running, c.dead, c.oldest_ready_age),
        (0, 0, 0, 0, None),
        "the counts of the empty queue mai",
    )?;
    // A dead filter of mail takes mail's dead item only.
    let n = env
        .store()
        .dead_requeue(RequeueParams::matching(DeadFilter::new(q.clone())))
        .await
        .or_fail("dead_requeue")?;
    ensure_eq(n, 1, "a requeue of every dead item of mail")?;
    for name in &longer {
        let c = env
            .store()
            .queue_counts(name)
            .await
            .or_fail("queue_counts")?;
        ensure_eq(
            c.dead,
            1,
            &format!("{name}'s dead items after mail's requeue"),
        )?;
    }
    let mut all = longer.clone();
    all.push(q);
    all.sort();
    ensure_eq(
        env.store().queue_list().await.or_fail("queue_list")?,
        all,
        "the known queues, by name",
    )?;
    pass()
}

pub(super) async fn a_delayed_item_is_listed_ready_from_the_instant_it_is_due<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    let id = enqueue(env.store(), vec![item(&q).delay(Duration::from_secs(30))]).await?[0];
    env.advance(Duration::from_secs(30) - TICK);
    ensure_eq(
        (
            listed(env.store(), &q, ListState::Ready).await?,
            listed(env.store(), &q, ListState::Scheduled).await?,
        ),
        (vec![], vec![id]),
        "the ready and scheduled listings one tick before the item is due",
    )?;
    env.advance(TICK);
    ensure_eq(
        get(env.store(), id).await?.run_at,
        env.now(),
        "the item's run_at (now)",
    )?;
    ensure_eq(
        (
            listed(env.store(), &q, ListState::Ready).await?,
            listed(env.store(), &q, ListState::Scheduled).await?,
        ),
        (vec![id], vec![]),
        "the ready and scheduled listings at the instant the item is due (run_at = now)",
    )?;
    let c = env.store().queue_counts(&q).await.or_fail("queue_counts")?;
    ensure_eq(
        (c.ready, c.scheduled),
        (1, 0),
        "the ready and scheduled counts at the instant the item is due",
    )?;
    pass()
}
