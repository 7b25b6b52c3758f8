//! Every store operation as SQL on one connection, inside a transaction the caller
//! (the writer thread, or the application for transactional enqueue) opened.
//!
//! This file holds what the operations share: their context ([`Cx`]) and failure
//! ([`OpError`]), the statements of the hot paths (kept together, each pinned to its
//! index, with the test of their plans in `tests.rs`), and reading and writing item
//! rows. The operations are in the files of their contract groups, as `store/` has
//! them: `claim.rs` (enqueue and claim), `finalize.rs` (renew, complete, fail,
//! release), `recovery.rs` (expired leases, purge), `instances.rs` (instances and
//! leader) and `inspect.rs` (dead items, reads, listings, cancel, pause).
//!
//! Each function applies exactly the transitions of [`tenure_core::machine`] and names
//! the one it mirrors. The hot paths (claim, complete, renew, release) are single
//! fenced statements; the rare ones (fail, recovery, eviction, requeue) load the item,
//! apply the machine function itself and write the result back.

use rusqlite::{params, Connection, Row};
use tenure_core::{
    DedupKey, Error, Item, ItemId, ItemState, LeaseId, OwnerId, Progress, QueueName, ScopeKey,
    StreamKey, Timestamp,
};

use crate::error::STORE;

mod claim;
mod enqueue;
mod finalize;
mod history;
mod inspect;
mod instances;
mod key_walk;
mod limits;
mod recovery;
#[cfg(test)]
mod tests;

pub(crate) use claim::claim;
pub(crate) use enqueue::enqueue;
pub(crate) use finalize::{complete, fail, release, renew};
pub(crate) use history::{history, history_add};
pub(crate) use inspect::{
    dead_discard, dead_requeue, is_paused, item_cancel, item_get, item_list, lease_list,
    queue_counts, queue_list, set_paused,
};
pub(crate) use instances::{
    instance_deregister, instance_evict_stale, instance_heartbeat, instance_list, leader_acquire,
    leader_get, leader_resign,
};
pub(crate) use limits::{
    limits_clear, limits_defer, limits_get, limits_list, limits_set, limits_wait,
};
pub(crate) use recovery::{purge, recover_expired};

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
         last_error, created_at, updated_at, lease, progress"
    };
}

const ITEM_COLS: &str = item_cols!();

/// The columns the claim's scans read of a ready head: what a claim keeps of the
/// item. What it sets (state, owner, expiry, renewals, `updated_at`, lease) and the
/// scanned queue are not read; see [`read_ready`]. Seven columns fewer than
/// [`ITEM_COLS`] cost about 1.5k instructions less per claimed row.
macro_rules! ready_cols {
    () => {
        "seq, id, payload, stream, scope, dedup_key, priority, run_at, attempt, stalls, \
         max_attempts, max_stalls, max_renewals, last_error, created_at"
    };
}

/// As [`ITEM_COLS`] without the payload, for operations that never return it.
const ITEM_COLS_LEAN: &str = "seq, id, queue, x'' AS payload, stream, scope, dedup_key, \
     priority, run_at, state, attempt, owner, lease_expires_at, renewals, stalls, \
     max_attempts, max_stalls, max_renewals, last_error, created_at, updated_at, lease, \
     progress";

// The statements on the claim path, each pinned to its partial index with INDEXED BY
// (an `ANALYZE` taken at an unlucky moment cannot move them to a scan; the test at the
// bottom checks every plan).

/// Due heads of one priority level of a fair queue after a key, in start-tag order
/// (G18), then G8's. `run_at <= now` filters rather than stops the walk, since tags
/// come first: the scheduled items of a fair queue's level are stepped over.
pub(crate) const SQL_LEVEL_SCAN_FAIR: &str = concat!(
    "SELECT ",
    ready_cols!(),
    ", ftag, limit_key FROM tenure_items INDEXED BY tenure_items_ready_fair
     WHERE queue = ?1 AND state = 'ready' AND head = 1 AND ftag > 0 AND priority = ?2
       AND run_at <= ?3 AND (ftag, run_at, seq) > (?4, ?5, ?6)
     ORDER BY ftag, run_at, seq LIMIT ?7"
);

/// The next priority level with a claimable head in a queue (G8).
const SQL_NEXT_LEVEL: &str = "SELECT priority FROM tenure_items INDEXED BY tenure_items_ready
     WHERE queue = ?1 AND state = 'ready' AND head = 1 AND priority > ?2
     ORDER BY priority LIMIT 1";

