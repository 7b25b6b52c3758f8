//! Every store operation as SQL on one connection, inside a transaction the caller
//! (the writer thread, or the application for transactional enqueue) opened.
//!
//! Each function applies exactly the transitions of [`tenure_core::machine`] and names
//! the one it mirrors. The hot paths (claim, complete, renew, release) are single
//! fenced statements; the rare ones (fail, recovery, eviction, requeue) load the item,
//! apply the machine function itself and write the result back.

use std::collections::{HashSet, VecDeque};

use rusqlite::{params, Connection, OptionalExtension, Row};
use tenure_core::machine::{self, Recovery};
use tenure_core::partition::key_hash;
use tenure_core::{
    ClaimParams, CompleteParams, DedupKey, DeregisterParams, DiscardParams, EnqueueParams,
    Enqueued, Error, EvictParams, Evicted, FailOutcome, FailParams, HeartbeatParams, Instance,
    Item, ItemId, ItemState, LeaderInfo, LeaderName, LeaderParams, LeaderStatus, Lease, OwnerId,
    PurgeParams, Purged, QueueCounts, QueueName, RecoverParams, Recovered, ReleaseParams,
    RenewOutcome, RenewParams, RequeueParams, ScopeKey, StreamKey, Timestamp, TokenOutcome,
};

use crate::error::STORE;

mod operate;
pub(crate) use operate::{
    discard_ids, is_paused, item_cancel, item_list, lease_list, queue_list, requeue_ids, set_paused,
};

/// An operation's failure: a driver error (classified by the writer) or an answer of
/// the contract (`Conflict`, `InvalidInput`).
#[derive(Debug)]
pub(crate) enum OpError {
    Sql(rusqlite::Error),
    Store(Error),
}

impl From<rusqlite::Error> for OpError {
    fn from(e: rusqlite::Error) -> Self {
        OpError::Sql(e)
    }
}

impl From<Error> for OpError {
    fn from(e: Error) -> Self {
        OpError::Store(e)
    }
}

pub(crate) type OpResult<T> = std::result::Result<T, OpError>;

/// What every operation needs besides its params.
pub(crate) struct Cx<'a> {
    pub(crate) conn: &'a Connection,
    pub(crate) now: Timestamp,
    pub(crate) keep_done: bool,
}

/// The columns [`read_item`] reads, in its order.
macro_rules! item_cols {
    () => {
        "seq, id, queue, payload, stream, scope, dedup_key, priority, run_at, state, attempt, \
         owner, lease_expires_at, renewals, stalls, max_attempts, max_stalls, max_renewals, \
         last_error, created_at, updated_at"
    };
}

const ITEM_COLS: &str = item_cols!();

/// As [`ITEM_COLS`] without the payload, for operations that never return it.
const ITEM_COLS_LEAN: &str = "seq, id, queue, x'' AS payload, stream, scope, dedup_key, \
     priority, run_at, state, attempt, owner, lease_expires_at, renewals, stalls, \
     max_attempts, max_stalls, max_renewals, last_error, created_at, updated_at";

// The statements on the claim path, each pinned to its partial index with INDEXED BY
// (an `ANALYZE` taken at an unlucky moment cannot move them to a scan; the test at the
// bottom checks every plan).

/// The next priority level with a claimable head in a queue (G8).
const SQL_NEXT_LEVEL: &str = "SELECT priority FROM tenure_items INDEXED BY tenure_items_ready
     WHERE queue = ?1 AND state = 'ready' AND head = 1 AND priority > ?2
     ORDER BY priority LIMIT 1";

/// Due heads of one priority level after a key, in claim order (G7, G8, G9).
const SQL_LEVEL_SCAN: &str = concat!(
    "SELECT ",
    item_cols!(),
    " FROM tenure_items INDEXED BY tenure_items_ready
     WHERE queue = ?1 AND state = 'ready' AND head = 1 AND priority = ?2
       AND run_at <= ?3 AND (run_at, seq) > (?4, ?5)
     ORDER BY run_at, seq LIMIT ?6"
);

/// As [`SQL_LEVEL_SCAN`], keeping only the owner's share (G14): heads whose stream is
/// pinned to the owner (`?7`), and unpinned heads (no stream, or a stream without a
/// pin) whose partition `phash % ?8` falls to the owner's rank `?10` among `?9` live
/// instances. A head pinned to another instance fails the pin test and is never taken.
/// The pin is one primary-key probe of `tenure_stream_pins` per candidate.
const SQL_LEVEL_SCAN_PARTITIONED: &str = concat!(
    "SELECT ",
    item_cols!(),
    " FROM tenure_items INDEXED BY tenure_items_ready
     WHERE queue = ?1 AND state = 'ready' AND head = 1 AND priority = ?2
       AND run_at <= ?3 AND (run_at, seq) > (?4, ?5)
       AND coalesce(
             (SELECT p.instance = ?7 FROM tenure_stream_pins p
              WHERE p.stream = tenure_items.stream),
             (phash % ?8) % ?9 = ?10)
     ORDER BY run_at, seq LIMIT ?6"
);

/// The owner's place among the registered instances (G14): how many there are, how
/// many ids sort before it (BINARY collation is byte order), and whether it is one.
const SQL_RANK: &str = "SELECT count(*), count(CASE WHEN id < ?1 THEN 1 END),
         count(CASE WHEN id = ?1 THEN 1 END)
     FROM tenure_instances";

/// Pins a stream to the instance that claimed its head in partitioned mode (G14).
const SQL_PIN: &str = "INSERT INTO tenure_stream_pins (stream, instance) VALUES (?1, ?2)
     ON CONFLICT (stream) DO NOTHING";

/// Drops every pin of an instance that left the registry (G14).
const SQL_UNPIN_INSTANCE: &str =
    "DELETE FROM tenure_stream_pins INDEXED BY tenure_stream_pins_instance WHERE instance = ?1";

/// Is the scope busy (G10)?
const SQL_SCOPE_RUNNING: &str = "SELECT 1 FROM tenure_items INDEXED BY tenure_items_running_scope
     WHERE scope = ?1 AND state = 'running' LIMIT 1";

/// Expired leases, earliest first, of one queue or all (G2).
const SQL_EXPIRED: &str = "SELECT seq FROM tenure_items INDEXED BY tenure_items_expiry
     WHERE state = 'running' AND lease_expires_at <= ?1 AND (?2 IS NULL OR queue = ?2)
     ORDER BY lease_expires_at LIMIT ?3";

/// Does the stream have an unfinished item (G9)?
const SQL_STREAM_BUSY: &str = "SELECT 1 FROM tenure_items INDEXED BY tenure_items_stream
     WHERE stream = ?1 AND state <> 'done' LIMIT 1";

/// Marks the first unfinished item of a stream as its head (G9).
const SQL_PROMOTE: &str = "UPDATE tenure_items SET head = 1
     WHERE seq = (SELECT seq FROM tenure_items INDEXED BY tenure_items_stream
                  WHERE stream = ?1 AND state <> 'done' ORDER BY seq LIMIT 1)
       AND head = 0";

