//! The raw loops every figure is compared with: the same claim and fenced finalize
//! written directly against each backend, with none of the library's other rules (no
//! streams, scopes, dedup, recovery guard or pool). One definition per backend, used by
//! the burn-down benches (`memory`, `sqlite`, `postgres`, `redis`), the `sustained`
//! bench and `pgcost`, so every comparison runs the same raw SQL (or Lua).

use crate::BenchError;

fn raw_err<E>(op: &'static str) -> impl FnOnce(E) -> BenchError
where
    E: std::error::Error + Send + Sync + 'static,
{
    move |e| BenchError::Raw {
        op,
        source: Box::new(e),
    }
}

/// A `Mutex<VecDeque>` queue on the memory of the process.
pub mod memory {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex, MutexGuard};

    use tenure_core::{Clock, SystemClock, Timestamp};

    use crate::LEASE;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum State {
        Ready,
        Running,
        Done,
    }

    #[derive(Debug)]
    struct Item {
        payload: Vec<u8>,
        state: State,
        attempt: u32,
        owner: Option<Arc<str>>,
        lease_until: Timestamp,
    }

    #[derive(Debug, Default)]
    struct Inner {
        ready: VecDeque<usize>,
        items: Vec<Item>,
    }

    /// One `std::sync::Mutex` around a `VecDeque` of ready indexes and a vector of
    /// items. A claim pops up to `B` indexes and sets state, owner, `attempt + 1` and
    /// expiry (one clock read) and copies each payload out; the finalize checks
    /// `(state, attempt)` of each token under the lock, as the store's fence does, and
    /// marks it done. It keeps no stream, scope, dedup or expiry index.
    #[derive(Debug, Default)]
    pub struct RawMemory {
        inner: Mutex<Inner>,
    }

    /// A claimed item: its index, the attempt it was claimed with, and its payload.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct RawMemoryLease {
        /// The item's index in the order it was pushed.
        pub index: usize,
        /// The attempt this claim started (the fencing token with `index`).
        pub attempt: u32,
        /// The item's payload, copied out.
        pub payload: Vec<u8>,
    }

    impl RawMemory {
        /// An empty queue.
        pub fn new() -> Self {
            RawMemory::default()
        }

        /// A queue of `n` ready items; item `i` carries `i` as eight little-endian bytes,
        /// as [`crate::seed`] writes them.
        pub fn with_items(n: usize) -> Self {
            let raw = RawMemory::new();
            {
                let mut g = raw.lock();
                g.ready = (0..n).collect();
                g.items = (0..n)
                    .map(|i| item((i as u64).to_le_bytes().to_vec()))
                    .collect();
            }
            raw
        }

        fn lock(&self) -> MutexGuard<'_, Inner> {
            // Every update under the lock is a field write or a push: a panic cannot
            // leave it inconsistent.
            self.inner.lock().unwrap_or_else(|p| p.into_inner())
        }

        /// Appends one ready item carrying `payload`.
        pub fn push(&self, payload: Vec<u8>) {
            let mut g = self.lock();
            let index = g.items.len();
            g.items.push(item(payload));
            g.ready.push_back(index);
        }

        /// Claims up to `batch` ready items, oldest first, for `owner`.
        pub fn claim(&self, owner: &Arc<str>, batch: usize) -> Vec<RawMemoryLease> {
            let mut g = self.lock();
            let now = SystemClock.now();
            let take = batch.min(g.ready.len());
            let mut out = Vec::with_capacity(take);
            for _ in 0..take {
                let Some(i) = g.ready.pop_front() else { break };
                let it = &mut g.items[i];
                it.state = State::Running;
                it.attempt += 1;
                it.owner = Some(owner.clone());
                it.lease_until = now + LEASE;
                out.push(RawMemoryLease {
                    index: i,
                    attempt: it.attempt,
                    payload: it.payload.clone(),
                });
            }
            out
        }

        /// Marks each claimed item done if it is still running with that attempt;
        /// returns how many were.
        pub fn finalize(&self, leases: &[RawMemoryLease]) -> u64 {
            let mut g = self.lock();
            let mut accepted = 0u64;
            for l in leases {
                let it = &mut g.items[l.index];
                if it.state == State::Running && it.attempt == l.attempt {
                    it.state = State::Done;
                    it.owner = None;
                    accepted += 1;
                }
            }
            accepted
        }
    }

    fn item(payload: Vec<u8>) -> Item {
        Item {
            payload,
            state: State::Ready,
            attempt: 0,
            owner: None,
            lease_until: Timestamp::EPOCH,
        }
    }
}

/// A `jobs` table in an SQLite file, through rusqlite.
pub mod sqlite {
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
}

