//! Inspection: operators list a queue's items by state in enqueue order, paged by an
//! opaque cursor, list its live leases, see its counts with the oldest due item's wait
//! and its pause flag, and list the known queues.

use std::time::Duration;

use tenure_core::{
    Cursor, DeadFilter, ItemId, ItemListParams, LeaseListParams, LeaseToken, ListState,
    PauseParams, QueueName, RecoverParams, RenewOutcome, RequeueParams, Store,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_invalid, expect_state, get, pass, OrFail};
use crate::fixtures::{
    claim_for, claim_one, enqueue, enqueue_n, fail, item, kill_next, owner, permanent, queue,
    renew, retry, LEASE, TICK,
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
        the_oldest_due_wait_of_a_delayed_or_retried_item_counts_from_its_run_at,
        a_queue_shows_nothing_of_the_queues_whose_names_it_begins,
        lease_list_shows_an_expired_lease_until_it_is_recovered,
        queue_list_names_a_queue_whose_only_items_are_scheduled_running_or_kept_done,
        lease_pages_show_leases_of_one_expiry_each_once,
        a_delayed_item_is_listed_ready_from_the_instant_it_is_due,
        queue_counts_count_kept_finished_items_as_done,
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

async fn the_oldest_due_wait_of_a_delayed_or_retried_item_counts_from_its_run_at<H: Harness>(
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

async fn a_queue_shows_nothing_of_the_queues_whose_names_it_begins<H: Harness>(
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

async fn lease_list_shows_an_expired_lease_until_it_is_recovered<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    let ids = enqueue_n(env.store(), &q, 3).await?;
    let (a, b) = (owner("w-a")?, owner("w-b")?);
    let short = claim_for(env.store(), &q, &a, 1, Duration::from_secs(10)).await?;
    let long = claim_for(env.store(), &q, &b, 1, Duration::from_secs(60)).await?;
    // At the instant the short lease ends, and well after: it has expired, nobody
    // recovered it, and it is still the item's lease (its holder may still renew or
    // finish it), so it is listed, first, with its expiry.
    for (wait, when) in [
        (
            Duration::from_secs(10),
            "at the instant the short lease ends",
        ),
        (Duration::from_secs(20), "20 s after the short lease ended"),
    ] {
        env.advance(wait);
        let page = env
            .store()
            .lease_list(LeaseListParams::new(q.clone()))
            .await
            .or_fail("lease_list")?;
        let shown: Vec<_> = page
            .leases
            .iter()
            .map(|l| (l.token, l.owner.clone(), l.expires_at))
            .collect();
        ensure_eq(
            shown,
            vec![
                (short[0].token, a.clone(), short[0].expires_at),
                (long[0].token, b.clone(), long[0].expires_at),
            ],
            &format!("the leases {when} (expired first, then the live one)"),
        )?;
        ensure(
            page.leases[0].expires_at <= page.as_of && page.leases[1].expires_at > page.as_of,
            "the expired lease's expiry to be at or before the page's as_of, the live one's after",
            (&page.leases, page.as_of),
        )?;
        ensure_eq(
            get(env.store(), ids[0]).await?.lease_expires_at,
            Some(short[0].expires_at),
            "the expired item's lease expiry",
        )?;
    }
    // The first page of one is the expired lease; the next holds the live one.
    let first = env
        .store()
        .lease_list(LeaseListParams::new(q.clone()).limit(1))
        .await
        .or_fail("lease_list")?;
    let tokens: Vec<LeaseToken> = first.leases.iter().map(|l| l.token).collect();
    ensure_eq(tokens, vec![short[0].token], "a first page of one lease")?;
    let next = first.next.ok_or_else(|| {
        Failure::new(
            "a first page of one of two leases to have a next cursor",
            "None",
        )
    })?;
    let rest = env
        .store()
        .lease_list(LeaseListParams::new(q.clone()).after(next))
        .await
        .or_fail("lease_list")?;
    let tokens: Vec<LeaseToken> = rest.leases.iter().map(|l| l.token).collect();
    ensure_eq(
        tokens,
        vec![long[0].token],
        "the page after the expired lease",
    )?;
    // Recovery takes it back: it is no longer a lease.
    let recovered = env
        .store()
        .recover_expired(RecoverParams::new(10))
        .await
        .or_fail("recover_expired")?;
    ensure_eq(recovered.requeued, 1, "leases recovered")?;
    expect_state(
        env.store(),
        ids[0],
        tenure_core::ItemState::Ready,
        "its recovery",
    )
    .await?;
    let page = env
        .store()
        .lease_list(LeaseListParams::new(q.clone()))
        .await
        .or_fail("lease_list")?;
    let tokens: Vec<LeaseToken> = page.leases.iter().map(|l| l.token).collect();
    ensure_eq(
        tokens,
        vec![long[0].token],
        "the leases once the expired one was recovered",
    )?;
    pass()
}

async fn queue_list_names_a_queue_whose_only_items_are_scheduled_running_or_kept_done<
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

async fn lease_pages_show_leases_of_one_expiry_each_once<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    enqueue_n(env.store(), &q, 6).await?;
    let w = owner("w1")?;
    // Five leases from one claim share one expiry; a sixth, claimed later, ends later.
    let together = claim_for(env.store(), &q, &w, 5, LEASE).await?;
    ensure_eq(together.len(), 5, "the claim of five")?;
    env.advance(Duration::from_secs(1));
    let last = claim_for(env.store(), &q, &w, 1, LEASE).await?;
    ensure_eq(last.len(), 1, "the claim of the sixth")?;
    for limit in [1, 2, 3] {
        let mut seen: Vec<tenure_core::LeaseInfo> = Vec::new();
        let mut cursor = None;
        for _ in 0..20 {
            let mut p = LeaseListParams::new(q.clone()).limit(limit);
            if let Some(c) = cursor.take() {
                p = p.after(c);
            }
            let page = env.store().lease_list(p).await.or_fail("lease_list")?;
            ensure(
                page.leases.len() <= limit as usize,
                format!("a page of at most {limit} leases"),
                &page,
            )?;
            seen.extend(page.leases);
            match page.next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        let mut first: Vec<LeaseToken> = seen.iter().take(5).map(|l| l.token).collect();
        first.sort_by_key(|t| t.id);
        let mut want: Vec<LeaseToken> = together.iter().map(|l| l.token).collect();
        want.sort_by_key(|t| t.id);
        ensure_eq(
            (seen.len(), first, seen.last().map(|l| l.token)),
            (6, want, Some(last[0].token)),
            &format!(
                "pages of {limit} through five leases of one expiry and a later one: each \
                 lease once, the five first in any order, the later one last"
            ),
        )?;
    }
    pass()
}

async fn a_delayed_item_is_listed_ready_from_the_instant_it_is_due<H: Harness>(
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

async fn queue_counts_count_kept_finished_items_as_done<H: Harness>(env: Env<'_, H>) -> CaseResult {
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