/// The unfinished items right behind a claimed head of a stream, in stream order: the
/// candidates of its run (G9).
const SQL_RUN_BEHIND: &str = concat!(
    "SELECT ",
    item_cols!(),
    " FROM tenure_items INDEXED BY tenure_items_stream
     WHERE stream = ?1 AND seq > ?2 AND stream IS NOT NULL AND state <> 'done'
     ORDER BY seq LIMIT ?3"
);

/// The put-back rule of a stream run (G9), mirroring [`machine::put_back`]: every
/// running item of stream `?1` after `?2` goes back to ready untouched.
const _: () = assert!(
    tenure_core::MAX_STREAM_RUN == 1000,
    "SQL_PUT_BACK_AFTER looks at 1000 items"
);

/// At most the longest run's worth of the stream's next items is looked at, so a long
/// stream costs no more.
const SQL_PUT_BACK_AFTER: &str = "UPDATE tenure_items
     SET state = 'ready', owner = NULL, lease_expires_at = NULL,
         max_attempts = max_attempts + 1, updated_at = ?3
     WHERE seq IN (SELECT seq FROM tenure_items INDEXED BY tenure_items_stream
                   WHERE stream = ?1 AND seq > ?2 AND stream IS NOT NULL AND state <> 'done'
                   ORDER BY seq LIMIT 1000)
       AND state = 'running'";

/// The claim's write of one picked row, guarded on `state = 'ready'` (G1).
const SQL_CLAIM_ONE: &str = "UPDATE tenure_items SET state = 'running', attempt = attempt + 1,
         owner = ?2, lease_expires_at = ?3, renewals = 0, updated_at = ?4
     WHERE seq = ?1 AND state = 'ready'";

/// The longest list [`claim_many_sql`] writes in one statement.
const CLAIM_CHUNK_MAX: usize = 128;

/// How many of `n` picked rows the next claim write takes: a power of two, so a few
/// statements (one per bit of the batch size) serve every batch size from the
/// statement cache.
fn claim_chunk(n: usize) -> usize {
    let n = n.clamp(1, CLAIM_CHUNK_MAX);
    1 << (usize::BITS - 1 - n.leading_zeros())
}

/// The claim's write of `n` picked rows in one statement, each guarded on
/// `state = 'ready'` (G1): owner `?1`, expiry `?2`, time `?3`, then the `n` seqs.
/// One statement opens its cursors (the table and every index the write touches)
/// and finishes once for the whole list, where one statement per row paid that for
/// each row.
///
/// `OR FAIL`: a statement that writes several rows under the default `OR ABORT`
/// keeps a statement journal (a copy of every page it is about to change, so that a
/// constraint failing on a later row can undo the earlier ones), which measured as
/// about 1k instructions per claimed row at 100 per claim. The claim never needs
/// that undo: a failed claim call is undone whole by its caller (the writer rolls
/// back the call's savepoint or transaction; see `run_batch`), so the rows a failing
/// statement already wrote are never kept.
fn claim_many_sql(n: usize) -> String {
    let list: Vec<String> = (4..4 + n).map(|i| format!("?{i}")).collect();
    format!(
        "UPDATE OR FAIL tenure_items SET state = 'running', attempt = attempt + 1,
             owner = ?1, lease_expires_at = ?2, renewals = 0, updated_at = ?3
         WHERE seq IN ({}) AND state = 'ready'",
        list.join(", ")
    )
}

/// The fenced lookup of one token (G3): the row's seq and stream, or no row when the
/// token is not current.
const SQL_COMPLETE_FIND: &str = "SELECT seq, stream FROM tenure_items
     WHERE id = ?1 AND state = 'running' AND attempt = ?2";

/// The fenced complete of one token whose item has no stream (the common case), in
/// one statement: it changes no row when the token is not current or the item has a
/// stream, and [`SQL_COMPLETE_FIND`] then tells the two apart.
const SQL_COMPLETE_UNSTREAMED_DELETE: &str = "DELETE FROM tenure_items
     WHERE id = ?1 AND state = 'running' AND attempt = ?2 AND stream IS NULL";

/// As [`SQL_COMPLETE_UNSTREAMED_DELETE`], keeping the row as `done`.
const SQL_COMPLETE_UNSTREAMED_KEEP: &str = "UPDATE tenure_items SET state = 'done',
         owner = NULL, lease_expires_at = NULL, updated_at = ?3
     WHERE id = ?1 AND state = 'running' AND attempt = ?2 AND stream IS NULL";

/// Deletes one completed row, found by [`SQL_COMPLETE_FIND`].
const SQL_COMPLETE_DELETE: &str = "DELETE FROM tenure_items WHERE seq = ?1";

/// Keeps one completed row as `done` until purged.
const SQL_COMPLETE_KEEP: &str = "UPDATE tenure_items SET state = 'done', owner = NULL,
         lease_expires_at = NULL, updated_at = ?2
     WHERE seq = ?1";

fn corrupt(what: impl std::fmt::Display) -> OpError {
    OpError::Store(Error::internal(STORE, format!("corrupt row: {what}")))
}

fn to_u32(v: i64, col: &str) -> OpResult<u32> {
    u32::try_from(v).map_err(|_| corrupt(format!("{col} = {v}")))
}

fn blob_id(bytes: &[u8]) -> OpResult<ItemId> {
    let arr: [u8; 16] = bytes
        .try_into()
        .map_err(|_| corrupt(format!("id of {} bytes", bytes.len())))?;
    Ok(ItemId::from_uuid(uuid::Uuid::from_bytes(arr)))
}

fn key<T>(v: Option<String>, make: fn(String) -> tenure_core::Result<T>) -> OpResult<Option<T>> {
    v.map(make).transpose().map_err(corrupt)
}

/// Reads one row selected with [`ITEM_COLS`] (or the lean list).
fn read_item(row: &Row<'_>) -> OpResult<(i64, Item)> {
    read_item_of(row, None)
}

/// As [`read_item`]; with `queue`, a row of that queue (as the claim's scan of one
/// queue reads) shares its name instead of copying and checking it again.
fn read_item_of(row: &Row<'_>, queue: Option<&QueueName>) -> OpResult<(i64, Item)> {
    let seq: i64 = row.get(0)?;
    let id = blob_id(row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?)?;
    let state = row.get_ref(9)?.as_str().map_err(rusqlite::Error::from)?;
    let stored_queue = row.get_ref(2)?.as_str().map_err(rusqlite::Error::from)?;
    let queue = match queue {
        Some(q) if q.as_str() == stored_queue => q.clone(),
        _ => QueueName::new(stored_queue).map_err(corrupt)?,
    };
    let item = Item {
        id,
        queue,
        payload: row.get(3)?,
        stream: key(row.get(4)?, StreamKey::new)?,
        scope: key(row.get(5)?, ScopeKey::new)?,
        dedup_key: key(row.get(6)?, DedupKey::new)?,
        priority: i16::try_from(row.get::<_, i64>(7)?).map_err(corrupt)?,
        run_at: Timestamp::from_micros(row.get(8)?),
        state: state.parse().map_err(corrupt)?,
        attempt: to_u32(row.get(10)?, "attempt")?,
        owner: key(row.get(11)?, OwnerId::new)?,
        lease_expires_at: row.get::<_, Option<i64>>(12)?.map(Timestamp::from_micros),
        renewals: to_u32(row.get(13)?, "renewals")?,
        stalls: to_u32(row.get(14)?, "stalls")?,
        max_attempts: to_u32(row.get(15)?, "max_attempts")?,
        max_stalls: to_u32(row.get(16)?, "max_stalls")?,
        max_renewals: to_u32(row.get(17)?, "max_renewals")?,
        last_error: row.get(18)?,
        created_at: Timestamp::from_micros(row.get(19)?),
        updated_at: Timestamp::from_micros(row.get(20)?),
    };
    Ok((seq, item))
}