/// Due heads of one priority level after a key, in claim order (G7, G8, G9).
const SQL_LEVEL_SCAN: &str = concat!(
    "SELECT ",
    ready_cols!(),
    " FROM tenure_items INDEXED BY tenure_items_ready
     WHERE queue = ?1 AND state = 'ready' AND head = 1 AND priority = ?2
       AND run_at <= ?3 AND (run_at, seq) > (?4, ?5)
     ORDER BY run_at, seq LIMIT ?6"
);

/// [`SQL_LEVEL_SCAN`] for a queue with limits: the same walk, with each head's limit
/// key (column 15) for the gate. The unlimited claim keeps [`SQL_LEVEL_SCAN`].
const SQL_LEVEL_SCAN_LIMITED: &str = concat!(
    "SELECT ",
    ready_cols!(),
    ", limit_key FROM tenure_items INDEXED BY tenure_items_ready
     WHERE queue = ?1 AND state = 'ready' AND head = 1 AND priority = ?2
       AND run_at <= ?3 AND (run_at, seq) > (?4, ?5)
     ORDER BY run_at, seq LIMIT ?6"
);

/// The next limit key after `?2` with a ready head in limited queue `?1` (G16): one
/// seek in `tenure_items_ready_key`, however many items the key before it holds.
const SQL_NEXT_KEY: &str = "SELECT limit_key FROM tenure_items INDEXED BY tenure_items_ready_key
     WHERE queue = ?1 AND state = 'ready' AND head = 1 AND lq = 1 AND limit_key > ?2
     ORDER BY limit_key LIMIT 1";

/// Due heads of one limit key `?2` of a limited queue after a key, in claim order (G8).
const SQL_KEY_SCAN: &str = concat!(
    "SELECT ",
    ready_cols!(),
    ", limit_key FROM tenure_items INDEXED BY tenure_items_ready_key
     WHERE queue = ?1 AND state = 'ready' AND head = 1 AND lq = 1 AND limit_key = ?2
       AND run_at <= ?3 AND (priority, run_at, seq) > (?4, ?5, ?6)
     ORDER BY priority, run_at, seq LIMIT ?7"
);

/// As [`SQL_KEY_SCAN`] for the heads without a limit key.
const SQL_UNKEYED_SCAN: &str = concat!(
    "SELECT ",
    ready_cols!(),
    ", limit_key FROM tenure_items INDEXED BY tenure_items_ready_key
     WHERE queue = ?1 AND state = 'ready' AND head = 1 AND lq = 1 AND limit_key IS NULL
       AND run_at <= ?2 AND (priority, run_at, seq) > (?3, ?4, ?5)
     ORDER BY priority, run_at, seq LIMIT ?6"
);

/// As [`SQL_LEVEL_SCAN`], keeping only the owner's share (G14): heads whose stream is
/// pinned to the owner (`?7`), and unpinned heads (no stream, or a stream without a
/// pin) whose partition `phash % ?8` falls to the owner's rank `?10` among `?9` live
/// instances. A head pinned to another instance fails the pin test and is never taken.
/// The pin is one primary-key probe of `tenure_stream_pins` per candidate.
const SQL_LEVEL_SCAN_PARTITIONED: &str = concat!(
    "SELECT ",
    ready_cols!(),
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
         owner = ?2, lease_expires_at = ?3, renewals = 0, updated_at = ?4, lease = ?5
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
/// `state = 'ready'` (G1): owner `?1`, expiry `?2`, time `?3`, lease id `?4`, then the
/// `n` seqs.
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
///
/// Built once per length for the process: the statement cache is keyed by the SQL,
/// and formatting it again for every claim cost about 1k instructions per claimed
/// row at 100 per claim.
fn claim_many_sql(n: usize) -> &'static str {
    use std::sync::OnceLock;
    const LENGTHS: usize = CLAIM_CHUNK_MAX.trailing_zeros() as usize + 1;
    static BUILT: OnceLock<Vec<String>> = OnceLock::new();
    debug_assert!(n.is_power_of_two() && n <= CLAIM_CHUNK_MAX, "{n}");
    let all = BUILT.get_or_init(|| {
        (0..LENGTHS)
            .map(|bit| {
                let list: Vec<String> = (5..5 + (1 << bit)).map(|i| format!("?{i}")).collect();
                format!(
                    "UPDATE OR FAIL tenure_items SET state = 'running', attempt = attempt + 1,
                         owner = ?1, lease_expires_at = ?2, renewals = 0, updated_at = ?3,
                         lease = ?4
                     WHERE seq IN ({}) AND state = 'ready'",
                    list.join(", ")
                )
            })
            .collect()
    });
    &all[(n.trailing_zeros() as usize).min(LENGTHS - 1)]
}

