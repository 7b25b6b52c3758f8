//! [`PgStore`]: the [`Store`] contract on PostgreSQL.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use sqlx::postgres::PgArguments;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::query::Query;
use sqlx::{PgConnection, PgPool, Postgres, Row, Transaction};
use tenure_core::partition::key_hash;
use tenure_core::{
    async_trait, Capabilities, ClaimParams, CompleteParams, DeregisterParams, DiscardParams,
    EnqueueParams, Enqueued, Error, EvictParams, Evicted, FailOutcome, FailParams, HeartbeatParams,
    Instance, Item, ItemId, ItemState, LeaderInfo, LeaderName, LeaderParams, LeaderStatus, Lease,
    Limits, NewItem, OwnerId, PurgeParams, Purged, QueueCounts, QueueName, RecoverParams,
    Recovered, ReleaseParams, RenewOutcome, RenewParams, RequeueParams, Result, Retry, SharedClock,
    Store, Timestamp, TokenOutcome, WakeHealth, WakeSignal,
};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::connect::{check_schema, check_url, diagnosed};
use crate::error::{db_code, map};
use crate::rows::{i32_of, u32_of};
use crate::sql::{Sql, SCOPE_INDEX};
use crate::{listen, migrate, rows, PgConfig, STORE};

pub(crate) mod operate;

/// How many times a claim that lost a scope race (G10) is tried again before it
/// answers with what it has (nothing).
const SCOPE_RACE_RETRIES: usize = 16;
/// How many expired leases a claim recovers before it picks (contract of `claim`).
const CLAIM_RECOVER_LIMIT: i64 = 1_000;

/// A PostgreSQL store. `Clone` gives another handle on the same pool.
///
/// See the [crate docs](crate) for the schema, privileges, proxies and pool sizing.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    /// What the pool connects with, for [`diagnosed`] acquires.
    options: PgConnectOptions,
    max_connections: u32,
    sql: Sql,
    schema: String,
    clock: SharedClock,
    limits: Limits,
    keep_done: bool,
    statement_cache: bool,
    wake: WakeSignal,
    listening: bool,
    channel: String,
    /// Claims refused by the scope index and picked again (G10), for tests and
    /// diagnostics.
    scope_races: AtomicU64,
    listener: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(mut guard) = self.listener.lock() {
            if let Some(task) = guard.take() {
                task.abort();
            }
        }
    }
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("schema", &self.inner.schema)
            .field("keep_done", &self.inner.keep_done)
            .field("listening", &self.inner.listening)
            .finish_non_exhaustive()
    }
}

/// The decoded answer of one run of the claim statement.
pub(crate) enum ClaimRun {
    /// Expired leases of these queues exist: recover them, then pick.
    RecoverFirst,
    /// A partitioned claim (G14) whose owner is not a registered instance; nothing
    /// was written.
    NotRegistered,
    /// What the pick claimed, with enqueue sequence numbers.
    Claimed(Vec<(i64, Item)>),
}

impl PgStore {
    /// Opens a pool on `config.url` and, unless
    /// [`migrate_on_connect(false)`](PgConfig::migrate_on_connect), applies missing
    /// migrations.
    ///
    /// The schema name and the URL are validated first: an unsafe name or a
    /// PostgreSQL system schema (`information_schema`, `pg_*`) answers
    /// [`Error::InvalidInput`] naming `schema`; a URL parameter outside
    /// [`DRIVER_PARAMETERS`](crate::DRIVER_PARAMETERS), or a certificate file that
    /// does not exist, answers [`Error::InvalidInput`] naming `url` and the
    /// parameter. Nothing is executed then. Connections are
    /// opened lazily, so with `migrate_on_connect(false)` this succeeds even while the
    /// server is down (calls then answer [`Error::Unavailable`] until it is back).
    pub async fn connect(config: PgConfig) -> Result<PgStore> {
        check_schema("schema", &config.schema)?;
        check_url(&config.url)?;
        let mut options = PgConnectOptions::from_str(&config.url)
            .map_err(|e| Error::invalid("url", e.to_string()))?
            .application_name(&config.application_name);
        if config.statement_cache {
            // Our statements are planned once per connection: their generic plans are
            // the ones the plan tests check (partial-index scans), and re-planning the
            // claim on every call would cost more than running it. Sent as a startup
            // option, never as a SET on the claim or finalize path. Generic plans
            // estimate `LIMIT $n` as a share of the table, so their cost grows with it;
            // JIT off keeps the server from compiling them once the estimate passes
            // `jit_above_cost` (see `PgConfig::jit`).
            options = options.options([("plan_cache_mode", "force_generic_plan")]);
            if !config.jit {
                options = options.options([("jit", "off")]);
            }
        } else {
            options = options.statement_cache_capacity(0);
        }
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .min_connections(0)
            .acquire_timeout(config.acquire_timeout)
            // A dead connection fails its first statement (Unavailable) and is then
            // dropped by the release check; no extra round trip on every acquire.
            .test_before_acquire(false)
            .connect_lazy_with(options.clone());
        let channel = format!("tenure_{}", config.schema);
        let wake = WakeSignal::new();
        let store = PgStore {
            inner: Arc::new(Inner {
                pool,
                options: options.clone(),
                max_connections: config.max_connections,
                sql: Sql::new(&config.schema),
                schema: config.schema.clone(),
                clock: config.clock.clone(),
                limits: config.limits,
                keep_done: config.keep_done,
                statement_cache: config.statement_cache,
                wake: wake.clone(),
                listening: config.listen,
                channel: channel.clone(),
                scope_races: AtomicU64::new(0),
                listener: Mutex::new(None),
            }),
        };
        if config.migrate_on_connect {
            store.migrate().await?;
        }
        if config.listen {
            // Not listening yet: workers poll at their base until the listener is up.
            wake.set_health(WakeHealth::Down);
            let task = listen::spawn(options, channel, wake);
            if let Ok(mut guard) = store.inner.listener.lock() {
                *guard = Some(task);
            }
        }
        Ok(store)
    }

