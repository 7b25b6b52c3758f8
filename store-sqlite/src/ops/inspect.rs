//! Inspection and control (the contract's fifth group) as SQL: dead items requeued
//! and discarded (by id or by filter), the reads (an item, a queue's counts),
//! listings, cancel and pause.
//!
//! Listings of ready, scheduled and dead items read through `tenure_items_list`
//! (queue, state, seq, without running items) from the cursor's seq, so a page costs
//! its own rows; running items and leases read `tenure_items_expiry`, which holds
//! exactly the running items (schema version 5); a cursor is `s.<seq>` for items and
//! `s.<expiry>.<seq>` for leases. A paused queue is a row of `tenure_queues`.

use rusqlite::{params, OptionalExtension};
use tenure_core::machine;
use tenure_core::LimitKey;
use tenure_core::{
    CancelOutcome, Cursor, DeadFilter, DiscardParams, Error, FailOutcome, FailParams, Item, ItemId,
    ItemListParams, ItemPage, ItemState, LeaseInfo, LeaseListParams, LeasePage, ListOrder,
    ListState, OwnerId, PauseParams, QueueCounts, QueueName, RequeueParams, Timestamp,
};

use super::{
    corrupt, key, load_lean_by_id, promote, read_item, store_item, to_u32, Cx, OpResult, ITEM_COLS,
};

fn bad_cursor() -> Error {
    Error::invalid("cursor", "was not handed out by an sqlite store listing")
}

fn seq_cursor(c: &Cursor) -> OpResult<i64> {
    c.as_str()
        .strip_prefix("s.")
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad_cursor().into())
}

fn lease_cursor(c: &Cursor) -> OpResult<(i64, i64)> {
    let parsed = c
        .as_str()
        .strip_prefix("s.")
        .and_then(|s| s.split_once('.'))
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    parsed.ok_or_else(|| bad_cursor().into())
}

/// True when `queue` is paused.
pub(crate) fn is_paused(cx: &Cx<'_>, queue: &str) -> OpResult<bool> {
    let mut stmt = cx
        .conn
        .prepare_cached("SELECT 1 FROM tenure_queues WHERE queue = ?1")?;
    Ok(stmt.exists([queue])?)
}

/// [`Store::item_list`](tenure_core::Store::item_list).
pub(crate) fn item_list(cx: &Cx<'_>, params: &ItemListParams) -> OpResult<ItemPage> {
    let (cmp, dir) = match params.order {
        ListOrder::OldestFirst => (">", "ASC"),
        ListOrder::NewestFirst => ("<", "DESC"),
    };
    let due = match params.state {
        ListState::Ready => "AND run_at <= ?3",
        ListState::Scheduled => "AND run_at > ?3",
        ListState::Running | ListState::Dead => "AND ?3 = ?3",
    };
    let after = match &params.cursor {
        Some(c) => seq_cursor(c)?,
        None if params.order == ListOrder::OldestFirst => i64::MIN,
        None => i64::MAX,
    };
    // Running items are not in the list index (schema version 5); they are the
    // expiry index's rows, as many as the leases held, read whole and sorted.
    // The literal `state <> 'running'` lets SQLite see the partial index applies.
    let (index, state) = match params.state {
        ListState::Running => ("tenure_items_expiry", "state = 'running' AND ?2 = ?2"),
        _ => ("tenure_items_list", "state = ?2 AND state <> 'running'"),
    };
    let sql = format!(
        "SELECT {ITEM_COLS} FROM tenure_items INDEXED BY {index}
         WHERE queue = ?1 AND {state} {due} AND seq {cmp} ?4
         ORDER BY seq {dir} LIMIT ?5"
    );
    let mut stmt = cx.conn.prepare_cached(&sql)?;
    let limit = i64::from(params.limit);
    let mut rows = stmt.query(params![
        params.queue.as_str(),
        params.state.item_state().as_str(),
        cx.now.as_micros(),
        after,
        limit + 1,
    ])?;
    let mut items = Vec::new();
    let mut last_seq = None;
    let mut more = false;
    while let Some(row) = rows.next()? {
        if items.len() as i64 == limit {
            more = true;
            break;
        }
        let (seq, item) = read_item(row)?;
        last_seq = Some(seq);
        items.push(item);
    }
    let next = match (more, last_seq) {
        (true, Some(seq)) => Some(Cursor::new(format!("s.{seq}"))?),
        _ => None,
    };
    Ok(ItemPage::new(items, next, cx.now))
}

