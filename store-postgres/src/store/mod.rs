//! [`PgStore`]: the [`Store`] contract on PostgreSQL.
//!
//! This file holds the struct, its pool and sessions, and its [`Base`] impl. Each group
//! of the contract is implemented in its own file (`claim.rs`, `finalize.rs`,
//! `recovery.rs`, `instances.rs`, `inspect.rs`; see the crate docs, Layout of this
//! crate); core's [`Store`] validates the params before they reach it. The limits
//! group ([`Limiting`](tenure_core::contract::Limiting)) is in `limits.rs`, its claim
//! in `limited_claim.rs`.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use sqlx::postgres::PgArguments;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::query::Query;
use sqlx::{PgConnection, PgPool, Postgres, Row, Transaction};
use tenure_core::contract::Base;
use tenure_core::{
    Capabilities, Error, Limits, Result, SharedClock, Timestamp, WakeHealth, WakeSignal,
};

// The docs name it.
#[cfg(doc)]
use tenure_core::Store;
use tokio::task::JoinHandle;

use crate::connect::{check_schema, check_url, diagnosed};
use crate::error::{idle_since_loss, map};
use crate::sql::Sql;
use crate::{listen, migrate, PgConfig, STORE};

mod claim;
mod enqueue;
pub(crate) use enqueue::Notify;
mod fair;
mod finalize;
mod history;
pub(crate) mod inspect;
mod instances;
mod limited_claim;
mod limits;
mod limits_sql;
mod recovery;

#[cfg(test)]
pub(crate) use claim::ClaimRun;

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
    /// Sends other processes' wake-ups after this store's enqueues commit, when
    /// listening (see `crate::notify`).
    pump: Option<crate::notify::Pump>,
    /// When this store last moved its queues' claim cursors forward, and how many
    /// items it has claimed since (`claim::CursorPace`).
    cursor_pace: Mutex<claim::CursorPace>,
    /// The statements of queue limits (`limits_sql.rs`).
    limits_sql: limits_sql::LimitsSql,
    /// When this handle last asked and heard that the schema has no limits
    /// (`limits.rs`, Which claims take the limited path).
    no_limits_since: Mutex<Option<std::time::Instant>>,
    /// Whether this handle last heard that the schema has limits: its finishes then
    /// fire its wake signal, as a slot may be free (`limits.rs`).
    limits_seen: std::sync::atomic::AtomicBool,
    /// The items this handle claimed under a concurrency limit and has not finished:
    /// their finish frees a slot, so it wakes other processes' workers (`limits.rs`).
    holding_slots: Mutex<std::collections::HashSet<uuid::Uuid>>,
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
            // No round trip on every acquire: a connection is tested on release, and
            // before it is handed out only when it has been idle since before a lost
            // connection was seen (a restart or failover leaves every idle one dead;
            // untested, each would fail one call, one after another).
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if idle_since_loss(meta.idle_for) {
                        // An error closes it; the pool then takes another or opens one.
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .connect_lazy_with(options.clone());
        let channel = format!("tenure_{}", config.schema);
        let wake = WakeSignal::new();
        let pump = config
            .listen
            .then(|| crate::notify::Pump::spawn(pool.clone(), &channel));
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
                pump,
                cursor_pace: Mutex::new(claim::CursorPace::default()),
                limits_sql: limits_sql::LimitsSql::new(&config.schema),
                no_limits_since: Mutex::new(None),
                limits_seen: std::sync::atomic::AtomicBool::new(false),
                holding_slots: Mutex::new(std::collections::HashSet::new()),
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
    ///
    /// An index a migration adds to the items table of an existing schema is built
    /// with `CREATE INDEX CONCURRENTLY` before that migration's transaction, so claims
    /// and finalizes go on while it builds (see the crate docs, Migrations).
    pub async fn migrate(&self) -> Result<()> {
        loop {
            let tx = self.begin().await?;
            match migrate::run(tx, &self.inner.schema).await? {
                migrate::Step::Done => return Ok(()),
                migrate::Step::BuildFirst(ix) => {
                    migrate::build_concurrently(&self.inner.pool, &self.inner.schema, ix).await?;
                }
            }
        }
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
        self.inner
            .scope_races
            .load(std::sync::atomic::Ordering::Relaxed)
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
    /// Asks the pump for a NOTIFY to other processes' listeners, after a commit of
    /// this handle's that made items ready.
    pub(crate) fn wake_others(&self) {
        if let Some(pump) = &self.inner.pump {
            pump.wake();
        }
    }

    pub(crate) fn notify_local(&self) {
        self.inner.wake.notify();
    }
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

impl Base for PgStore {
    fn name(&self) -> &'static str {
        STORE
    }

    fn capabilities(&self) -> Capabilities {
        let caps = Capabilities::default()
            .with_partitioned_claiming()
            .with_stream_runs()
            .with_limits()
            .with_fair_shares();
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
}