    /// Applies every missing migration to the configured schema, creating it if needed.
    /// Safe to run from several processes at once; a schema newer than this code
    /// answers [`Error::Conflict`].
    pub async fn migrate(&self) -> Result<()> {
        let tx = self.begin().await?;
        migrate::run(tx, &self.inner.schema).await
    }

    /// A transaction on a pooled connection, acquired as [`diagnosed`] says.
    async fn begin(&self) -> Result<Transaction<'static, Postgres>> {
        let pool = &self.inner.pool;
        diagnosed(
            pool,
            &self.inner.options,
            self.inner.max_connections,
            pool.begin(),
        )
        .await
        .map_err(map)
    }

    /// A statement, prepared and cached per connection unless statement caching is
    /// off (then unnamed, parsed anew each time).
    fn query<'q>(&self, sql: &'q str) -> PgQuery<'q> {
        sqlx::query(sql).persistent(self.inner.statement_cache)
    }

    /// A connection for one call (see [`Session`]).
    async fn raw_session(&self) -> std::result::Result<Session, sqlx::Error> {
        let (pool, options, max) = (
            &self.inner.pool,
            &self.inner.options,
            self.inner.max_connections,
        );
        if self.inner.statement_cache {
            Ok(Session::Auto(
                diagnosed(pool, options, max, pool.acquire()).await?,
            ))
        } else {
            Ok(Session::Tx(
                diagnosed(pool, options, max, pool.begin()).await?,
            ))
        }
    }

    /// [`PgStore::raw_session`], mapped.
    async fn session(&self) -> Result<Session> {
        self.raw_session().await.map_err(map)
    }

    /// Runs one statement in its own session and returns its rows.
    async fn fetch_all(&self, q: PgQuery<'_>) -> Result<Vec<PgRow>> {
        let mut s = self.session().await?;
        let rows = q.fetch_all(&mut *s).await.map_err(map)?;
        s.finish().await?;
        Ok(rows)
    }

    /// Runs one statement in its own session and returns its one row.
    async fn fetch_one(&self, q: PgQuery<'_>) -> Result<PgRow> {
        let mut s = self.session().await?;
        let row = q.fetch_one(&mut *s).await.map_err(map)?;
        s.finish().await?;
        Ok(row)
    }

    /// Runs one statement in its own session and returns its row, if any.
    async fn fetch_optional(&self, q: PgQuery<'_>) -> Result<Option<PgRow>> {
        let mut s = self.session().await?;
        let row = q.fetch_optional(&mut *s).await.map_err(map)?;
        s.finish().await?;
        Ok(row)
    }

    /// Runs one statement in its own session and returns the rows it changed.
    async fn execute(&self, q: PgQuery<'_>) -> Result<u64> {
        let mut s = self.session().await?;
        let n = q.execute(&mut *s).await.map_err(map)?.rows_affected();
        s.finish().await?;
        Ok(n)
    }

    /// The statements of this store (for tests that read their plans).
    #[cfg(test)]
    pub(crate) fn sql(&self) -> &Sql {
        &self.inner.sql
    }

    /// How many claims the scope index refused and this handle picked again.
    #[cfg(test)]
    pub(crate) fn scope_races(&self) -> u64 {
        self.inner.scope_races.load(Ordering::Relaxed)
    }

    /// The schema this store uses.
    pub fn schema(&self) -> &str {
        &self.inner.schema
    }

    /// The connection pool (for tests, diagnostics and transactional enqueue).
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// Closes the pool: waits for calls in flight and closes every connection. Later
    /// calls on any handle answer [`Error::Internal`].
    pub async fn close(&self) {
        if let Ok(mut guard) = self.inner.listener.lock() {
            if let Some(task) = guard.take() {
                task.abort();
            }
        }
        self.inner.pool.close().await;
    }

    /// The limits params are validated against.
    pub(crate) fn limits_ref(&self) -> &Limits {
        &self.inner.limits
    }

    /// Now, on the store's clock.
    pub(crate) fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    /// Fires this handle's in-process wake signal.
    pub(crate) fn notify_local(&self) {
        self.inner.wake.notify();
    }

    /// G14: a pinned enqueue needs a registered instance; checked before any write.
    pub(crate) async fn check_pin(
        &self,
        conn: &mut PgConnection,
        params: &EnqueueParams,
    ) -> Result<()> {
        let Some(who) = &params.pin_to else {
            return Ok(());
        };
        let registered: bool = self
            .query(&self.inner.sql.instance_registered)
            .bind(who.as_str())
            .fetch_one(&mut *conn)
            .await
            .map_err(map)?
            .try_get(0)
            .map_err(map)?;
        if registered {
            Ok(())
        } else {
            Err(Error::not_found("instance", who.as_str()))
        }
    }

    /// G14: pins the streams of the items the enqueue inserted (`out` tells which) to
    /// the pinned enqueue's instance, where they have no pin (first write wins).
    pub(crate) async fn pin_enqueued(
        &self,
        conn: &mut PgConnection,
        params: &EnqueueParams,
        out: &[Enqueued],
    ) -> Result<()> {
        let Some(who) = &params.pin_to else {
            return Ok(());
        };
        let mut streams: Vec<String> = params
            .items
            .iter()
            .zip(out)
            .filter(|(it, e)| !e.duplicate && e.id == it.id)
            .filter_map(|(it, _)| it.stream.as_ref().map(|s| s.as_str().to_owned()))
            .collect();
        if streams.is_empty() {
            return Ok(());
        }
        streams.sort();
        streams.dedup();
        self.query(&self.inner.sql.pin_enqueued)
            .bind(who.as_str())
            .bind(&streams)
            .execute(&mut *conn)
            .await
            .map_err(map)?;
        Ok(())
    }

    /// Enqueue steps on one connection that is inside a transaction: dedup keys, then
    /// stream counts, then the rows.
    pub(crate) async fn enqueue_steps(
        &self,
        conn: &mut PgConnection,
        items: &[NewItem],
        now: Timestamp,
    ) -> Result<Vec<Enqueued>> {
        let sql = &self.inner.sql;
        // G11: the first occurrence of each (queue, key) in the call decides.
        let mut first: HashMap<(&str, &str), usize> = HashMap::new();
        for (i, it) in items.iter().enumerate() {
            if let Some(k) = &it.dedup_key {
                first.entry((it.queue.as_str(), k.as_str())).or_insert(i);
            }
        }
        let mut fresh: HashSet<(String, String)> = HashSet::new();
        let mut existing: HashMap<(String, String), Uuid> = HashMap::new();
        if !first.is_empty() {
            let mut keys: Vec<(&(&str, &str), &usize)> = first.iter().collect();
            keys.sort();
            let (mut q, mut k, mut ids, mut exp) = (vec![], vec![], vec![], vec![]);
            for ((queue, key), idx) in &keys {
                let it = &items[**idx];
                q.push(queue.to_string());
                k.push(key.to_string());
                ids.push(*it.id.as_uuid());
                exp.push((now + it.dedup_window).as_micros());
            }
            let rows = self
                .query(&sql.dedup_claim_keys)
                .bind(now.as_micros())
                .bind(&q)
                .bind(&k)
                .bind(&ids)
                .bind(&exp)
                .fetch_all(&mut *conn)
                .await
                .map_err(map)?;
            for r in rows {
                fresh.insert((r.try_get(0).map_err(map)?, r.try_get(1).map_err(map)?));
            }
            let (mut dq, mut dk) = (vec![], vec![]);
            for (qq, kk) in q.iter().zip(&k) {
                if !fresh.contains(&(qq.clone(), kk.clone())) {
                    dq.push(qq.clone());
                    dk.push(kk.clone());
                }
            }
            if !dq.is_empty() {
                let rows = self
                    .query(&sql.dedup_existing)
                    .bind(&dq)
                    .bind(&dk)
                    .fetch_all(&mut *conn)
                    .await
                    .map_err(map)?;
                for r in rows {
                    existing.insert(
                        (r.try_get(0).map_err(map)?, r.try_get(1).map_err(map)?),
                        r.try_get(2).map_err(map)?,
                    );
                }
            }
        }
        // Which items are inserted, and the answer for each.
        let mut answers = Vec::with_capacity(items.len());
        let mut insert: Vec<&NewItem> = Vec::with_capacity(items.len());
        for (i, it) in items.iter().enumerate() {
            let Some(k) = &it.dedup_key else {
                answers.push(Enqueued {
                    id: it.id,
                    duplicate: false,
                });
                insert.push(it);
                continue;
            };
            let key = (it.queue.as_str(), k.as_str());
            let owned = (key.0.to_owned(), key.1.to_owned());
            let first_idx = first.get(&key).copied().unwrap_or(i);
            if fresh.contains(&owned) {
                if first_idx == i {
                    answers.push(Enqueued {
                        id: it.id,
                        duplicate: false,
                    });
                    insert.push(it);
                } else {
                    answers.push(Enqueued {
                        id: items[first_idx].id,
                        duplicate: true,
                    });
                }
            } else {
                let id = existing.get(&owned).copied().ok_or_else(|| {
                    Error::internal(STORE, format!("dedup key {:?} vanished", key.1))
                })?;
                answers.push(Enqueued {
                    id: ItemId::from_uuid(id),
                    duplicate: true,
                });
            }
        }
        if insert.is_empty() {
            return Ok(answers);
        }
        // G9: lock and count each stream; a stream with no unfinished item before this
        // call gets its first new item as head.
        let mut per_stream: BTreeMap<&str, i64> = BTreeMap::new();
        for it in &insert {
            if let Some(s) = &it.stream {
                *per_stream.entry(s.as_str()).or_default() += 1;
            }
        }
        let mut heads_free: HashSet<String> = HashSet::new();
        if !per_stream.is_empty() {
            let names: Vec<String> = per_stream.keys().map(|s| s.to_string()).collect();
            let added: Vec<i64> = per_stream.values().copied().collect();
            let rows = self
                .query(&sql.stream_reserve)
                .bind(&names)
                .bind(&added)
                .fetch_all(&mut *conn)
                .await
                .map_err(map)?;
            for r in rows {
                let name: String = r.try_get(0).map_err(map)?;
                let pending: i64 = r.try_get(1).map_err(map)?;
                if pending == per_stream.get(name.as_str()).copied().unwrap_or(-1) {
                    heads_free.insert(name);
                }
            }
        }
        let heads: Vec<bool> = insert
            .iter()
            .map(|it| match &it.stream {
                None => true,
                Some(s) => heads_free.remove(s.as_str()),
            })
            .collect();
        self.insert_rows(&mut *conn, &insert, &heads, now).await?;
        Ok(answers)
    }

    /// Inserts rows with their head flags, sending the NOTIFY when listening.
    async fn insert_rows(
        &self,
        conn: &mut PgConnection,
        insert: &[&NewItem],
        heads: &[bool],
        now: Timestamp,
    ) -> Result<()> {
        let n = insert.len();
        let mut ids = Vec::with_capacity(n);
        let mut queues = Vec::with_capacity(n);
        let mut payloads: Vec<&[u8]> = Vec::with_capacity(n);
        let mut streams = Vec::with_capacity(n);
        let mut scopes = Vec::with_capacity(n);
        let mut dedups = Vec::with_capacity(n);
        let mut prios = Vec::with_capacity(n);
        let mut run_ats = Vec::with_capacity(n);
        let mut max_attempts = Vec::with_capacity(n);
        let mut max_stalls = Vec::with_capacity(n);
        let mut max_renewals = Vec::with_capacity(n);
        let mut phashes = Vec::with_capacity(n);
        for it in insert {
            ids.push(*it.id.as_uuid());
            queues.push(it.queue.as_str());
            payloads.push(&it.payload);
            streams.push(it.stream.as_ref().map(|s| s.as_str()));
            scopes.push(it.scope.as_ref().map(|s| s.as_str()));
            dedups.push(it.dedup_key.as_ref().map(|s| s.as_str()));
            prios.push(it.priority);
            run_ats.push(it.schedule.run_at(now).as_micros());
            max_attempts.push(i32_of("max_attempts", it.max_attempts)?);
            max_stalls.push(i32_of("max_stalls", it.max_stalls)?);
            max_renewals.push(i32_of("max_renewals", it.max_renewals)?);
            phashes.push(key_hash(it.stream.as_ref(), it.id));
        }
        let sql = if self.inner.listening {
            &self.inner.sql.enqueue_notify
        } else {
            &self.inner.sql.enqueue
        };
        let mut q = self
            .query(sql)
            .bind(now.as_micros())
            .bind(&ids)
            .bind(&queues)
            .bind(&payloads)
            .bind(&streams)
            .bind(&scopes)
            .bind(&dedups)
            .bind(&prios)
            .bind(&run_ats)
            .bind(heads)
            .bind(&max_attempts)
            .bind(&max_stalls)
            .bind(&max_renewals)
            .bind(&phashes);
        if self.inner.listening {
            q = q.bind(&self.inner.channel);
        }
        q.execute(conn).await.map_err(map)?;
        Ok(())
    }

    /// One run of the claim statement on `exec` (the pool, or a test's transaction).
    pub(crate) async fn claim_run<'e>(
        &self,
        exec: impl sqlx::PgExecutor<'e>,
        queues: &[String],
        now: Timestamp,
        params: &ClaimParams,
        check_expired: bool,
    ) -> std::result::Result<ClaimRun, sqlx::Error> {
        let expires = now + params.lease_for;
        let sql = &self.inner.sql;
        let stmt = match params.partitioning {
            None => &sql.claim,
            Some(_) => &sql.claim_partitioned,
        };
        let mut q = self
            .query(stmt)
            .bind(queues)
            .bind(now.as_micros())
            .bind(i64::from(params.limit))
            .bind(params.owner.as_str())
            .bind(expires.as_micros())
            .bind(check_expired);
        if let Some(p) = params.partitioning {
            q = q.bind(i64::from(p.partitions));
        }
        let rows = q.fetch_all(exec).await?;
        let mut items = Vec::with_capacity(rows.len());
        for row in &rows {
            if params.partitioning.is_some() && !row.try_get::<bool, _>("registered")? {
                return Ok(ClaimRun::NotRegistered);
            }
            let expired: bool = row.try_get("expired")?;
            if expired {
                return Ok(ClaimRun::RecoverFirst);
            }
            let id: Option<Uuid> = row.try_get("id")?;
            if id.is_some() {
                items.push(seq_item(row)?);
            }
        }
        Ok(ClaimRun::Claimed(items))
    }

    /// The second pass of a claim: claims one row this call recovered but its pick
    /// found locked, waiting for that lock.
    async fn claim_locked(
        &self,
        id: Uuid,
        queues: &[String],
        now: Timestamp,
        params: &ClaimParams,
    ) -> std::result::Result<Vec<(i64, Item)>, sqlx::Error> {
        let expires = now + params.lease_for;
        let sql = &self.inner.sql;
        let stmt = match params.partitioning {
            None => &sql.claim_locked,
            Some(_) => &sql.claim_locked_partitioned,
        };
        let mut q = self
            .query(stmt)
            .bind([id])
            .bind(now.as_micros())
            .bind(queues)
            .bind(params.owner.as_str())
            .bind(expires.as_micros());
        if let Some(p) = params.partitioning {
            q = q.bind(i64::from(p.partitions));
        }
        let mut s = self.raw_session().await?;
        let rows = q.fetch_all(&mut *s).await?;
        s.commit().await?;
        rows.iter().map(seq_item).collect()
    }

    /// G9: claims the runs behind the stream heads among `heads` (claimed already) and
    /// answers every lease in claim order, each run right behind its head in stream
    /// order. Best effort: a scope race or an error here leaves the heads claimed and
    /// answered alone (a run of one), as the tails' claim changed nothing.
    async fn with_runs(
        &self,
        mut heads: Vec<(i64, Item)>,
        queues: &[String],
        now: Timestamp,
        params: &ClaimParams,
    ) -> Result<Vec<Lease>> {
        heads.sort_by_key(|(seq, it)| (it.priority, it.run_at, *seq));
        let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
        let run = usize::try_from(params.stream_run).unwrap_or(1);
        let mut free = limit.saturating_sub(heads.len());
        let (mut streams, mut seqs, mut rooms) = (Vec::new(), Vec::new(), Vec::new());
        for (seq, it) in &heads {
            let Some(stream) = &it.stream else { continue };
            let room = (run - 1).min(free);
            if room == 0 {
                break;
            }
            free -= room;
            streams.push(stream.as_str().to_owned());
            seqs.push(*seq);
            rooms.push(i64::try_from(room).unwrap_or(i64::MAX));
        }
        let mut tails: HashMap<String, Vec<(i64, Item)>> = HashMap::new();
        if !streams.is_empty() {
            let expires = now + params.lease_for;
            let answer = self
                .fetch_all(
                    self.query(&self.inner.sql.claim_run_tails)
                        .bind(&streams)
                        .bind(&seqs)
                        .bind(&rooms)
                        .bind(now.as_micros())
                        .bind(queues)
                        .bind(params.owner.as_str())
                        .bind(expires.as_micros()),
                )
                .await;
            match answer {
                Ok(rows) => {
                    for row in &rows {
                        let (seq, it) = seq_item(row).map_err(map)?;
                        let key = it.stream.as_ref().map(|s| s.as_str().to_owned());
                        tails
                            .entry(key.unwrap_or_default())
                            .or_default()
                            .push((seq, it));
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "tenure-postgres: the runs behind claimed heads");
                }
            }
        }
        let mut out = Vec::with_capacity(heads.len() + tails.values().map(Vec::len).sum::<usize>());
        for (_, head) in heads {
            let behind = head.stream.as_ref().and_then(|s| tails.remove(s.as_str()));
            out.push(Lease::from_item(head)?);
            if let Some(mut behind) = behind {
                behind.sort_by_key(|(seq, _)| *seq);
                for (_, it) in behind {
                    out.push(Lease::from_item(it)?);
                }
            }
        }
        Ok(out)
    }

    /// machine::recover over up to `limit` expired leases of `queues` (all when None);
    /// answers the counts and the ids put back to ready. The items of stream runs
    /// behind an expired item are put back first, so they count no stall (G9).
    async fn recover(
        &self,
        now: Timestamp,
        limit: i64,
        queues: Option<&[String]>,
    ) -> Result<(Recovered, Vec<Uuid>)> {
        self.execute(
            self.query(&self.inner.sql.put_back_expired)
                .bind(now.as_micros())
                .bind(queues),
        )
        .await?;
        let rows = self
            .fetch_all(
                self.query(&self.inner.sql.recover)
                    .bind(now.as_micros())
                    .bind(limit)
                    .bind(queues),
            )
            .await?;
        let mut out = Recovered::default();
        let mut ready = Vec::new();
        for r in rows {
            let id: Uuid = r.try_get(0).map_err(map)?;
            let state: String = r.try_get(1).map_err(map)?;
            if state == ItemState::Ready.as_str() {
                out.requeued += 1;
                ready.push(id);
            } else {
                out.dead += 1;
            }
        }
        Ok((out, ready))
    }

    // The fenced finalizes on one connection: the whole of `complete`, `fail` and
    // `release` once a connection is at hand, shared by the store's own calls (on a
    // session of their own) and the `_in_tx` calls (on the caller's transaction).

    /// [`Store::complete`] on `conn`: one fenced statement, one answer per token.
    pub(crate) async fn complete_on(
        &self,
        conn: &mut PgConnection,
        params: &CompleteParams,
    ) -> Result<Vec<TokenOutcome>> {
        let now = self.inner.clock.now();
        let (ids, attempts) = token_arrays(params.tokens.iter())?;
        let rows = self
            .query(&self.inner.sql.complete)
            .bind(now.as_micros())
            .bind(&ids)
            .bind(&attempts)
            .bind(self.inner.keep_done)
            .fetch_all(&mut *conn)
            .await
            .map_err(map)?;
        let mut accepted: HashSet<Uuid> = HashSet::with_capacity(rows.len());
        for r in rows {
            accepted.insert(r.try_get(0).map_err(map)?);
        }
        Ok(ids
            .iter()
            .map(|id| {
                if accepted.contains(id) {
                    TokenOutcome::Accepted
                } else {
                    TokenOutcome::LeaseLost
                }
            })
            .collect())
    }

    /// [`Store::fail`] on `conn`: one fenced statement, one answer per token.
    pub(crate) async fn fail_on(
        &self,
        conn: &mut PgConnection,
        params: &FailParams,
    ) -> Result<Vec<FailOutcome>> {
        let now = self.inner.clock.now();
        let (ids, attempts) = token_arrays(params.failures.iter().map(|f| &f.token))?;
        let retry_at: Vec<Option<i64>> = params
            .failures
            .iter()
            .map(|f| match f.retry {
                Retry::After(d) => Some((now + d).as_micros()),
                Retry::Never => None,
            })
            .collect();
        let errors: Vec<&str> = params.failures.iter().map(|f| f.error.as_str()).collect();
        let rows = self
            .query(&self.inner.sql.fail)
            .bind(now.as_micros())
            .bind(&ids)
            .bind(&attempts)
            .bind(&retry_at)
            .bind(&errors)
            .fetch_all(&mut *conn)
            .await
            .map_err(map)?;
        let mut by_id: HashMap<Uuid, FailOutcome> = HashMap::with_capacity(rows.len());
        for r in rows {
            let id: Uuid = r.try_get(0).map_err(map)?;
            let state: String = r.try_get(1).map_err(map)?;
            let run_at: i64 = r.try_get(2).map_err(map)?;
            let outcome = if state == ItemState::Ready.as_str() {
                FailOutcome::Retrying {
                    run_at: Timestamp::from_micros(run_at),
                }
            } else {
                FailOutcome::Dead
            };
            by_id.insert(id, outcome);
        }
        Ok(ids
            .iter()
            .map(|id| by_id.remove(id).unwrap_or(FailOutcome::LeaseLost))
            .collect())
    }

    /// [`Store::release`] on `conn`: one fenced statement, one answer per token.
    pub(crate) async fn release_on(
        &self,
        conn: &mut PgConnection,
        params: &ReleaseParams,
    ) -> Result<Vec<TokenOutcome>> {
        let now = self.inner.clock.now();
        let (ids, attempts) = token_arrays(params.tokens.iter())?;
        let rows = self
            .query(&self.inner.sql.release)
            .bind(now.as_micros())
            .bind(&ids)
            .bind(&attempts)
            .fetch_all(&mut *conn)
            .await
            .map_err(map)?;
        let mut done: HashSet<Uuid> = HashSet::with_capacity(rows.len());
        for r in rows {
            done.insert(r.try_get(0).map_err(map)?);
        }
        Ok(ids
            .iter()
            .map(|id| {
                if done.contains(id) {
                    TokenOutcome::Accepted
                } else {
                    TokenOutcome::LeaseLost
                }
            })
            .collect())
    }

    /// Finishes rows with their streams in one transaction: `sql` deletes them and
    /// answers each one's id and, for a stream head, its stream; then the promote of
    /// those streams, in statements of its own (G9).
    async fn finish_with_streams(
        &self,
        sql: &str,
        now: Timestamp,
        ids: &[Uuid],
        attempts: Option<&[i32]>,
    ) -> Result<Vec<Uuid>> {
        let mut tx = self.begin().await?;
        let mut q = self.query(sql).bind(now.as_micros()).bind(ids);
        if let Some(a) = attempts {
            q = q.bind(a);
        }
        let rows = q.fetch_all(&mut *tx).await.map_err(map)?;
        let mut done = Vec::with_capacity(rows.len());
        let mut streams: Vec<String> = Vec::new();
        for r in &rows {
            done.push(r.try_get::<Uuid, _>(0).map_err(map)?);
            if let Some(s) = r.try_get::<Option<String>, _>(1).map_err(map)? {
                streams.push(s);
            }
        }
        if !streams.is_empty() {
            streams.sort();
            streams.dedup();
            self.query(&self.inner.sql.promote)
                .bind(&streams)
                .execute(&mut *tx)
                .await
                .map_err(map)?;
        }
        tx.commit().await.map_err(map)?;
        Ok(done)
    }
}