/// [`Store::lease_list`](tenure_core::Store::lease_list).
pub(crate) fn lease_list(cx: &Cx<'_>, params: &LeaseListParams) -> OpResult<LeasePage> {
    let (at, seq) = match &params.cursor {
        Some(c) => lease_cursor(c)?,
        None => (i64::MIN, i64::MIN),
    };
    let mut stmt = cx.conn.prepare_cached(
        "SELECT id, attempt, owner, lease_expires_at, renewals, max_renewals, seq, lease,
                limit_key
         FROM tenure_items INDEXED BY tenure_items_expiry
         WHERE queue = ?1 AND state = 'running' AND (lease_expires_at, seq) > (?2, ?3)
         ORDER BY lease_expires_at, seq LIMIT ?4",
    )?;
    let limit = i64::from(params.limit);
    let mut rows = stmt.query(params![params.queue.as_str(), at, seq, limit + 1])?;
    let mut leases = Vec::new();
    let mut last = None;
    let mut more = false;
    while let Some(row) = rows.next()? {
        if leases.len() as i64 == limit {
            more = true;
            break;
        }
        let id = super::blob_id(row.get_ref(0)?.as_blob().map_err(rusqlite::Error::from)?)?;
        let owner = key(row.get(2)?, OwnerId::new)?
            .ok_or_else(|| corrupt(format!("running item {id} has no owner")))?;
        let expires: i64 = row.get(3)?;
        let seq: i64 = row.get(6)?;
        last = Some((expires, seq));
        leases.push(LeaseInfo::new(
            tenure_core::LeaseToken::new(
                id,
                to_u32(row.get(1)?, "attempt")?,
                tenure_core::LeaseId::from_i64(row.get(7)?),
            ),
            params.queue.clone(),
            owner,
            Timestamp::from_micros(expires),
            to_u32(row.get(4)?, "renewals")?,
            to_u32(row.get(5)?, "max_renewals")?,
        ));
        // The limit key whose slot the lease holds (G16).
        let limit_key = key(row.get(8)?, LimitKey::new)?;
        if let Some(l) = leases.last_mut() {
            l.limit_key = limit_key;
        }
    }
    let next = match (more, last) {
        (true, Some((at, seq))) => Some(Cursor::new(format!("s.{at}.{seq}"))?),
        _ => None,
    };
    Ok(LeasePage::new(leases, next, cx.now))
}

/// [`Store::queue_list`](tenure_core::Store::queue_list): a skip scan of the list
/// index's first column, the queues of the running items (the expiry index), and the
/// paused queues.
pub(crate) fn queue_list(cx: &Cx<'_>) -> OpResult<Vec<QueueName>> {
    let mut stmt = cx.conn.prepare_cached(
        "SELECT queue FROM (SELECT DISTINCT queue FROM tenure_items INDEXED BY tenure_items_list
                            WHERE state <> 'running')
         UNION SELECT queue FROM tenure_items INDEXED BY tenure_items_expiry
               WHERE state = 'running'
         UNION SELECT queue FROM tenure_queues ORDER BY 1",
    )?;
    let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
    let mut out = Vec::new();
    for name in names {
        out.push(QueueName::new(name?).map_err(corrupt)?);
    }
    Ok(out)
}