/// The PostgreSQL store's own `items` table, through sqlx.
pub mod pg {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use sqlx::{PgConnection, Row};
    use tenure_core::{Clock, SystemClock};

    use super::raw_err;
    use crate::{BenchError, LEASE, QUEUE};

    /// The raw claim and finalize on the `items` table of a `PgStore` schema: the claim
    /// is one `UPDATE ... WHERE id = ANY(ARRAY(SELECT ... FOR UPDATE SKIP LOCKED))` over
    /// the store's partial index of ready heads, the finalize one `DELETE` fenced on
    /// `(id, attempt)` over `unnest`.
    #[derive(Clone, Debug)]
    pub struct PgRaw {
        claim: String,
        finalize: String,
    }

    /// A claimed row: its id, the attempt the claim started, and its payload.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct PgRawLease {
        /// The item id.
        pub id: uuid::Uuid,
        /// The attempt this claim started (the fencing token with `id`).
        pub attempt: i32,
        /// The item's payload.
        pub payload: Vec<u8>,
    }

    impl PgRaw {
        /// The statements for the tables of `schema` (a `PgStore` schema, already
        /// migrated).
        pub fn new(schema: &str) -> Self {
            PgRaw {
                claim: format!(
                    "UPDATE {schema}.items SET state = 'running', attempt = attempt + 1, \
                         owner = $1, lease_expires_at = $2, renewals = 0, updated_at = $3 \
                     WHERE id = ANY(ARRAY( \
                         SELECT id FROM {schema}.items \
                         WHERE queue = $4 AND state = 'ready' AND head AND run_at <= $3 \
                         ORDER BY priority, run_at, seq LIMIT $5 \
                         FOR UPDATE SKIP LOCKED)) \
                     RETURNING id, attempt, payload"
                ),
                finalize: format!(
                    "DELETE FROM {schema}.items i \
                     USING unnest($1::uuid[], $2::int4[]) AS t(id, attempt) \
                     WHERE i.id = t.id AND i.attempt = t.attempt AND i.state = 'running' \
                     RETURNING i.id"
                ),
            }
        }

        /// The same claim, with a finalize that keeps the stream head flag in its write
        /// path (G9): the `DELETE` returns each row's stream and, in the same
        /// statement, the next waiting item of each of those streams becomes its head.
        /// No stream rows, no counts: the least a strict per-stream FIFO can write.
        /// The `streams` table of the schema is left as it was (stale counts): empty it
        /// before the store enqueues into the same schema again.
        pub fn with_stream_heads(schema: &str) -> Self {
            PgRaw {
                finalize: format!(
                    "WITH d AS ( \
                         DELETE FROM {schema}.items i \
                         USING unnest($1::uuid[], $2::int4[]) AS t(id, attempt) \
                         WHERE i.id = t.id AND i.attempt = t.attempt AND i.state = 'running' \
                         RETURNING i.id, i.stream \
                     ), promoted AS ( \
                         UPDATE {schema}.items b SET head = true \
                         WHERE b.id IN (SELECT (SELECT n.id FROM {schema}.items n \
                                 WHERE n.stream = d.stream AND NOT n.head \
                                 ORDER BY n.seq LIMIT 1) \
                             FROM d WHERE d.stream IS NOT NULL) \
                     ) \
                     SELECT id FROM d"
                ),
                ..PgRaw::new(schema)
            }
        }

        /// Claims up to `batch` ready items of [`QUEUE`] for `owner`, with a lease of
        /// [`LEASE`].
        pub async fn claim(
            &self,
            conn: &mut PgConnection,
            owner: &str,
            batch: usize,
        ) -> Result<Vec<PgRawLease>, BenchError> {
            let now = SystemClock.now();
            let rows = sqlx::query(&self.claim)
                .bind(owner)
                .bind((now + LEASE).as_micros())
                .bind(now.as_micros())
                .bind(QUEUE)
                .bind(i64::try_from(batch).unwrap_or(i64::MAX))
                .fetch_all(conn)
                .await
                .map_err(raw_err("claim"))?;
            rows.iter()
                .map(|r| {
                    Ok(PgRawLease {
                        id: r.try_get(0)?,
                        attempt: r.try_get(1)?,
                        payload: r.try_get(2)?,
                    })
                })
                .collect::<sqlx::Result<_>>()
                .map_err(raw_err("claim"))
        }

        /// Deletes each claimed row if it is still running with that attempt, in one
        /// statement; returns how many were.
        pub async fn finalize(
            &self,
            conn: &mut PgConnection,
            leases: &[PgRawLease],
        ) -> Result<usize, BenchError> {
            let ids: Vec<uuid::Uuid> = leases.iter().map(|l| l.id).collect();
            let attempts: Vec<i32> = leases.iter().map(|l| l.attempt).collect();
            let rows = sqlx::query(&self.finalize)
                .bind(&ids)
                .bind(&attempts)
                .fetch_all(conn)
                .await
                .map_err(raw_err("finalize"))?;
            Ok(rows.len())
        }
    }

    /// The burn-down drain of `n` seeded items on `conns` (one task per connection,
    /// owner `w{index}`): each task loops [`PgRaw::claim`] of `batch` then one
    /// [`PgRaw::finalize`] of the whole batch, and returns at its first empty claim once
    /// all `n` have finished (an empty claim before that, while another task holds the
    /// last heads of some streams, is retried after 1 ms, at most 1,000 times in a row).
    /// Every finalize must delete every row it names and exactly `n` rows must go, else
    /// the drain fails. Returns the time from the first claim to the last task's return,
    /// and the connections, for the caller to read or close.
    pub async fn drain(
        raw: &PgRaw,
        conns: Vec<PgConnection>,
        n: usize,
        batch: usize,
    ) -> Result<(Duration, Vec<PgConnection>), BenchError> {
        let done = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let tasks: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(w, mut conn)| {
                let (done, raw) = (done.clone(), raw.clone());
                tokio::spawn(async move {
                    let owner = format!("w{w}");
                    let mut empty = 0u32;
                    loop {
                        let leases = match raw.claim(&mut conn, &owner, batch).await {
                            Ok(l) => l,
                            Err(e) => return (conn, Err(e)),
                        };
                        if leases.is_empty() {
                            // Another task may hold the last heads of some streams:
                            // the drain is over once every item has finished.
                            if done.load(Ordering::Relaxed) >= n as u64 || empty >= 1_000 {
                                return (conn, Ok(()));
                            }
                            empty += 1;
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            continue;
                        }
                        empty = 0;
                        match raw.finalize(&mut conn, &leases).await {
                            Ok(f) if f == leases.len() => {
                                done.fetch_add(f as u64, Ordering::Relaxed);
                            }
                            Ok(f) => {
                                let e = BenchError::Check(format!(
                                    "a raw finalize deleted {f} of {} rows just claimed",
                                    leases.len()
                                ));
                                return (conn, Err(e));
                            }
                            Err(e) => return (conn, Err(e)),
                        }
                    }
                })
            })
            .collect();
        let mut conns = Vec::with_capacity(tasks.len());
        let mut first_err = None;
        for t in tasks {
            let (conn, outcome) = t.await?;
            conns.push(conn);
            if let Err(e) = outcome {
                first_err.get_or_insert(e);
            }
        }
        let elapsed = start.elapsed();
        if let Some(e) = first_err {
            return Err(e);
        }
        let finished = done.load(Ordering::Relaxed);
        if finished != n as u64 {
            return Err(BenchError::Unfinished {
                finished,
                expected: n,
            });
        }
        Ok((elapsed, conns))
    }
}