/// An item row with its enqueue sequence (the last claim-order key).
fn seq_item(row: &PgRow) -> std::result::Result<(i64, Item), sqlx::Error> {
    let seq: i64 = row.try_get("seq")?;
    let item = rows::item(row).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    Ok((seq, item))
}

/// Leases in claim order (G8): priority, run_at, enqueue order.
fn leases(mut items: Vec<(i64, Item)>) -> Result<Vec<Lease>> {
    items.sort_by_key(|(seq, it)| (it.priority, it.run_at, *seq));
    items
        .into_iter()
        .map(|(_, it)| Lease::from_item(it))
        .collect()
}

/// A connection for one call: in autocommit, or (without statement caching, for a
/// transaction-pooling proxy) inside a transaction of its own, so that the proxy keeps
/// one server connection from a statement's parse to its execution.
enum Session {
    Auto(PoolConnection<Postgres>),
    Tx(Transaction<'static, Postgres>),
}

impl Session {
    /// Commits the call's transaction, if it has one.
    async fn commit(self) -> std::result::Result<(), sqlx::Error> {
        match self {
            Session::Auto(_) => Ok(()),
            Session::Tx(tx) => tx.commit().await,
        }
    }

    /// [`Session::commit`], mapped.
    async fn finish(self) -> Result<()> {
        self.commit().await.map_err(map)
    }