/// [`Store::item_cancel`](tenure_core::Store::item_cancel): deletes ready rows,
/// promoting the next item of a cancelled stream head (G9); dedup rows stay (G11).
/// With `stop_running`, a running row is failed permanently on its current token
/// through [`fail`](super::fail), in the same write transaction, so no finish can come
/// between the read and the write.
pub(crate) fn item_cancel(
    cx: &Cx<'_>,
    ids: &[ItemId],
    stop_running: Option<&str>,
) -> OpResult<Vec<CancelOutcome>> {
    let mut delete = cx.conn.prepare_cached(
        "DELETE FROM tenure_items WHERE id = ?1 AND state = 'ready' RETURNING stream, head",
    )?;
    let mut look = cx
        .conn
        .prepare_cached("SELECT state, attempt, owner FROM tenure_items WHERE id = ?1")?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let gone: Option<(Option<String>, bool)> = delete
            .query_row([&id.as_bytes()[..]], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((stream, head)) = gone {
            if let (Some(s), true) = (stream, head) {
                promote(cx.conn, &s)?;
            }
            out.push(CancelOutcome::Cancelled);
            continue;
        }
        let row: Option<(String, i64, Option<String>)> = look
            .query_row([&id.as_bytes()[..]], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        out.push(match row {
            None => CancelOutcome::NotFound,
            Some((state, attempt, owner)) => match state.parse::<ItemState>().map_err(corrupt)? {
                ItemState::Running => {
                    let attempt = to_u32(attempt, "attempt")?;
                    let owner = key(owner, OwnerId::new)?
                        .ok_or_else(|| corrupt(format!("running item {id} has no owner")))?;
                    match stop_running {
                        None => CancelOutcome::Running { attempt, owner },
                        Some(by) => stop(cx, *id, by, attempt, owner)?,
                    }
                }
                ItemState::Dead => CancelOutcome::Dead,
                ItemState::Done => CancelOutcome::Done,
                ItemState::Ready => return Err(corrupt("a ready row survived its delete")),
            },
        });
    }
    Ok(out)
}

/// Stops the running item `id` on behalf of `by`: the permanent failure of its current
/// token ([`machine::cancel_running`]), applied as [`fail`](super::fail) applies one.
fn stop(
    cx: &Cx<'_>,
    id: ItemId,
    by: &str,
    attempt: u32,
    owner: OwnerId,
) -> OpResult<CancelOutcome> {
    let failure = load_lean_by_id(cx.conn, id)?
        .and_then(|(_, item)| machine::cancel_running(&item, by))
        .ok_or_else(|| corrupt(format!("running item {id} vanished in its transaction")))?;
    match super::fail(cx, &FailParams::one(failure))?.as_slice() {
        [FailOutcome::Dead] => Ok(CancelOutcome::Stopped { attempt, owner }),
        other => Err(corrupt(format!(
            "stopping running item {id} answered {other:?}"
        ))),
    }
}

/// [`Store::queue_pause`](tenure_core::Store::queue_pause) and
/// [`Store::queue_resume`](tenure_core::Store::queue_resume).
pub(crate) fn set_paused(cx: &Cx<'_>, params: &PauseParams, paused: bool) -> OpResult<bool> {
    let q = params.queue.as_str();
    let changed = if paused {
        cx.conn
            .prepare_cached(
                "INSERT INTO tenure_queues (queue, paused_at) VALUES (?1, ?2)
                 ON CONFLICT (queue) DO NOTHING",
            )?
            .execute(params![q, cx.now.as_micros()])?
    } else {
        cx.conn
            .prepare_cached("DELETE FROM tenure_queues WHERE queue = ?1")?
            .execute([q])?
    };
    Ok(changed > 0)
}

/// The dead items a filter matches, earliest death first, at most its limit.
fn dead_matching(cx: &Cx<'_>, f: &DeadFilter) -> OpResult<Vec<ItemId>> {
    let mut stmt = cx.conn.prepare_cached(
        "SELECT id FROM tenure_items INDEXED BY tenure_items_list
         WHERE queue = ?1 AND state = 'dead' AND state <> 'running' AND updated_at <= ?2
         ORDER BY updated_at, seq LIMIT ?3",
    )?;
    let rows = stmt.query_map(
        params![
            f.queue.as_str(),
            f.dead_before(cx.now).as_micros(),
            i64::from(f.limit)
        ],
        |r| r.get::<_, Vec<u8>>(0),
    )?;
    let mut ids = Vec::new();
    for row in rows {
        ids.push(super::blob_id(&row?)?);
    }
    Ok(ids)
}

/// The ids a requeue names, or those its filter matches.
pub(crate) fn requeue_ids(cx: &Cx<'_>, params: &RequeueParams) -> OpResult<Vec<ItemId>> {
    match &params.filter {
        Some(f) => dead_matching(cx, f),
        None => Ok(params.ids.clone()),
    }
}

/// The ids a discard names, or those its filter matches.
pub(crate) fn discard_ids(cx: &Cx<'_>, params: &DiscardParams) -> OpResult<Vec<ItemId>> {
    match &params.filter {
        Some(f) => dead_matching(cx, f),
        None => Ok(params.ids.clone()),
    }
}

/// [`Store::dead_requeue`](tenure_core::Store::dead_requeue); applies
/// [`machine::requeue`].
pub(crate) fn dead_requeue(cx: &Cx<'_>, params: &RequeueParams) -> OpResult<u64> {
    let mut n = 0;
    for id in &requeue_ids(cx, params)? {
        let Some((seq, mut item)) = load_lean_by_id(cx.conn, *id)? else {
            continue;
        };
        if machine::requeue(&mut item, cx.now, params.additional_attempts) {
            store_item(cx.conn, seq, &item)?;
            n += 1;
        }
    }
    Ok(n)
}

/// [`Store::dead_discard`](tenure_core::Store::dead_discard): deletes dead items and
/// lets their streams move on.
pub(crate) fn dead_discard(cx: &Cx<'_>, params: &DiscardParams) -> OpResult<u64> {
    let mut stmt = cx.conn.prepare_cached(
        "DELETE FROM tenure_items WHERE id = ?1 AND state = 'dead' RETURNING stream",
    )?;
    let mut n = 0;
    for id in &discard_ids(cx, params)? {
        let row: Option<Option<String>> = stmt
            .query_row([&id.as_bytes()[..]], |r| r.get(0))
            .optional()?;
        if let Some(stream) = row {
            n += 1;
            if let Some(s) = stream {
                promote(cx.conn, &s)?;
            }
        }
    }
    Ok(n)
}

/// [`Store::item_get`](tenure_core::Store::item_get).
pub(crate) fn item_get(cx: &Cx<'_>, id: ItemId) -> OpResult<Option<Item>> {
    let mut stmt = cx.conn.prepare_cached(&format!(
        "SELECT {ITEM_COLS} FROM tenure_items WHERE id = ?1"
    ))?;
    let mut rows = stmt.query([&id.as_bytes()[..]])?;
    match rows.next()? {
        Some(row) => Ok(Some(read_item(row)?.1)),
        None => Ok(None),
    }
}

/// [`Store::queue_counts`](tenure_core::Store::queue_counts). Scans the queue's rows.
pub(crate) fn queue_counts(cx: &Cx<'_>, queue: &QueueName) -> OpResult<QueueCounts> {
    let mut stmt = cx.conn.prepare_cached(
        "SELECT state, run_at <= ?2, count(*), min(run_at) FROM tenure_items
         WHERE queue = ?1 GROUP BY 1, 2",
    )?;
    let rows = stmt.query_map(params![queue.as_str(), cx.now.as_micros()], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, bool>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
        ))
    })?;
    let mut counts = QueueCounts::default().with_paused(is_paused(cx, queue.as_str())?);
    for row in rows {
        let (state, due, n, first) = row?;
        let n = u64::try_from(n).map_err(corrupt)?;
        match state.parse::<ItemState>().map_err(corrupt)? {
            ItemState::Ready if due => {
                counts.ready += n;
                let age = cx.now.duration_since(Timestamp::from_micros(first));
                counts.oldest_ready_age = Some(age);
            }
            ItemState::Ready => counts.scheduled += n,
            ItemState::Running => counts.running += n,
            ItemState::Dead => counts.dead += n,
            ItemState::Done => counts.done += n,
        }
    }
    Ok(counts)
}
