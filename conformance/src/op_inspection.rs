//! Inspection: operators list a queue's items by state in enqueue order, paged by an
//! opaque cursor, list its live leases, see its counts with the oldest due item's wait
//! and its pause flag, and list the known queues.

use std::time::Duration;

use tenure_core::{
    Cursor, ItemId, ItemListParams, LeaseListParams, LeaseToken, ListState, PauseParams,
    RenewOutcome, Store,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_invalid, get, pass, OrFail};
use crate::fixtures::{
    claim_for, claim_one, enqueue, enqueue_n, fail, item, kill_next, owner, permanent, queue,
    renew, retry, LEASE,
};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "op_inspection";

pub(crate) fn cases<H: Harness>() -> Vec<crate::case::Case<H>> {
    crate::register![GROUP;
        pages_show_every_item_once_in_enqueue_order_either_way,
        listings_split_items_by_state_and_carry_attempt_owner_expiry_and_error,
        page_size_and_foreign_cursors_are_refused_naming_the_field,
        lease_list_shows_owner_attempt_expiry_and_renewals_soonest_expiry_first,
        queue_counts_report_the_oldest_due_wait_and_the_pause,
        queue_list_names_every_queue_with_items_and_every_paused_queue,
    ]
}

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

/// The ids of one listing's first page of up to 1000 items.
pub(crate) async fn listed<S: Store + ?Sized>(
    store: &S,
    queue: &tenure_core::QueueName,
    state: ListState,
) -> Result<Vec<ItemId>, Failure> {
    let page = store
        .item_list(ItemListParams::new(queue.clone(), state).limit(1000))
        .await
        .or_fail("item_list")?;
    Ok(page.items.iter().map(|i| i.id).collect())
}

async fn pages_show_every_item_once_in_enqueue_order_either_way<H: Harness>(
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

async fn listings_split_items_by_state_and_carry_attempt_owner_expiry_and_error<H: Harness>(
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

async fn page_size_and_foreign_cursors_are_refused_naming_the_field<H: Harness>(
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

async fn lease_list_shows_owner_attempt_expiry_and_renewals_soonest_expiry_first<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    let ids = enqueue_n(env.store(), &q, 4).await?;
    let (a, b) = (owner("w-a")?, owner("w-b")?);
    let long = claim_for(env.store(), &q, &a, 1, Duration::from_secs(90)).await?;
    let short = claim_for(env.store(), &q, &b, 1, Duration::from_secs(10)).await?;
    let mid = claim_for(env.store(), &q, &a, 1, Duration::from_secs(50)).await?;
    let renewed = renew(env.store(), mid[0].token, Duration::from_secs(60)).await?;
    let RenewOutcome::Renewed { expires_at, .. } = renewed else {
        return Err(Failure::new(
            "the renewal to be accepted",
            format!("{renewed:?}"),
        ));
    };
    // Shown soonest expiry first: short (10 s), mid renewed (60 s), long (90 s).
    let mut seen = Vec::new();
    let mut cursor = None;
    for _ in 0..10 {
        let mut p = LeaseListParams::new(q.clone()).limit(2);
        if let Some(c) = cursor.take() {
            p = p.after(c);
        }
        let page = env.store().lease_list(p).await.or_fail("lease_list")?;
        ensure(page.leases.len() <= 2, "a page of at most 2 leases", &page)?;
        seen.extend(page.leases);
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let tokens: Vec<LeaseToken> = seen.iter().map(|l| l.token).collect();
    ensure_eq(
        tokens,
        vec![short[0].token, mid[0].token, long[0].token],
        "the leases, soonest expiry first, each once",
    )?;
    let shown: Vec<_> = seen
        .iter()
        .map(|l| (l.owner.clone(), l.expires_at, l.renewals, l.queue.clone()))
        .collect();
    ensure_eq(
        shown,
        vec![
            (b.clone(), short[0].expires_at, 0, q.clone()),
            (a.clone(), expires_at, 1, q.clone()),
            (a.clone(), long[0].expires_at, 0, q.clone()),
        ],
        "each lease's owner, expiry, renewals and queue",
    )?;
    ensure_eq(
        seen[0].max_renewals,
        get(env.store(), short[0].token.id).await?.max_renewals,
        "max_renewals",
    )?;
    // The unclaimed item holds no lease; a finished one no longer shows.
    ensure(
        !seen.iter().any(|l| l.token.id == ids[3]),
        "the ready item not to be listed as a lease",
        &seen,
    )?;
    crate::fixtures::complete(env.store(), short[0].token).await?;
    fail(env.store(), permanent(long[0].token, "gone")).await?;
    let page = env
        .store()
        .lease_list(LeaseListParams::new(q.clone()))
        .await
        .or_fail("lease_list")?;
    let tokens: Vec<LeaseToken> = page.leases.iter().map(|l| l.token).collect();
    ensure_eq(tokens, vec![mid[0].token], "the leases once two finished")?;
    pass()
}

async fn queue_counts_report_the_oldest_due_wait_and_the_pause<H: Harness>(
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

async fn queue_list_names_every_queue_with_items_and_every_paused_queue<H: Harness>(
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