    /// Waits, after a failed statement, until its locks are gone before the caller
    /// retries. The server sends the error before its backend has finished aborting,
    /// and sqlx rolls a dropped transaction back only when the connection is next
    /// used; a retry on another pooled connection could meanwhile find the rows the
    /// failed statement held still locked and skip them. A round trip on the same
    /// connection (a ping, or the explicit rollback) returns only after the abort.
    async fn settle(self) {
        let outcome = match self {
            Session::Auto(mut c) => sqlx::Connection::ping(&mut *c).await,
            Session::Tx(tx) => tx.rollback().await,
        };
        if let Err(e) = outcome {
            tracing::debug!(error = %e, "tenure-postgres: settling a failed claim");
        }
    }
}

impl Deref for Session {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        match self {
            Session::Auto(c) => c,
            Session::Tx(t) => t,
        }
    }
}

impl DerefMut for Session {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self {
            Session::Auto(c) => c,
            Session::Tx(t) => t,
        }
    }
}

type PgQuery<'q> = Query<'q, Postgres, PgArguments>;

fn count(row: &PgRow, idx: usize) -> Result<u64> {
    let n: i64 = row.try_get(idx).map_err(map)?;
    u64::try_from(n).map_err(|e| Error::internal(STORE, e.to_string()))
}