fn load_lean_by_id(conn: &Connection, id: ItemId) -> OpResult<Option<(i64, Item)>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ITEM_COLS_LEAN} FROM tenure_items WHERE id = ?1"
    ))?;
    let mut rows = stmt.query([&id.as_bytes()[..]])?;
    match rows.next()? {
        Some(row) => Ok(Some(read_item(row)?)),
        None => Ok(None),
    }
}

fn load_lean_by_seq(conn: &Connection, seq: i64) -> OpResult<Option<Item>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ITEM_COLS_LEAN} FROM tenure_items WHERE seq = ?1"
    ))?;
    let mut rows = stmt.query([seq])?;
    match rows.next()? {
        Some(row) => Ok(Some(read_item(row)?.1)),
        None => Ok(None),
    }
}

/// Writes back every field a machine transition may change.
fn store_item(conn: &Connection, seq: i64, item: &Item) -> OpResult<()> {
    let mut stmt = conn.prepare_cached(
        "UPDATE tenure_items SET state = ?2, run_at = ?3, attempt = ?4, owner = ?5,
             lease_expires_at = ?6, renewals = ?7, stalls = ?8, max_attempts = ?9,
             last_error = ?10, updated_at = ?11
         WHERE seq = ?1",
    )?;
    stmt.execute(params![
        seq,
        item.state.as_str(),
        item.run_at.as_micros(),
        item.attempt,
        item.owner.as_ref().map(OwnerId::as_str),
        item.lease_expires_at.map(Timestamp::as_micros),
        item.renewals,
        item.stalls,
        item.max_attempts,
        item.last_error,
        item.updated_at.as_micros(),
    ])?;
    Ok(())
}

/// The put-back rule of a stream run (G9): the item of `stream` at `seq` left
/// `running` unfinished, so the later running items of the stream go back untouched.
fn put_back_after(cx: &Cx<'_>, stream: &str, seq: i64) -> OpResult<()> {
    cx.conn
        .prepare_cached(SQL_PUT_BACK_AFTER)?
        .execute(params![stream, seq, cx.now.as_micros()])?;
    Ok(())
}

/// Makes the first unfinished item of `stream` its head (G9), after the old head
/// completed or was discarded.
fn promote(conn: &Connection, stream: &str) -> OpResult<()> {
    let mut stmt = conn.prepare_cached(SQL_PROMOTE)?;
    stmt.execute([stream])?;
    Ok(())
}

// ---------------------------------------------------------------------------------
// enqueue