/// A Lua claim loop on Redis: ready ids in a list, a lease hash and an expiry zset.
pub mod redis {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use redis::aio::MultiplexedConnection;
    use redis::Script;
    use tenure_core::{Clock, SystemClock};

    use super::raw_err;
    use crate::{BenchError, LEASE};

    /// `KEYS[1]` is the root `{prefix}`; ARGV: owner, batch, now (µs), lease (µs). Pops
    /// up to `batch` ids, raises each one's attempt, records `owner:attempt` in the
    /// lease hash and the expiry in the zset; answers `{id, attempt, payload}` each.
    const CLAIM: &str = r"
local p = KEYS[1]
local ids = redis.call('LPOP', p .. ':ready', tonumber(ARGV[2]))
if not ids then return {} end
local exp = string.format('%d', tonumber(ARGV[3]) + tonumber(ARGV[4]))
local out = {}
for i, id in ipairs(ids) do
  local a = redis.call('HINCRBY', p .. ':attempt', id, 1)
  redis.call('HSET', p .. ':lease', id, ARGV[1] .. ':' .. a)
  redis.call('ZADD', p .. ':lease_exp', exp, id)
  out[i] = {id, a, redis.call('HGET', p .. ':payload', id)}
end
return out
";

    /// `KEYS[1]` is the root; ARGV: owner, then pairs id, attempt. Deletes each item
    /// whose lease is still `owner:attempt`; answers how many were.
    const FINALIZE: &str = r"
local p = KEYS[1]
local n = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HGET', p .. ':lease', id) == ARGV[1] .. ':' .. ARGV[i + 1] then
    redis.call('HDEL', p .. ':lease', id)
    redis.call('ZREM', p .. ':lease_exp', id)
    redis.call('HDEL', p .. ':attempt', id)
    redis.call('HDEL', p .. ':payload', id)
    n = n + 1
  end
end
return n
";