fn is_scope_race(e: &sqlx::Error) -> bool {
    matches!(db_code(e), Some((code, Some(c))) if code == "23505" && c == SCOPE_INDEX)
}

fn token_arrays<'a>(
    tokens: impl Iterator<Item = &'a tenure_core::LeaseToken>,
) -> Result<(Vec<Uuid>, Vec<i32>)> {
    let mut ids = Vec::new();
    let mut attempts = Vec::new();
    for t in tokens {
        ids.push(*t.id.as_uuid());
        // An attempt beyond i32 cannot exist in the table: it will answer lease lost.
        attempts.push(i32::try_from(t.attempt).unwrap_or(-1));
    }
    Ok((ids, attempts))
}

#[async_trait]
impl Store for PgStore {
    fn name(&self) -> &'static str {
        STORE
    }

    fn capabilities(&self) -> Capabilities {
        let caps = Capabilities::default()
            .with_partitioned_claiming()
            .with_stream_runs();
        if self.inner.listening {
            caps.with_cross_process_wakeups()
        } else {
            caps
        }
    }

    fn limits(&self) -> Limits {
        self.inner.limits
    }

    fn wake_signal(&self) -> Option<WakeSignal> {
        Some(self.inner.wake.clone())
    }

    async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        params.validate_schedule(&self.inner.limits, now)?;
        let simple = params.pin_to.is_none()
            && params
                .items
                .iter()
                .all(|it| it.dedup_key.is_none() && it.stream.is_none());
        let out = if simple {
            // One statement: rows and NOTIFY, atomically.
            let all: Vec<&NewItem> = params.items.iter().collect();
            let heads = vec![true; all.len()];
            let mut s = self.session().await?;
            self.insert_rows(&mut s, &all, &heads, now).await?;
            s.finish().await?;
            all.iter()
                .map(|it| Enqueued {
                    id: it.id,
                    duplicate: false,
                })
                .collect()
        } else {
            let mut tx = self.begin().await?;
            self.check_pin(&mut tx, &params).await?;
            let out = self.enqueue_steps(&mut tx, &params.items, now).await?;
            self.pin_enqueued(&mut tx, &params, &out).await?;
            tx.commit().await.map_err(map)?;
            out
        };
        self.inner.wake.notify();
        Ok(out)
    }

    async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        let queues: Vec<String> = params
            .queues
            .iter()
            .map(|q| q.as_str().to_owned())
            .collect();
        // A queue named twice would be scanned twice and fill the limit with repeats.
        let queues = {
            let mut q = queues;
            q.sort();
            q.dedup();
            q
        };
        let mut check_expired = true;
        let mut recovered: Vec<Uuid> = Vec::new();
        let mut races = 0;
        loop {
            let run = {
                let mut s = self.session().await?;
                let run = self
                    .claim_run(&mut *s, &queues, now, &params, check_expired)
                    .await;
                match &run {
                    Ok(_) => s.finish().await?,
                    Err(e) if is_scope_race(e) => s.settle().await,
                    Err(_) => {}
                }
                run
            };
            match run {
                Ok(ClaimRun::NotRegistered) => {
                    return Err(Error::not_found("instance", params.owner.as_str()));
                }
                Ok(ClaimRun::RecoverFirst) => {
                    // Contract: recover the queues' expired leases first, then pick.
                    let (_, ready) = self
                        .recover(now, CLAIM_RECOVER_LIMIT, Some(&queues))
                        .await?;
                    recovered = ready;
                    check_expired = false;
                }
                Ok(ClaimRun::Claimed(mut items)) => {
                    // A row this call recovered may have been locked at the pick by a
                    // stale finalize whose fence then failed: the row is claimable,
                    // so wait for it instead of passing it over. Best effort: the
                    // first pass's claims are committed, so an error here keeps them.
                    let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
                    for id in recovered.drain(..) {
                        if items.len() >= limit {
                            break;
                        }
                        if items.iter().any(|(_, it)| *it.id.as_uuid() == id) {
                            continue;
                        }
                        match self.claim_locked(id, &queues, now, &params).await {
                            Ok(more) => items.extend(more),
                            Err(e) => {
                                if is_scope_race(&e) {
                                    self.inner.scope_races.fetch_add(1, Ordering::Relaxed);
                                }
                                tracing::debug!(error = %e, "tenure-postgres: second claim pass");
                                break;
                            }
                        }
                    }
                    if params.stream_run > 1 && !items.is_empty() {
                        return self.with_runs(items, &queues, now, &params).await;
                    }
                    return leases(items);
                }
                // G10: a racing claimer committed a running item of a scope we picked;
                // the partial unique index refused ours and the statement changed
                // nothing. Pick again: the busy scope is now passed over.
                Err(e) if is_scope_race(&e) => {
                    self.inner.scope_races.fetch_add(1, Ordering::Relaxed);
                    races += 1;
                    if races > SCOPE_RACE_RETRIES {
                        return Ok(Vec::new());
                    }
                }
                Err(e) => return Err(map(e)),
            }
        }
    }

    async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        let expires = now + params.lease_for;
        let (ids, attempts) = token_arrays(params.tokens.iter())?;
        let rows = self
            .fetch_all(
                self.query(&self.inner.sql.renew)
                    .bind(now.as_micros())
                    .bind(&ids)
                    .bind(&attempts)
                    .bind(expires.as_micros()),
            )
            .await?;
        let mut by_id: HashMap<Uuid, RenewOutcome> = HashMap::with_capacity(rows.len());
        for r in rows {
            let id: Uuid = r.try_get(0).map_err(map)?;
            let max: i32 = r.try_get(1).map_err(map)?;
            let renewals: Option<i32> = r.try_get(2).map_err(map)?;
            let outcome = match renewals {
                Some(n) => RenewOutcome::Renewed {
                    expires_at: expires,
                    renewals: u32_of("renewals", n)?,
                },
                None => RenewOutcome::LimitReached {
                    limit: u32_of("max_renewals", max)?,
                },
            };
            by_id.insert(id, outcome);
        }
        Ok(params
            .tokens
            .iter()
            .map(|t| {
                by_id
                    .remove(t.id.as_uuid())
                    .unwrap_or(RenewOutcome::LeaseLost)
            })
            .collect())
    }

    async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
        params.validate(&self.inner.limits)?;
        let mut s = self.session().await?;
        let out = self.complete_on(&mut s, &params).await?;
        s.finish().await?;
        Ok(out)
    }

    async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>> {
        params.validate(&self.inner.limits)?;
        let mut s = self.session().await?;
        let out = self.fail_on(&mut s, &params).await?;
        s.finish().await?;
        Ok(out)
    }

    async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        params.validate(&self.inner.limits)?;
        let mut s = self.session().await?;
        let out = self.release_on(&mut s, &params).await?;
        s.finish().await?;
        Ok(out)
    }

    async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        Ok(self.recover(now, i64::from(params.limit), None).await?.0)
    }

    async fn purge(&self, params: PurgeParams) -> Result<Purged> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        let cutoff = now - params.keep_done_for;
        let limit = i64::from(params.limit);
        let items = count(
            &self
                .fetch_one(
                    self.query(&self.inner.sql.purge_done)
                        .bind(cutoff.as_micros())
                        .bind(limit),
                )
                .await?,
            0,
        )?;
        let keys = count(
            &self
                .fetch_one(
                    self.query(&self.inner.sql.purge_dedup)
                        .bind(now.as_micros())
                        .bind(limit),
                )
                .await?,
            0,
        )?;
        self.execute(self.query(&self.inner.sql.purge_streams))
            .await?;
        Ok(Purged {
            items,
            dedup_keys: keys,
        })
    }

    async fn dead_requeue(&self, params: RequeueParams) -> Result<u64> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        let ids: Vec<Uuid> = match &params.filter {
            Some(f) => self.op_dead_matching(f, now).await?,
            None => params.ids.iter().map(|i| *i.as_uuid()).collect(),
        };
        if ids.is_empty() {
            return Ok(0);
        }
        let n = self
            .execute(
                self.query(&self.inner.sql.requeue)
                    .bind(now.as_micros())
                    .bind(&ids)
                    .bind(i32_of("additional_attempts", params.additional_attempts)?),
            )
            .await?;
        Ok(n)
    }

    async fn dead_discard(&self, params: DiscardParams) -> Result<u64> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        let ids: Vec<Uuid> = match &params.filter {
            Some(f) => self.op_dead_matching(f, now).await?,
            None => params.ids.iter().map(|i| *i.as_uuid()).collect(),
        };
        if ids.is_empty() {
            return Ok(0);
        }
        let done = self
            .finish_with_streams(&self.inner.sql.discard, now, &ids, None)
            .await?;
        Ok(done.len() as u64)
    }

    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        let row = self
            .fetch_optional(self.query(&self.inner.sql.item_get).bind(id.as_uuid()))
            .await?;
        row.as_ref().map(rows::item).transpose()
    }

    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
        let now = self.inner.clock.now();
        let row = self
            .fetch_one(
                self.query(&self.inner.sql.queue_counts)
                    .bind(queue.as_str())
                    .bind(now.as_micros()),
            )
            .await?;
        let oldest: Option<i64> = row.try_get(5).map_err(map)?;
        let paused: bool = row.try_get(6).map_err(map)?;
        Ok(QueueCounts::new(
            count(&row, 0)?,
            count(&row, 1)?,
            count(&row, 2)?,
            count(&row, 3)?,
            count(&row, 4)?,
        )
        .with_paused(paused)
        .with_oldest_ready_age(oldest.map(|at| now.duration_since(Timestamp::from_micros(at)))))
    }

    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        let now = self.inner.clock.now();
        self.execute(
            self.query(&self.inner.sql.heartbeat)
                .bind(params.instance.as_str())
                .bind(now.as_micros()),
        )
        .await?;
        Ok(())
    }

    async fn instance_list(&self) -> Result<Vec<Instance>> {
        let rows = self
            .fetch_all(self.query(&self.inner.sql.instance_list))
            .await?;
        rows.iter()
            .map(|r| {
                let id: String = r.try_get(0).map_err(map)?;
                Ok(Instance {
                    id: OwnerId::new(id)
                        .map_err(|e| Error::internal(STORE, format!("corrupt instance: {e}")))?,
                    started_at: Timestamp::from_micros(r.try_get(1).map_err(map)?),
                    last_seen: Timestamp::from_micros(r.try_get(2).map_err(map)?),
                })
            })
            .collect()
    }

    async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        let cutoff = now - params.stale_after;
        let row = self
            .fetch_one(
                self.query(&self.inner.sql.evict)
                    .bind(now.as_micros())
                    .bind(cutoff.as_micros()),
            )
            .await?;
        let ids: Vec<String> = row.try_get(0).map_err(map)?;
        let instances = ids
            .into_iter()
            .map(|id| {
                OwnerId::new(id)
                    .map_err(|e| Error::internal(STORE, format!("corrupt instance: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Evicted {
            instances,
            released: count(&row, 1)?,
        })
    }

    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        let now = self.inner.clock.now();
        let row = self
            .fetch_one(
                self.query(&self.inner.sql.deregister)
                    .bind(now.as_micros())
                    .bind(params.instance.as_str()),
            )
            .await?;
        let ids: Vec<String> = row.try_get(0).map_err(map)?;
        Ok(Evicted {
            instances: if ids.is_empty() {
                Vec::new()
            } else {
                vec![params.instance]
            },
            released: count(&row, 1)?,
        })
    }

    async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        let expires = now + params.lease_for;
        let won = self
            .fetch_optional(
                self.query(&self.inner.sql.leader_acquire)
                    .bind(params.name.as_str())
                    .bind(params.holder.as_str())
                    .bind(now.as_micros())
                    .bind(expires.as_micros()),
            )
            .await?;
        if let Some(r) = won {
            let term: i64 = r.try_get(0).map_err(map)?;
            let at: i64 = r.try_get(1).map_err(map)?;
            return Ok(LeaderStatus::Leader {
                term: u64::try_from(term).unwrap_or(0),
                expires_at: Timestamp::from_micros(at),
            });
        }
        let r = self
            .fetch_one(
                self.query(&self.inner.sql.leader_read)
                    .bind(params.name.as_str()),
            )
            .await?;
        let holder: String = r.try_get(0).map_err(map)?;
        let term: i64 = r.try_get(1).map_err(map)?;
        let at: i64 = r.try_get(2).map_err(map)?;
        Ok(LeaderStatus::Follower {
            holder: OwnerId::new(holder)
                .map_err(|e| Error::internal(STORE, format!("corrupt leader: {e}")))?,
            term: u64::try_from(term).unwrap_or(0),
            expires_at: Timestamp::from_micros(at),
        })
    }

    async fn leader_resign(&self, params: LeaderParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        let row = self
            .fetch_optional(
                self.query(&self.inner.sql.leader_resign)
                    .bind(params.name.as_str())
                    .bind(params.holder.as_str())
                    .bind(now.as_micros()),
            )
            .await?;
        Ok(row.is_some())
    }

    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        let now = self.inner.clock.now();
        let Some(r) = self
            .fetch_optional(
                self.query(&self.inner.sql.leader_live)
                    .bind(name.as_str())
                    .bind(now.as_micros()),
            )
            .await?
        else {
            return Ok(None);
        };
        let holder: String = r.try_get(0).map_err(map)?;
        let term: i64 = r.try_get(1).map_err(map)?;
        let at: i64 = r.try_get(2).map_err(map)?;
        Ok(Some(LeaderInfo::new(
            OwnerId::new(holder)
                .map_err(|e| Error::internal(STORE, format!("corrupt leader: {e}")))?,
            u64::try_from(term).unwrap_or(0),
            Timestamp::from_micros(at),
        )))
    }

    async fn item_list(
        &self,
        params: tenure_core::ItemListParams,
    ) -> Result<tenure_core::ItemPage> {
        params.validate(&self.inner.limits)?;
        self.op_item_list(params).await
    }

    async fn lease_list(
        &self,
        params: tenure_core::LeaseListParams,
    ) -> Result<tenure_core::LeasePage> {
        params.validate(&self.inner.limits)?;
        self.op_lease_list(params).await
    }

    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        self.op_queue_list().await
    }

    async fn item_cancel(
        &self,
        params: tenure_core::CancelParams,
    ) -> Result<Vec<tenure_core::CancelOutcome>> {
        params.validate(&self.inner.limits)?;
        self.op_item_cancel(params).await
    }

    async fn queue_pause(&self, params: tenure_core::PauseParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        self.op_set_paused(params, true).await
    }

    async fn queue_resume(&self, params: tenure_core::PauseParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        self.op_set_paused(params, false).await
    }
}