/// [`Store::enqueue`](tenure_core::Store::enqueue); mirrors [`machine::enqueue`].
/// The caller validated the params.
pub(crate) fn enqueue(cx: &Cx<'_>, params: &EnqueueParams) -> OpResult<Vec<Enqueued>> {
    let conn = cx.conn;
    let now = cx.now;
    let mut find_dup = conn.prepare_cached(
        "SELECT item_id FROM tenure_dedup WHERE queue = ?1 AND key = ?2 AND expires_at > ?3",
    )?;
    let mut stream_busy = conn.prepare_cached(SQL_STREAM_BUSY)?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO tenure_items (id, queue, payload, stream, scope, dedup_key, priority,
             run_at, state, head, attempt, owner, lease_expires_at, renewals, stalls,
             max_attempts, max_stalls, max_renewals, last_error, created_at, updated_at, phash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'ready', ?9, 0, NULL, NULL, 0, 0,
             ?10, ?11, ?12, NULL, ?13, ?13, ?14)",
    )?;
    let mut record_key = conn.prepare_cached(
        "INSERT INTO tenure_dedup (queue, key, item_id, recorded_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (queue, key) DO UPDATE SET item_id = excluded.item_id,
             recorded_at = excluded.recorded_at, expires_at = excluded.expires_at",
    )?;
    // G14: pinning at enqueue needs a registered instance; checked before any write.
    let mut pin = match &params.pin_to {
        Some(who) => {
            let registered: i64 = conn
                .prepare_cached(SQL_RANK)?
                .query_row([who.as_str()], |r| r.get(2))?;
            if registered == 0 {
                return Err(Error::not_found("instance", who.to_string()).into());
            }
            Some((conn.prepare_cached(SQL_PIN)?, who.as_str()))
        }
        None => None,
    };
    let mut out = Vec::with_capacity(params.items.len());
    for new in &params.items {
        if let Some(dk) = &new.dedup_key {
            let existing: Option<Vec<u8>> = find_dup
                .query_row(
                    params![new.queue.as_str(), dk.as_str(), now.as_micros()],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(bytes) = existing {
                out.push(Enqueued {
                    id: blob_id(&bytes)?,
                    duplicate: true,
                });
                continue;
            }
        }
        let item = machine::enqueue(new, now);
        let head = match &item.stream {
            None => true,
            Some(s) => !stream_busy.exists([s.as_str()])?,
        };
        let inserted = insert.execute(params![
            &item.id.as_bytes()[..],
            item.queue.as_str(),
            item.payload,
            item.stream.as_ref().map(StreamKey::as_str),
            item.scope.as_ref().map(ScopeKey::as_str),
            item.dedup_key.as_ref().map(DedupKey::as_str),
            item.priority,
            item.run_at.as_micros(),
            head,
            item.max_attempts,
            item.max_stalls,
            item.max_renewals,
            now.as_micros(),
            key_hash(item.stream.as_ref(), item.id),
        ]);
        match inserted {
            Ok(_) => {}
            Err(e) if crate::error::code(&e) == Some(rusqlite::ErrorCode::ConstraintViolation) => {
                return Err(
                    Error::conflict("item", format!("item {} already exists", item.id)).into(),
                )
            }
            Err(e) => return Err(e.into()),
        }
        if let (Some((pin, who)), Some(stream)) = (pin.as_mut(), &item.stream) {
            // First write wins: a stream pinned already keeps its pin.
            pin.execute([stream.as_str(), *who])?;
        }
        if let Some(dk) = &new.dedup_key {
            record_key.execute(params![
                new.queue.as_str(),
                dk.as_str(),
                &item.id.as_bytes()[..],
                now.as_micros(),
                (now + new.dedup_window).as_micros(),
            ])?;
        }
        out.push(Enqueued {
            id: item.id,
            duplicate: false,
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------
// claim

/// A claimable head found in the ready index.
struct Candidate {
    seq: i64,
    item: Item,
}

impl Candidate {
    fn order(&self) -> (i16, Timestamp, i64) {
        (self.item.priority, self.item.run_at, self.seq)
    }
}

/// The owner's share of a partitioned claim (G14).
struct Share<'a> {
    owner: &'a str,
    partitions: i64,
    live: i64,
    rank: i64,
}

impl<'a> Share<'a> {
    /// Ranks `owner` among the registered instances, or answers `NotFound` when it is
    /// not one (before anything is written, recovery included).
    fn of(conn: &Connection, owner: &'a OwnerId, partitions: u32) -> OpResult<Self> {
        let (live, rank, registered): (i64, i64, i64) = conn
            .prepare_cached(SQL_RANK)?
            .query_row([owner.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        if registered == 0 {
            return Err(Error::NotFound {
                what: "instance",
                id: owner.to_string(),
            }
            .into());
        }
        Ok(Share {
            owner: owner.as_str(),
            partitions: i64::from(partitions.max(1)),
            live,
            rank,
        })
    }
}

/// Walks one queue's due heads in claim order (G8), a priority level at a time, so
/// items scheduled for later never have to be stepped over: within a level the ready
/// index is ordered by `run_at`, and the scan of a level stops at `now`. With a
/// [`Share`] it walks the same index and keeps only the owner's share.
struct QueueCursor<'q> {
    queue: &'q QueueName,
    share: Option<&'q Share<'q>>,
    buf: VecDeque<Candidate>,
    level: Option<i64>,
    after: (i64, i64),
    level_exhausted: bool,
    done: bool,
}

impl<'q> QueueCursor<'q> {
    fn new(queue: &'q QueueName, share: Option<&'q Share<'q>>) -> Self {
        QueueCursor {
            queue,
            share,
            buf: VecDeque::new(),
            level: None,
            after: (i64::MIN, i64::MIN),
            level_exhausted: true,
            done: false,
        }
    }

    fn refill(&mut self, conn: &Connection, now: Timestamp, want: usize) -> OpResult<()> {
        while self.buf.is_empty() && !self.done {
            if self.level_exhausted {
                let mut next = conn.prepare_cached(SQL_NEXT_LEVEL)?;
                let from = self.level.unwrap_or(i64::MIN);
                match next
                    .query_row(params![self.queue.as_str(), from], |r| r.get::<_, i64>(0))
                    .optional()?
                {
                    Some(p) => {
                        self.level = Some(p);
                        self.after = (i64::MIN, i64::MIN);
                        self.level_exhausted = false;
                    }
                    None => {
                        self.done = true;
                        break;
                    }
                }
            }
            let Some(level) = self.level else { break };
            let limit = i64::try_from(want.max(1)).unwrap_or(i64::MAX);
            let mut stmt;
            let mut rows = match self.share {
                None => {
                    stmt = conn.prepare_cached(SQL_LEVEL_SCAN)?;
                    stmt.query(params![
                        self.queue.as_str(),
                        level,
                        now.as_micros(),
                        self.after.0,
                        self.after.1,
                        limit
                    ])?
                }
                Some(share) => {
                    stmt = conn.prepare_cached(SQL_LEVEL_SCAN_PARTITIONED)?;
                    stmt.query(params![
                        self.queue.as_str(),
                        level,
                        now.as_micros(),
                        self.after.0,
                        self.after.1,
                        limit,
                        share.owner,
                        share.partitions,
                        share.live,
                        share.rank,
                    ])?
                }
            };
            let mut got = 0usize;
            while let Some(row) = rows.next()? {
                let (seq, item) = read_item_of(row, Some(self.queue))?;
                self.after = (item.run_at.as_micros(), seq);
                self.buf.push_back(Candidate { seq, item });
                got += 1;
            }
            if got < want.max(1) {
                self.level_exhausted = true;
            }
        }
        Ok(())
    }
}

/// Recovers expired leases of `queue` (or of every queue), at most `limit`; mirrors
/// [`machine::recover`].
fn recover_where(
    cx: &Cx<'_>,
    queue: Option<&str>,
    limit: u32,
    counts: &mut Recovered,
) -> OpResult<()> {
    let conn = cx.conn;
    let mut seqs: Vec<i64> = {
        let mut stmt = conn.prepare_cached(SQL_EXPIRED)?;
        let rows = stmt.query_map(params![cx.now.as_micros(), queue, limit], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    // In enqueue order, so the head of an expired stream run is recovered first and the
    // items behind it are put back untouched, not recovered (G9).
    seqs.sort_unstable();
    for seq in seqs {
        let Some(mut item) = load_lean_by_seq(conn, seq)? else {
            continue;
        };
        match machine::recover(&mut item, cx.now) {
            Some(Recovery::Requeued) => counts.requeued += 1,
            Some(Recovery::Dead) => counts.dead += 1,
            None => continue,
        }
        store_item(conn, seq, &item)?;
        if let Some(stream) = &item.stream {
            put_back_after(cx, stream.as_str(), seq)?;
        }
    }
    Ok(())
}

/// Adds to `picked` the items right behind the just-picked head of `stream` at
/// `head_seq`, at most `room`, while each is ready, due, in one of the claim's queues
/// and free of a busy scope (G9, G10).
fn extend_run(
    cx: &Cx<'_>,
    params: &ClaimParams,
    (stream, head_seq, room): (&str, i64, usize),
    busy: &mut HashSet<String>,
    picked: &mut Vec<Candidate>,
) -> OpResult<()> {
    if room == 0 {
        return Ok(());
    }
    let conn = cx.conn;
    let mut behind = conn.prepare_cached(SQL_RUN_BEHIND)?;
    let mut scope_running = conn.prepare_cached(SQL_SCOPE_RUNNING)?;
    let mut rows = behind.query(params![
        stream,
        head_seq,
        i64::try_from(room).unwrap_or(i64::MAX)
    ])?;
    while let Some(row) = rows.next()? {
        let (seq, item) = read_item(row)?;
        if !machine::is_due(&item, cx.now) || !params.queues.contains(&item.queue) {
            break;
        }
        if let Some(scope) = &item.scope {
            if busy.contains(scope.as_str()) || scope_running.exists([scope.as_str()])? {
                break;
            }
            busy.insert(scope.as_str().to_owned());
        }
        picked.push(Candidate { seq, item });
    }
    Ok(())
}

/// [`Store::claim`](tenure_core::Store::claim); mirrors [`machine::claim`] plus the
/// collection rules (stream head, scope, order) and, with
/// [`ClaimParams::partitioning`], the owner's share and its stream pins (G14).
pub(crate) fn claim(cx: &Cx<'_>, params: &ClaimParams) -> OpResult<Vec<Lease>> {
    let conn = cx.conn;
    let now = cx.now;
    // G14: the owner must be registered; checked before recovery writes anything.
    let share = match &params.partitioning {
        Some(p) => Some(Share::of(conn, &params.owner, p.partitions)?),
        None => None,
    };
    let mut queues: Vec<&QueueName> = params.queues.iter().collect();
    queues.sort_unstable();
    queues.dedup();

    // G2/G6: expired leases of these queues first, exactly as recover_expired.
    let mut recovered = Recovered::default();
    for q in &queues {
        recover_where(cx, Some(q.as_str()), u32::MAX, &mut recovered)?;
    }
    // A paused queue's items are not claimed (its expired leases are still recovered).
    let mut open = Vec::with_capacity(queues.len());
    for q in queues {
        if !is_paused(cx, q.as_str())? {
            open.push(q);
        }
    }
    let queues = open;

    let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
    let mut cursors: Vec<QueueCursor<'_>> = queues
        .iter()
        .map(|q| QueueCursor::new(q, share.as_ref()))
        .collect();
    let mut scope_running = conn.prepare_cached(SQL_SCOPE_RUNNING)?;
    // Scopes known busy: running before this claim, or taken earlier in this batch (G10).
    let mut busy: HashSet<String> = HashSet::new();
    let mut picked: Vec<Candidate> = Vec::with_capacity(limit.min(1024));
    let run = usize::try_from(params.stream_run).unwrap_or(1);
    while picked.len() < limit {
        let want = limit - picked.len();
        for c in cursors.iter_mut() {
            c.refill(conn, now, want)?;
        }
        let best = cursors
            .iter_mut()
            .filter(|c| !c.buf.is_empty())
            .min_by_key(|c| c.buf.front().map(Candidate::order));
        let Some(cand) = best.and_then(|c| c.buf.pop_front()) else {
            break;
        };
        if let Some(scope) = &cand.item.scope {
            if busy.contains(scope.as_str()) || scope_running.exists([scope.as_str()])? {
                busy.insert(scope.as_str().to_owned());
                continue;
            }
            busy.insert(scope.as_str().to_owned());
        }
        let head = cand.item.stream.clone().filter(|_| run > 1);
        let head_seq = cand.seq;
        picked.push(cand);
        if let Some(stream) = head {
            let room = run.min(limit - picked.len() + 1) - 1;
            extend_run(
                cx,
                params,
                (stream.as_str(), head_seq, room),
                &mut busy,
                &mut picked,
            )?;
        }
    }

    // machine::claim on each loaded row, then the same change written for the whole
    // batch in one statement under the `state = 'ready'` guard.
    let mut leases = Vec::with_capacity(picked.len());
    let mut seqs = Vec::with_capacity(picked.len());
    let mut pin = match share {
        Some(_) => Some(conn.prepare_cached(SQL_PIN)?),
        None => None,
    };
    for Candidate { seq, mut item } in picked {
        if machine::claim(&mut item, &params.owner, now, params.lease_for) {
            // G14: a claimed stream stays with the owner (a no-op when it already is).
            if let (Some(pin), Some(stream)) = (pin.as_mut(), &item.stream) {
                pin.execute([stream.as_str(), params.owner.as_str()])?;
            }
            seqs.push(seq);
            leases.push(Lease::from_item(item)?);
        }
    }
    if seqs.is_empty() {
        return Ok(leases);
    }
    let (owner, expires, at) = (
        params.owner.as_str(),
        (now + params.lease_for).as_micros(),
        now.as_micros(),
    );
    let mut changed = 0;
    let mut rest = &seqs[..];
    while !rest.is_empty() {
        let (chunk, after) = rest.split_at(claim_chunk(rest.len()));
        changed += if chunk.len() == 1 {
            conn.prepare_cached(SQL_CLAIM_ONE)?
                .execute(params![chunk[0], owner, expires, at])?
        } else {
            let mut update = conn.prepare_cached(&claim_many_sql(chunk.len()))?;
            update.raw_bind_parameter(1, owner)?;
            update.raw_bind_parameter(2, expires)?;
            update.raw_bind_parameter(3, at)?;
            for (i, seq) in chunk.iter().enumerate() {
                update.raw_bind_parameter(i + 4, seq)?;
            }
            update.raw_execute()?
        };
        rest = after;
    }
    if changed != seqs.len() {
        return Err(Error::internal(
            STORE,
            format!(
                "claim changed {changed} rows for {} picked items",
                seqs.len()
            ),
        )
        .into());
    }
    Ok(leases)
}

/// [`Store::renew`](tenure_core::Store::renew); mirrors [`machine::renew`]: the fenced
/// row is read, the cap checked, and the new expiry written by seq.
pub(crate) fn renew(cx: &Cx<'_>, params: &RenewParams) -> OpResult<Vec<RenewOutcome>> {
    let conn = cx.conn;
    let now = cx.now.as_micros();
    let expires = (cx.now + params.lease_for).as_micros();
    let mut find = conn.prepare_cached(
        "SELECT seq, renewals, max_renewals FROM tenure_items
         WHERE id = ?1 AND state = 'running' AND attempt = ?2",
    )?;
    let mut extend = conn.prepare_cached(
        "UPDATE tenure_items SET lease_expires_at = ?2, renewals = ?3, updated_at = ?4
         WHERE seq = ?1",
    )?;
    let mut out = Vec::with_capacity(params.tokens.len());
    for t in &params.tokens {
        let row: Option<(i64, i64, i64)> = find
            .query_row(params![&t.id.as_bytes()[..], t.attempt], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        out.push(match row {
            None => RenewOutcome::LeaseLost,
            Some((_, renewals, limit)) if renewals >= limit => RenewOutcome::LimitReached {
                limit: to_u32(limit, "max_renewals")?,
            },
            Some((seq, renewals, _)) => {
                extend.execute(params![seq, expires, renewals + 1, now])?;
                RenewOutcome::Renewed {
                    expires_at: Timestamp::from_micros(expires),
                    renewals: to_u32(renewals + 1, "renewals")?,
                }
            }
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------
// finalize

/// [`Store::complete`](tenure_core::Store::complete); mirrors [`machine::complete`]
/// (then deletes the row unless finished items are kept) and moves the stream head.
pub(crate) fn complete(cx: &Cx<'_>, params: &CompleteParams) -> OpResult<Vec<TokenOutcome>> {
    let conn = cx.conn;
    // One fenced write by id per token of an unstreamed item; a streamed one (or a
    // token not current) falls to a lookup, then a write by rowid. A `DELETE ..
    // RETURNING stream` would buffer its row in a temporary b-tree on every call,
    // which costs more than the lookup.
    let mut direct = conn.prepare_cached(if cx.keep_done {
        SQL_COMPLETE_UNSTREAMED_KEEP
    } else {
        SQL_COMPLETE_UNSTREAMED_DELETE
    })?;
    let mut find = conn.prepare_cached(SQL_COMPLETE_FIND)?;
    let mut finish = conn.prepare_cached(if cx.keep_done {
        SQL_COMPLETE_KEEP
    } else {
        SQL_COMPLETE_DELETE
    })?;
    let mut out = Vec::with_capacity(params.tokens.len());
    let mut streams = Vec::new();
    for t in &params.tokens {
        let id = &t.id.as_bytes()[..];
        let done = if cx.keep_done {
            direct.execute(params![id, t.attempt, cx.now.as_micros()])?
        } else {
            direct.execute(params![id, t.attempt])?
        };
        if done == 1 {
            out.push(TokenOutcome::Accepted);
            continue;
        }
        // A streamed item (which moves its stream's head), or a token not current.
        let row: Option<(i64, Option<String>)> = find
            .query_row(params![id, t.attempt], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let Some((seq, stream)) = row else {
            out.push(TokenOutcome::LeaseLost);
            continue;
        };
        if cx.keep_done {
            finish.execute(params![seq, cx.now.as_micros()])?;
        } else {
            finish.execute([seq])?;
        }
        streams.extend(stream);
        out.push(TokenOutcome::Accepted);
    }
    for s in &streams {
        promote(conn, s)?;
    }
    Ok(out)
}

/// [`Store::fail`](tenure_core::Store::fail); applies [`machine::fail`] itself.
pub(crate) fn fail(cx: &Cx<'_>, params: &FailParams) -> OpResult<Vec<FailOutcome>> {
    let mut out = Vec::with_capacity(params.failures.len());
    for f in &params.failures {
        let Some((seq, mut item)) = load_lean_by_id(cx.conn, f.token.id)? else {
            out.push(FailOutcome::LeaseLost);
            continue;
        };
        let outcome = machine::fail(&mut item, f, cx.now);
        if outcome != FailOutcome::LeaseLost {
            store_item(cx.conn, seq, &item)?;
            if let Some(stream) = &item.stream {
                put_back_after(cx, stream.as_str(), seq)?;
            }
        }
        out.push(outcome);
    }
    Ok(out)
}

/// [`Store::release`](tenure_core::Store::release); mirrors [`machine::release`].
pub(crate) fn release(cx: &Cx<'_>, params: &ReleaseParams) -> OpResult<Vec<TokenOutcome>> {
    let mut stmt = cx.conn.prepare_cached(
        "UPDATE tenure_items SET state = 'ready', run_at = ?3, owner = NULL,
             lease_expires_at = NULL, updated_at = ?3, max_attempts = max_attempts + 1
         WHERE id = ?1 AND state = 'running' AND attempt = ?2
         RETURNING seq, stream",
    )?;
    let mut out = Vec::with_capacity(params.tokens.len());
    for t in &params.tokens {
        let row: Option<(i64, Option<String>)> = stmt
            .query_row(
                params![&t.id.as_bytes()[..], t.attempt, cx.now.as_micros()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        out.push(match row {
            Some((seq, stream)) => {
                if let Some(stream) = stream {
                    put_back_after(cx, &stream, seq)?;
                }
                TokenOutcome::Accepted
            }
            None => TokenOutcome::LeaseLost,
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------
// maintenance

/// [`Store::recover_expired`](tenure_core::Store::recover_expired).
pub(crate) fn recover_expired(cx: &Cx<'_>, params: &RecoverParams) -> OpResult<Recovered> {
    let mut counts = Recovered::default();
    recover_where(cx, None, params.limit, &mut counts)?;
    Ok(counts)
}

/// [`Store::purge`](tenure_core::Store::purge).
pub(crate) fn purge(cx: &Cx<'_>, params: &PurgeParams) -> OpResult<Purged> {
    let conn = cx.conn;
    let cutoff = (cx.now - params.keep_done_for).as_micros();
    let items = conn
        .prepare_cached(
            "DELETE FROM tenure_items WHERE seq IN (
             SELECT seq FROM tenure_items WHERE state = 'done' AND updated_at <= ?1 LIMIT ?2)",
        )?
        .execute(params![cutoff, params.limit])?;
    let keys = conn
        .prepare_cached(
            "DELETE FROM tenure_dedup WHERE (queue, key) IN (
             SELECT queue, key FROM tenure_dedup WHERE expires_at <= ?1 LIMIT ?2)",
        )?
        .execute(params![cx.now.as_micros(), params.limit])?;
    // G14: forget pins of streams with no unfinished item left (a later item of the
    // stream goes by its partition again), and any pin whose instance is no longer
    // registered (eviction drops those already; this only guards the table).
    conn.prepare_cached(
        "DELETE FROM tenure_stream_pins WHERE stream IN (
         SELECT p.stream FROM tenure_stream_pins p
         WHERE NOT EXISTS (SELECT 1 FROM tenure_items INDEXED BY tenure_items_stream
                           WHERE tenure_items.stream = p.stream AND state <> 'done')
            OR NOT EXISTS (SELECT 1 FROM tenure_instances i WHERE i.id = p.instance)
         LIMIT ?1)",
    )?
    .execute([params.limit])?;
    Ok(Purged {
        items: items as u64,
        dedup_keys: keys as u64,
    })
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

// ---------------------------------------------------------------------------------
// reads

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

// ---------------------------------------------------------------------------------
// instances

/// [`Store::instance_heartbeat`](tenure_core::Store::instance_heartbeat).
pub(crate) fn instance_heartbeat(cx: &Cx<'_>, params: &HeartbeatParams) -> OpResult<()> {
    cx.conn
        .prepare_cached(
            "INSERT INTO tenure_instances (id, started_at, last_seen) VALUES (?1, ?2, ?2)
             ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen",
        )?
        .execute(params![params.instance.as_str(), cx.now.as_micros()])?;
    Ok(())
}

/// [`Store::instance_list`](tenure_core::Store::instance_list).
pub(crate) fn instance_list(cx: &Cx<'_>) -> OpResult<Vec<Instance>> {
    let mut stmt = cx.conn.prepare_cached(
        "SELECT id, started_at, last_seen FROM tenure_instances ORDER BY started_at, rowid",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, started, seen) = row?;
        out.push(Instance {
            id: OwnerId::new(id).map_err(corrupt)?,
            started_at: Timestamp::from_micros(started),
            last_seen: Timestamp::from_micros(seen),
        });
    }
    Ok(out)
}

/// [`Store::instance_evict_stale`](tenure_core::Store::instance_evict_stale); each
/// lease of an evicted instance goes through [`machine::evict`].
pub(crate) fn instance_evict_stale(cx: &Cx<'_>, params: &EvictParams) -> OpResult<Evicted> {
    let conn = cx.conn;
    let cutoff = (cx.now - params.stale_after).as_micros();
    let stale: Vec<String> = {
        let mut stmt = conn.prepare_cached(
            "SELECT id FROM tenure_instances WHERE last_seen <= ?1 ORDER BY started_at, rowid",
        )?;
        let rows = stmt.query_map([cutoff], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut evicted = Evicted::default();
    for id in stale {
        conn.prepare_cached("DELETE FROM tenure_instances WHERE id = ?1")?
            .execute([&id])?;
        evicted.released += release_owner(cx, &id)?;
        unpin_instance(conn, &id)?;
        evicted.instances.push(OwnerId::new(id).map_err(corrupt)?);
    }
    Ok(evicted)
}

/// [`Store::instance_deregister`](tenure_core::Store::instance_deregister).
pub(crate) fn instance_deregister(cx: &Cx<'_>, params: &DeregisterParams) -> OpResult<Evicted> {
    let id = params.instance.as_str();
    let removed = cx
        .conn
        .prepare_cached("DELETE FROM tenure_instances WHERE id = ?1")?
        .execute([id])?;
    let released = release_owner(cx, id)?;
    unpin_instance(cx.conn, id)?;
    Ok(Evicted {
        released,
        instances: if removed == 1 {
            vec![params.instance.clone()]
        } else {
            Vec::new()
        },
    })
}

/// Drops every stream pin of an instance that left the registry (G14), so its streams
/// go by partition again.
fn unpin_instance(conn: &Connection, instance: &str) -> OpResult<()> {
    conn.prepare_cached(SQL_UNPIN_INSTANCE)?
        .execute([instance])?;
    Ok(())
}

/// Applies [`machine::evict`] to every running item of `owner`; returns how many.
fn release_owner(cx: &Cx<'_>, owner: &str) -> OpResult<u64> {
    let conn = cx.conn;
    let mut seqs: Vec<i64> = {
        let mut stmt = conn.prepare_cached(
            "SELECT seq FROM tenure_items INDEXED BY tenure_items_expiry
             WHERE state = 'running' AND owner = ?1",
        )?;
        let rows = stmt.query_map([owner], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    // In enqueue order: the head of a stream run is evicted, the items behind it are
    // put back untouched (G9).
    seqs.sort_unstable();
    let mut released = 0;
    for seq in seqs {
        let Some(mut item) = load_lean_by_seq(conn, seq)? else {
            continue;
        };
        if machine::evict(&mut item, cx.now).is_some() {
            store_item(conn, seq, &item)?;
            released += 1;
            if let Some(stream) = &item.stream {
                put_back_after(cx, stream.as_str(), seq)?;
            }
        }
    }
    Ok(released)
}

// ---------------------------------------------------------------------------------
// leader

/// [`Store::leader_acquire`](tenure_core::Store::leader_acquire).
pub(crate) fn leader_acquire(cx: &Cx<'_>, params: &LeaderParams) -> OpResult<LeaderStatus> {
    let conn = cx.conn;
    let now = cx.now.as_micros();
    let expires = (cx.now + params.lease_for).as_micros();
    let current: Option<(Option<String>, i64, i64)> = conn
        .prepare_cached("SELECT holder, term, expires_at FROM tenure_leaders WHERE name = ?1")?
        .query_row([params.name.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    let me = params.holder.as_str();
    let term = match current {
        Some((Some(holder), term, until)) if until > now => {
            if holder == me {
                term
            } else {
                return Ok(LeaderStatus::Follower {
                    holder: OwnerId::new(holder).map_err(corrupt)?,
                    term: u64::try_from(term).map_err(corrupt)?,
                    expires_at: Timestamp::from_micros(until),
                });
            }
        }
        Some((_, term, _)) => term + 1,
        None => 1,
    };
    conn.prepare_cached(
        "INSERT INTO tenure_leaders (name, holder, term, expires_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, term = excluded.term,
             expires_at = excluded.expires_at",
    )?
    .execute(params![params.name.as_str(), me, term, expires])?;
    Ok(LeaderStatus::Leader {
        term: u64::try_from(term).map_err(corrupt)?,
        expires_at: Timestamp::from_micros(expires),
    })
}

/// [`Store::leader_get`](tenure_core::Store::leader_get): the live holder, read only.
pub(crate) fn leader_get(cx: &Cx<'_>, name: &LeaderName) -> OpResult<Option<LeaderInfo>> {
    let row: Option<(String, i64, i64)> = cx
        .conn
        .prepare_cached(
            "SELECT holder, term, expires_at FROM tenure_leaders
             WHERE name = ?1 AND holder IS NOT NULL AND expires_at > ?2",
        )?
        .query_row(params![name.as_str(), cx.now.as_micros()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    row.map(|(holder, term, until)| {
        Ok(LeaderInfo::new(
            OwnerId::new(holder).map_err(corrupt)?,
            u64::try_from(term).map_err(corrupt)?,
            Timestamp::from_micros(until),
        ))
    })
    .transpose()
}

/// [`Store::leader_resign`](tenure_core::Store::leader_resign): the term stays.
pub(crate) fn leader_resign(cx: &Cx<'_>, params: &LeaderParams) -> OpResult<bool> {
    let n = cx
        .conn
        .prepare_cached(
            "UPDATE tenure_leaders SET holder = NULL, expires_at = ?3
             WHERE name = ?1 AND holder = ?2 AND expires_at > ?3",
        )?
        .execute(params![
            params.name.as_str(),
            params.holder.as_str(),
            cx.now.as_micros()
        ])?;
    Ok(n == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(conn: &Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
        let rows = stmt
            .query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
            .unwrap();
        rows.map(Result::unwrap).collect::<Vec<_>>().join(" | ")
    }

    #[test]
    fn claim_path_statements_read_their_partial_indexes_without_sorting() {
        let conn = Connection::open_in_memory().unwrap();
        crate::schema::create_all(&conn).unwrap();
        for (sql, index) in [
            (SQL_NEXT_LEVEL, "tenure_items_ready"),
            (SQL_LEVEL_SCAN, "tenure_items_ready"),
            (SQL_LEVEL_SCAN_PARTITIONED, "tenure_items_ready"),
            (SQL_UNPIN_INSTANCE, "tenure_stream_pins_instance"),
            (SQL_SCOPE_RUNNING, "tenure_items_running_scope"),
            (SQL_EXPIRED, "tenure_items_expiry"),
            (SQL_STREAM_BUSY, "tenure_items_stream"),
            (SQL_PROMOTE, "tenure_items_stream"),
        ] {
            let p = plan(&conn, sql);
            assert!(p.contains(index), "{sql}: {p}");
            assert!(!p.contains("TEMP B-TREE"), "{sql} sorts: {p}");
        }
        // The level scans seek on (queue, priority) and range over run_at.
        for sql in [SQL_LEVEL_SCAN, SQL_LEVEL_SCAN_PARTITIONED] {
            let p = plan(&conn, sql);
            assert!(p.contains("queue=? AND priority=?"), "{p}");
        }
        // The partitioned scan probes a candidate's pin by the pins' primary key.
        let p = plan(&conn, SQL_LEVEL_SCAN_PARTITIONED);
        assert!(
            p.contains("SEARCH p USING PRIMARY KEY (stream=?)"),
            "the pin probe: {p}"
        );
        // The rank reads the instances through their unique id index, sorting nothing.
        let p = plan(&conn, SQL_RANK);
        assert!(!p.contains("TEMP B-TREE"), "{p}");
    }

    /// The per-row writes of the hot path build no temporary b-tree: the state check
    /// is comparisons, not an `IN` list (schema version 3).
    #[test]
    fn hot_writes_open_no_temporary_btree() {
        let conn = Connection::open_in_memory().unwrap();
        crate::schema::create_all(&conn).unwrap();
        for sql in [
            SQL_CLAIM_ONE,
            SQL_COMPLETE_KEEP,
            SQL_COMPLETE_DELETE,
            SQL_COMPLETE_UNSTREAMED_DELETE,
            SQL_COMPLETE_UNSTREAMED_KEEP,
        ] {
            let mut stmt = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
            let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
            let ops: Vec<String> = stmt
                .query_map(rusqlite::params_from_iter(nulls), |r| r.get(1))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(!ops.iter().any(|o| o == "OpenEphemeral"), "{sql}: {ops:?}");
        }
        // The claim's write of a list holds the list in one temporary table per
        // statement, not one per row.
        let sql = claim_many_sql(64);
        let mut stmt = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
        let ops: Vec<String> = stmt
            .query_map(rusqlite::params_from_iter(nulls), |r| r.get(1))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let ephemeral = ops.iter().filter(|o| *o == "OpenEphemeral").count();
        assert_eq!(ephemeral, 1, "{ops:?}");
    }

    /// The claim's list write runs `OR FAIL` (no statement journal): a constraint
    /// failing on a later row keeps the earlier rows' changes until the caller undoes
    /// the call, and undoing the call's savepoint, as the writer does with every
    /// failed call, leaves every row as it was.
    #[test]
    fn a_claim_write_failing_part_way_is_undone_whole_with_its_call() {
        let conn = Connection::open_in_memory().unwrap();
        crate::schema::create_all(&conn).unwrap();
        for (seq, id) in [(1i64, [1u8; 16]), (2, [2u8; 16])] {
            conn.execute(
                "INSERT INTO tenure_items (seq, id, queue, payload, scope, priority, run_at,
                     state, head, attempt, renewals, stalls, max_attempts, max_stalls,
                     max_renewals, created_at, updated_at, phash)
                 VALUES (?1, ?2, 'q', x'', 'one scope', 0, 0, 'ready', 1, 0, 0, 0, 3, 3, 3,
                     0, 0, 0)",
                params![seq, &id[..]],
            )
            .unwrap();
        }
        let states = |conn: &Connection| -> Vec<(String, i64)> {
            let mut stmt = conn
                .prepare("SELECT state, attempt FROM tenure_items ORDER BY seq")
                .unwrap();
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            rows.map(Result::unwrap).collect()
        };
        conn.execute_batch("BEGIN IMMEDIATE; SAVEPOINT tenure_call")
            .unwrap();
        let sql = claim_many_sql(2);
        let failed = conn.execute(&sql, params!["w", 10, 1, 1, 2]);
        let e = failed.unwrap_err();
        assert_eq!(
            crate::error::code(&e),
            Some(rusqlite::ErrorCode::ConstraintViolation),
            "{e}"
        );
        // OR FAIL keeps the row written before the failure, inside the call.
        assert_eq!(
            states(&conn),
            vec![("running".to_owned(), 1), ("ready".to_owned(), 0)]
        );
        conn.execute_batch("ROLLBACK TO tenure_call; RELEASE tenure_call; COMMIT")
            .unwrap();
        assert_eq!(
            states(&conn),
            vec![("ready".to_owned(), 0), ("ready".to_owned(), 0)]
        );
    }

    /// A batch of picked rows is written in power-of-two chunks of at most
    /// [`CLAIM_CHUNK_MAX`], so every batch size uses a few cached statements.
    #[test]
    fn claim_writes_go_in_power_of_two_chunks() {
        let chunks = |mut n: usize| {
            let mut out = Vec::new();
            while n > 0 {
                let c = claim_chunk(n);
                out.push(c);
                n -= c;
            }
            out
        };
        assert_eq!(chunks(1), vec![1]);
        assert_eq!(chunks(100), vec![64, 32, 4]);
        assert_eq!(chunks(300), vec![128, 128, 32, 8, 4]);
        assert_eq!(chunks(1000).iter().sum::<usize>(), 1000);
    }

    /// The planner's statistics of a 1,000,000-row queue (999,000 ready, 1,000
    /// running) move no hot statement off its index: the claim path stays on its
    /// partial indexes without sorting, the fenced lookup on the id index, and every
    /// per-row write on the rowid. (The stats are written into `sqlite_stat1`, as
    /// `ANALYZE` of such a table would leave them, and reloaded.)
    #[test]
    fn a_million_row_queue_keeps_every_hot_statement_on_its_index() {
        let conn = Connection::open_in_memory().unwrap();
        crate::schema::create_all(&conn).unwrap();
        conn.execute_batch(
            "ANALYZE;
             DELETE FROM sqlite_stat1;
             INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
               ('tenure_items', NULL, '1000000'),
               ('tenure_items', 'sqlite_autoindex_tenure_items_1', '1000000 1'),
               ('tenure_items', 'tenure_items_ready', '999000 999000 999000 1 1'),
               ('tenure_items', 'tenure_items_expiry', '1000 1'),
               ('tenure_items', 'tenure_items_running_scope', '1 1'),
               ('tenure_items', 'tenure_items_stream', '1 1 1'),
               ('tenure_items', 'tenure_items_done', '1 1');
             ANALYZE sqlite_schema;",
        )
        .unwrap();
        let many = claim_many_sql(64);
        for (sql, index) in [
            (SQL_NEXT_LEVEL, "tenure_items_ready"),
            (SQL_LEVEL_SCAN, "tenure_items_ready"),
            (SQL_LEVEL_SCAN_PARTITIONED, "tenure_items_ready"),
            (SQL_SCOPE_RUNNING, "tenure_items_running_scope"),
            (SQL_EXPIRED, "tenure_items_expiry"),
            (SQL_STREAM_BUSY, "tenure_items_stream"),
            (SQL_PROMOTE, "tenure_items_stream"),
            (
                SQL_COMPLETE_FIND,
                "USING INDEX sqlite_autoindex_tenure_items_1 (id=?)",
            ),
            (
                SQL_COMPLETE_UNSTREAMED_DELETE,
                "USING INDEX sqlite_autoindex_tenure_items_1 (id=?)",
            ),
            (
                SQL_COMPLETE_UNSTREAMED_KEEP,
                "USING INDEX sqlite_autoindex_tenure_items_1 (id=?)",
            ),
            (SQL_CLAIM_ONE, "USING INTEGER PRIMARY KEY (rowid=?)"),
            (many.as_str(), "USING INTEGER PRIMARY KEY (rowid=?)"),
            (SQL_COMPLETE_DELETE, "USING INTEGER PRIMARY KEY (rowid=?)"),
            (SQL_COMPLETE_KEEP, "USING INTEGER PRIMARY KEY (rowid=?)"),
        ] {
            let p = plan(&conn, sql);
            assert!(p.contains(index), "{sql}: {p}");
            assert!(!p.contains("TEMP B-TREE"), "{sql} sorts: {p}");
            assert!(!p.contains("SCAN tenure_items"), "{sql} scans: {p}");
        }
    }

    #[test]
    fn fenced_finalizes_find_the_row_by_its_id() {
        let conn = Connection::open_in_memory().unwrap();
        crate::schema::create_all(&conn).unwrap();
        for sql in [
            SQL_COMPLETE_FIND,
            SQL_COMPLETE_UNSTREAMED_DELETE,
            SQL_COMPLETE_UNSTREAMED_KEEP,
        ] {
            let p = plan(&conn, sql);
            assert!(
                p.contains("USING INDEX sqlite_autoindex_tenure_items_1 (id=?)"),
                "{sql}: {p}"
            );
        }
        for sql in [SQL_CLAIM_ONE, SQL_COMPLETE_DELETE, SQL_COMPLETE_KEEP] {
            let p = plan(&conn, sql);
            assert!(
                p.contains("USING INTEGER PRIMARY KEY (rowid=?)"),
                "{sql}: {p}"
            );
        }
    }
}
