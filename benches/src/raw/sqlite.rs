//! A `jobs` table in an SQLite file, through rusqlite.

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection};
use tenure_core::{Clock, SystemClock};

use super::raw_err;
use crate::{BenchError, LEASE};

/// The raw table: one row per item, one partial index over ready rows in claim
/// order.
pub const SCHEMA: &str = "CREATE TABLE jobs (id INTEGER PRIMARY KEY, queue TEXT NOT NULL,
         payload BLOB NOT NULL, priority INTEGER NOT NULL, run_at INTEGER NOT NULL,
         state TEXT NOT NULL, owner TEXT, lease_until INTEGER, attempt INTEGER NOT NULL);
     CREATE INDEX jobs_ready ON jobs (queue, priority, run_at, id) WHERE state = 'ready';";

const INSERT: &str = "INSERT INTO jobs (queue, payload, priority, run_at, state, attempt) \
                      VALUES ('bench', ?1, 0, ?2, 'ready', 0)";

/// One `BEGIN IMMEDIATE` statement: the ordered claim of up to `?4` ready items.
const CLAIM: &str = "UPDATE jobs SET state = 'running', owner = ?1, lease_until = ?2,
                         attempt = attempt + 1
                     WHERE id IN (SELECT id FROM jobs
                                  WHERE queue = 'bench' AND state = 'ready' AND run_at <= ?3
                                  ORDER BY priority, run_at, id LIMIT ?4)
                     RETURNING id, attempt, payload";

/// The fenced finalize of one item.
const FINALIZE: &str = "DELETE FROM jobs WHERE id = ?1 AND state = 'running' AND attempt = ?2";

/// A claimed row: its id, the attempt the claim started, and its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqliteRawLease {
    /// The row id.
    pub id: i64,
    /// The attempt this claim started (the fencing token with `id`).
    pub attempt: i64,
    /// The row's payload.
    pub payload: Vec<u8>,
}

/// Opens `path` with WAL, `synchronous=FULL` when `full` (else `NORMAL`, the
/// store's default), and a busy handler that yields before it sleeps (about 30 s
/// in all; see `spin_busy`).
pub fn connect(path: &Path, full: bool) -> Result<Connection, BenchError> {
    let conn = Connection::open(path).map_err(raw_err("open"))?;
    conn.busy_handler(Some(spin_busy))
        .map_err(raw_err("busy handler"))?;
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        .map_err(raw_err("wal"))?;
    let sync = if full { "FULL" } else { "NORMAL" };
    conn.execute_batch(&format!("PRAGMA synchronous = {sync}"))
        .map_err(raw_err("synchronous"))?;
    Ok(conn)
}

/// Creates [`SCHEMA`] in a new file at `path` and inserts `n` ready items in one
/// transaction; item `i` carries `i` as eight little-endian bytes.
pub fn seed(path: &Path, n: usize) -> Result<(), BenchError> {
    let mut conn = connect(path, false)?;
    conn.execute_batch(SCHEMA).map_err(raw_err("schema"))?;
    let now = SystemClock.now().as_micros();
    let tx = conn.transaction().map_err(raw_err("begin"))?;
    {
        let mut ins = tx.prepare(INSERT).map_err(raw_err("insert"))?;
        for i in 0..n {
            ins.execute(params![(i as u64).to_le_bytes().to_vec(), now])
                .map_err(raw_err("insert"))?;
        }
    }
    tx.commit().map_err(raw_err("commit"))
}

/// Inserts one ready item carrying `payload`, in a transaction of its own.
pub fn insert(conn: &Connection, payload: &[u8]) -> Result<(), BenchError> {
    let now = SystemClock.now().as_micros();
    conn.prepare_cached(INSERT)
        .and_then(|mut s| s.execute(params![payload, now]))
        .map(drop)
        .map_err(raw_err("insert"))
}

/// Runs `f` inside one `BEGIN IMMEDIATE` transaction whose `BEGIN` and `COMMIT`
/// are statements prepared once per connection (rusqlite's `transaction_*` parses
/// both again on every call); rolls back when `f` or the commit fails.
fn immediate<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<T, BenchError>,
) -> Result<T, BenchError> {
    conn.prepare_cached("BEGIN IMMEDIATE")
        .and_then(|mut s| s.execute([]))
        .map_err(raw_err("begin"))?;
    let out = f(conn).and_then(|v| {
        conn.prepare_cached("COMMIT")
            .and_then(|mut s| s.execute([]))
            .map_err(raw_err("commit"))?;
        Ok(v)
    });
    if out.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    out
}

/// Claims up to `batch` ready items for `owner` in one `BEGIN IMMEDIATE`
/// transaction, in `priority, run_at, id` order, with a lease of [`LEASE`].
/// Every statement is prepared once per connection.
pub fn claim(
    conn: &mut Connection,
    owner: &str,
    batch: usize,
) -> Result<Vec<SqliteRawLease>, BenchError> {
    let now = SystemClock.now().as_micros();
    let lease = i64::try_from(LEASE.as_micros()).unwrap_or(i64::MAX);
    immediate(conn, |conn| {
        let mut claim = conn.prepare_cached(CLAIM).map_err(raw_err("claim"))?;
        let rows = claim
            .query_map(params![owner, now + lease, now, batch as i64], |r| {
                Ok(SqliteRawLease {
                    id: r.get(0)?,
                    attempt: r.get(1)?,
                    payload: r.get(2)?,
                })
            })
            .map_err(raw_err("claim"))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(raw_err("claim"));
        rows
    })
}

/// Deletes each claimed row if it is still running with that attempt, all in one
/// `BEGIN IMMEDIATE` transaction (one prepared statement run per row); returns how
/// many were.
pub fn finalize(conn: &mut Connection, leases: &[SqliteRawLease]) -> Result<usize, BenchError> {
    immediate(conn, |conn| {
        let mut fin = conn.prepare_cached(FINALIZE).map_err(raw_err("finalize"))?;
        let mut done = 0;
        for l in leases {
            done += fin
                .execute(params![l.id, l.attempt])
                .map_err(raw_err("finalize"))?;
        }
        Ok(done)
    })
}

/// A busy handler that yields the core for the first thousand retries, then sleeps
/// a millisecond per retry, up to about 30 s (SQLite's own `busy_timeout` sleeps
/// 1, 2, 5, 10 ... ms from the first retry, so a waiting claimer oversleeps a
/// lock held for tens of microseconds).
fn spin_busy(count: i32) -> bool {
    if count < 1_000 {
        std::thread::yield_now();
        true
    } else if count < 31_000 {
        std::thread::sleep(Duration::from_millis(1));
        true
    } else {
        false
    }
}
