//! [`SqliteStore`]'s own calls and its [`Store`] impl, the operations in contract
//! order. Each call validates its parameters, then runs its SQL (in `ops`) on the
//! writer's connection: the hot calls through [`Writer::call_inline`], the rest
//! through [`Writer::call`].

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use tenure_core::{
    async_trait, Capabilities, ClaimParams, CompleteParams, DeregisterParams, DiscardParams,
    EnqueueParams, Enqueued, Error, EvictParams, Evicted, FailOutcome, FailParams, HeartbeatParams,
    Instance, Item, ItemId, LeaderInfo, LeaderName, LeaderParams, LeaderStatus, Lease, Limits,
    PurgeParams, Purged, QueueCounts, QueueName, RecoverParams, Recovered, ReleaseParams,
    RenewOutcome, RenewParams, RequeueParams, Result, Store, TokenOutcome, WakeSignal,
};

use crate::error::{Phase, STORE};
use crate::writer::Writer;
use crate::{ops, schema, Inner, SqliteConfig, SqliteStore};

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.config.path)
            .field("synchronous", &self.inner.config.synchronous)
            .field("keep_done", &self.inner.config.keep_done)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if missing) the database file, creates or migrates the schema,
    /// and starts the writer thread.
    ///
    /// Async: the file work happens on the writer thread, so opening never blocks the
    /// runtime. It needs no particular runtime.
    ///
    /// # Errors
    /// - [`Error::InvalidInput`] naming `path`: the file cannot be opened for writing
    ///   (missing directory, a directory, no permission) or is not an SQLite database.
    /// - [`Error::Conflict`] (`schema`): the file's schema is newer than this crate.
    /// - [`Error::Unavailable`]: the database stayed busy, or the disk failed.
    /// - [`Error::Corrupt`]: the file is damaged (naming it and what `PRAGMA
    ///   quick_check` finds), or it is empty beside a non-empty `-wal` log (see the
    ///   crate docs, "Damaged and emptied files").
    ///
    /// In each error case nothing was written to the file.
    pub async fn open(config: SqliteConfig) -> Result<SqliteStore> {
        let writer = Writer::start(config.clone()).await?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                config,
                writer,
                wake: WakeSignal::new(),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.config.path
    }

    /// Checkpoints the write-ahead log into the database file and truncates it, then
    /// closes the store's connection, so a stopped program leaves the database in one
    /// file (SQLite removes an empty `-wal` and the `-shm` when the last connection to
    /// the file closes). Waits for the calls in flight. Call it when the program is
    /// done with the store: the writer thread otherwise holds its connection until the
    /// process exits, which leaves the log (up to about 4 MB) beside the file.
    ///
    /// Any handle may close; a later call on any handle opens the file again (without
    /// creating it).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when another connection to the file (a peer, or one of
    /// [`SqliteStore::connection`]) was reading, so the log could not be truncated;
    /// the connection is closed all the same. Other errors as for any call.
    pub async fn close(&self) -> Result<()> {
        self.inner.writer.close().await
    }

    /// The configuration this store was opened with.
    pub fn config(&self) -> &SqliteConfig {
        &self.inner.config
    }

    /// Opens a new connection to the same file with the store's settings (WAL, busy
    /// timeout, synchronous level), for the application's own transactions, such as
    /// the ones [`SqliteStore::enqueue_in_tx`] and [`SqliteStore::complete_in_tx`]
    /// join. Blocking (a file open).
    ///
    /// Start write transactions on it with
    /// `conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)`: a
    /// deferred transaction that reads first and writes later can fail with a busy
    /// error at once instead of waiting.
    pub fn connection(&self) -> Result<rusqlite::Connection> {
        let conn = schema::connect(&self.inner.config, false)?;
        schema::tune(&conn, &self.inner.config, Phase::Call)?;
        Ok(conn)
    }

    /// Fires the wake signal, as an enqueue through this handle does. Call it after
    /// committing a transaction that used [`SqliteStore::enqueue_in_tx`].
    pub fn notify_enqueued(&self) {
        self.inner.wake.notify();
    }

    fn limits_ref(&self) -> &Limits {
        &self.inner.config.limits
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn name(&self) -> &'static str {
        STORE
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
            .with_partitioned_claiming()
            .with_stream_runs()
    }

    fn limits(&self) -> Limits {
        self.inner.config.limits
    }

    /// Enqueues through this handle and its clones fire it. Its health is always
    /// [`WakeHealth::Local`](tenure_core::WakeHealth::Local): it never goes down, but
    /// other processes (or other [`SqliteStore::open`]s) writing the same file do not
    /// fire it, so workers keep their tight poll.
    fn wake_signal(&self) -> Option<WakeSignal> {
        Some(self.inner.wake.clone())
    }

    async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
        params.validate(self.limits_ref())?;
        let limits = *self.limits_ref();
        let out = self
            .inner
            .writer
            .call(move |cx| {
                params.validate_schedule(&limits, cx.now)?;
                ops::enqueue(cx, &params)
            })
            .await?;
        self.inner.wake.notify();
        Ok(out)
    }

    async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
        params.validate(self.limits_ref())?;
        if params.partitioning.is_some() && !self.capabilities().partitioned_claiming {
            return Err(Error::Unsupported {
                operation: "partitioned claim",
                store: STORE,
            });
        }
        self.inner
            .writer
            .call_inline(move |cx| ops::claim(cx, &params))
            .await
    }

    async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call_inline(move |cx| ops::renew(cx, &params))
            .await
    }

    async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call_inline(move |cx| ops::complete(cx, &params))
            .await
    }

    async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call_inline(move |cx| ops::fail(cx, &params))
            .await
    }

    async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call_inline(move |cx| ops::release(cx, &params))
            .await
    }

    async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::recover_expired(cx, &params))
            .await
    }

    async fn purge(&self, params: PurgeParams) -> Result<Purged> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::purge(cx, &params))
            .await
    }

    async fn dead_requeue(&self, params: RequeueParams) -> Result<u64> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::dead_requeue(cx, &params))
            .await
    }

    async fn dead_discard(&self, params: DiscardParams) -> Result<u64> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::dead_discard(cx, &params))
            .await
    }

    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        self.inner
            .writer
            .call(move |cx| ops::item_get(cx, id))
            .await
    }

    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
        let queue = queue.clone();
        self.inner
            .writer
            .call(move |cx| ops::queue_counts(cx, &queue))
            .await
    }

    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        self.inner
            .writer
            .call(move |cx| ops::instance_heartbeat(cx, &params))
            .await
    }

    async fn instance_list(&self) -> Result<Vec<Instance>> {
        self.inner.writer.call(ops::instance_list).await
    }

    async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::instance_evict_stale(cx, &params))
            .await
    }

    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        self.inner
            .writer
            .call(move |cx| ops::instance_deregister(cx, &params))
            .await
    }

    async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::leader_acquire(cx, &params))
            .await
    }

    async fn leader_resign(&self, params: LeaderParams) -> Result<bool> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::leader_resign(cx, &params))
            .await
    }

    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        let name = name.clone();
        self.inner
            .writer
            .call(move |cx| ops::leader_get(cx, &name))
            .await
    }

    async fn item_list(
        &self,
        params: tenure_core::ItemListParams,
    ) -> Result<tenure_core::ItemPage> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::item_list(cx, &params))
            .await
    }

    async fn lease_list(
        &self,
        params: tenure_core::LeaseListParams,
    ) -> Result<tenure_core::LeasePage> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::lease_list(cx, &params))
            .await
    }

    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        self.inner.writer.call(ops::queue_list).await
    }

    async fn item_cancel(
        &self,
        params: tenure_core::CancelParams,
    ) -> Result<Vec<tenure_core::CancelOutcome>> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::item_cancel(cx, &params.ids))
            .await
    }

    async fn queue_pause(&self, params: tenure_core::PauseParams) -> Result<bool> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::set_paused(cx, &params, true))
            .await
    }

    async fn queue_resume(&self, params: tenure_core::PauseParams) -> Result<bool> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::set_paused(cx, &params, false))
            .await
    }
}