/// The fenced lookup of one token (G3): the row's seq and stream, or no row when the
/// token is not current. Every fence checks the lease id `?3` beside the attempt `?2`:
/// after a failover that lost a claim, the attempt number alone can name two leases.
const SQL_COMPLETE_FIND: &str = "SELECT seq, stream FROM tenure_items
     WHERE id = ?1 AND state = 'running' AND attempt = ?2 AND lease = ?3";

/// The fenced complete of one token whose item has no stream (the common case), in
/// one statement: it changes no row when the token is not current or the item has a
/// stream, and [`SQL_COMPLETE_FIND`] then tells the two apart.
const SQL_COMPLETE_UNSTREAMED_DELETE: &str = "DELETE FROM tenure_items
     WHERE id = ?1 AND state = 'running' AND attempt = ?2 AND lease = ?3 AND stream IS NULL";

/// As [`SQL_COMPLETE_UNSTREAMED_DELETE`], keeping the row as `done`.
const SQL_COMPLETE_UNSTREAMED_KEEP: &str = "UPDATE tenure_items SET state = 'done',
         owner = NULL, lease_expires_at = NULL, updated_at = ?4
     WHERE id = ?1 AND state = 'running' AND attempt = ?2 AND lease = ?3 AND stream IS NULL";

/// Whether a stream has an unfinished item before `seq` (G9: the item at `seq` may
/// not complete before it).
const SQL_EARLIER_UNFINISHED: &str = "SELECT EXISTS (SELECT 1 FROM tenure_items
     INDEXED BY tenure_items_stream WHERE stream = ?1 AND seq < ?2 AND state <> 'done')";

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
    let seq: i64 = row.get(0)?;
    let id = blob_id(row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?)?;
    let state = row.get_ref(9)?.as_str().map_err(rusqlite::Error::from)?;
    let queue = row.get_ref(2)?.as_str().map_err(rusqlite::Error::from)?;
    let queue = QueueName::new(queue).map_err(corrupt)?;
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
        lease: LeaseId::from_i64(row.get(21)?),
        progress: row
            .get::<_, Option<String>>(22)?
            .map(|p| Progress::decode(&p))
            .transpose()
            .map_err(corrupt)?,
    };
    Ok((seq, item))
}

/// A ready head of `queue` as the claim's scans read it ([`ready_cols`]). The fields
/// a claim sets are not read: they hold what a ready row holds (no owner, no
/// expiry, no renewals, no lease), and `updated_at` the creation time, until
/// [`machine::claim`](tenure_core::machine::claim) writes each of them.
fn read_ready(row: &Row<'_>, queue: &QueueName) -> OpResult<(i64, Item)> {
    let seq: i64 = row.get(0)?;
    let id = blob_id(row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?)?;
    let created_at = Timestamp::from_micros(row.get(14)?);
    let item = Item {
        id,
        queue: queue.clone(),
        payload: row.get(2)?,
        stream: key(row.get(3)?, StreamKey::new)?,
        scope: key(row.get(4)?, ScopeKey::new)?,
        dedup_key: key(row.get(5)?, DedupKey::new)?,
        priority: i16::try_from(row.get::<_, i64>(6)?).map_err(corrupt)?,
        run_at: Timestamp::from_micros(row.get(7)?),
        state: ItemState::Ready,
        attempt: to_u32(row.get(8)?, "attempt")?,
        owner: None,
        lease_expires_at: None,
        renewals: 0,
        stalls: to_u32(row.get(9)?, "stalls")?,
        max_attempts: to_u32(row.get(10)?, "max_attempts")?,
        max_stalls: to_u32(row.get(11)?, "max_stalls")?,
        max_renewals: to_u32(row.get(12)?, "max_renewals")?,
        last_error: row.get(13)?,
        created_at,
        updated_at: created_at,
        lease: LeaseId::NONE,
        // Not read on the claim path: a new attempt has reported none.
        progress: None,
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