    /// The two scripts and the root key of one raw queue.
    #[derive(Clone, Debug)]
    pub struct RedisRaw {
        root: String,
        claim: Script,
        finalize: Script,
    }

    /// A claimed item: its id, the attempt the claim started, and its payload.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct RedisRawLease {
        /// The item id.
        pub id: String,
        /// The attempt this claim started (the fencing token with `id`).
        pub attempt: i64,
        /// The item's payload.
        pub payload: Vec<u8>,
    }

    impl RedisRaw {
        /// A raw queue under the keys `{prefix}:...`.
        pub fn new(prefix: &str) -> Self {
            RedisRaw {
                root: format!("{{{prefix}}}"),
                claim: Script::new(CLAIM),
                finalize: Script::new(FINALIZE),
            }
        }

        /// Seeds `n` ready items (ids `0..n`, payload the id's eight little-endian
        /// bytes), in pipelines of 10,000.
        pub async fn seed(
            &self,
            conn: &mut MultiplexedConnection,
            n: usize,
        ) -> Result<(), BenchError> {
            for start in (0..n).step_by(10_000) {
                let mut pipe = redis::pipe();
                let ids: Vec<String> = (start..n.min(start + 10_000))
                    .map(|i| i.to_string())
                    .collect();
                pipe.rpush(format!("{}:ready", self.root), &ids).ignore();
                for (i, id) in ids.iter().enumerate() {
                    let payload = ((start + i) as u64).to_le_bytes();
                    pipe.hset(format!("{}:payload", self.root), id, &payload[..])
                        .ignore();
                }
                pipe.query_async::<()>(conn)
                    .await
                    .map_err(raw_err("seed"))?;
            }
            Ok(())
        }

        /// Claims up to `batch` items for `owner` with a lease of [`LEASE`].
        pub async fn claim(
            &self,
            conn: &mut MultiplexedConnection,
            owner: &str,
            batch: usize,
        ) -> Result<Vec<RedisRawLease>, BenchError> {
            let now = SystemClock.now().as_micros();
            let rows: Vec<(String, i64, Vec<u8>)> = self
                .claim
                .key(&self.root)
                .arg(owner)
                .arg(batch)
                .arg(now)
                .arg(tenure_core::duration_micros(LEASE))
                .invoke_async(conn)
                .await
                .map_err(raw_err("claim"))?;
            Ok(rows
                .into_iter()
                .map(|(id, attempt, payload)| RedisRawLease {
                    id,
                    attempt,
                    payload,
                })
                .collect())
        }

        /// Finalizes `leases` held by `owner`, fenced on `owner:attempt`, in one script;
        /// returns how many were still held.
        pub async fn finalize(
            &self,
            conn: &mut MultiplexedConnection,
            owner: &str,
            leases: &[RedisRawLease],
        ) -> Result<usize, BenchError> {
            let mut inv = self.finalize.key(&self.root);
            inv.arg(owner);
            for l in leases {
                inv.arg(&l.id).arg(l.attempt);
            }
            let n: usize = inv.invoke_async(conn).await.map_err(raw_err("finalize"))?;
            Ok(n)
        }
    }

    /// The burn-down drain of `n` seeded items on `conns` (one task per connection,
    /// owner `w{index}`): each task loops [`RedisRaw::claim`] of `batch` then one
    /// [`RedisRaw::finalize`] of the whole batch, and returns at its first empty claim.
    /// Every finalize must finish every item it names and exactly `n` must finish,
    /// else the drain fails. Returns the time from the first claim to the last task's
    /// return.
    pub async fn drain(
        raw: &RedisRaw,
        conns: Vec<MultiplexedConnection>,
        n: usize,
        batch: usize,
    ) -> Result<Duration, BenchError> {
        let done = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let tasks: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(w, mut conn)| {
                let (done, raw) = (done.clone(), raw.clone());
                tokio::spawn(async move {
                    let owner = format!("w{w}");
                    loop {
                        let leases = raw.claim(&mut conn, &owner, batch).await?;
                        if leases.is_empty() {
                            return Ok::<(), BenchError>(());
                        }
                        let f = raw.finalize(&mut conn, &owner, &leases).await?;
                        if f != leases.len() {
                            return Err(BenchError::Check(format!(
                                "a raw finalize finished {f} of {} items just claimed",
                                leases.len()
                            )));
                        }
                        done.fetch_add(f as u64, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let mut first_err = None;
        for t in tasks {
            if let Err(e) = t.await? {
                first_err.get_or_insert(e);
            }
        }
        let elapsed = start.elapsed();
        if let Some(e) = first_err {
            return Err(e);
        }
        let finished = done.load(Ordering::Relaxed);
        if finished != n as u64 {
            return Err(BenchError::Unfinished {
                finished,
                expected: n,
            });
        }
        Ok(elapsed)
    }
}
