//! [`SqliteStore`]: the type, its own calls (open, close, connection, ...), and its
//! [`Store`] impl in contract order.
//!
//! The impl only delegates: each method is one line that awaits the inherent method
//! of the same name with `_impl`, in the file of its contract group ([`claim`],
//! [`finalize`], [`recovery`], [`instances`], [`inspect`]). Each body validates its
//! parameters, then runs its SQL (in `ops`) on the writer's connection: the hot calls
//! through [`Writer::call_inline`], the rest through [`Writer::call`].

mod claim;
mod finalize;
mod inspect;
mod instances;
mod limits;
mod recovery;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use tenure_core::{
    async_trait, Capabilities, ClaimParams, CompleteParams, DeregisterParams, DiscardParams,
    EnqueueParams, Enqueued, EvictParams, Evicted, FailOutcome, FailParams, HeartbeatParams,
    Instance, Item, ItemId, LeaderInfo, LeaderName, LeaderParams, LeaderStatus, Lease, Limits,
    PurgeParams, Purged, QueueCounts, QueueName, RecoverParams, Recovered, ReleaseParams,
    RenewOutcome, RenewParams, RequeueParams, Result, Store, TokenOutcome, WakeSignal,
};

// The docs name it.
#[cfg(doc)]
use tenure_core::Error;

use crate::error::{Phase, STORE};
use crate::writer::Writer;
use crate::{schema, SqliteConfig};

struct Inner {
    config: SqliteConfig,
    writer: Writer,
    wake: WakeSignal,
    /// Limits were set, read or listed through this handle (G16): a finish may free a
    /// slot a worker waits for, so finishes fire the wake signal.
    limited: std::sync::atomic::AtomicBool,
}

/// A Tenure store in an SQLite file.
///
/// Cloning gives another handle onto the same store: the same writer thread and the
/// same wake signal. A second [`SqliteStore::open`] of the same path is a separate
/// store (a peer) with its own writer, meeting the first at SQLite's lock, exactly as
/// another process would.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

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
                limited: std::sync::atomic::AtomicBool::new(false),
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
            .with_limits()
            .with_fair_shares()
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
        self.enqueue_impl(params).await
    }

    async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
        self.claim_impl(params).await
    }

    async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
        self.renew_impl(params).await
    }

    async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
        self.complete_impl(params).await
    }

    async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>> {
        self.fail_impl(params).await
    }

    async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        self.release_impl(params).await
    }

    async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered> {
        self.recover_expired_impl(params).await
    }

    async fn purge(&self, params: PurgeParams) -> Result<Purged> {
        self.purge_impl(params).await
    }

    async fn dead_requeue(&self, params: RequeueParams) -> Result<u64> {
        self.dead_requeue_impl(params).await
    }

    async fn dead_discard(&self, params: DiscardParams) -> Result<u64> {
        self.dead_discard_impl(params).await
    }

    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        self.item_get_impl(id).await
    }

    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
        self.queue_counts_impl(queue).await
    }

    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        self.instance_heartbeat_impl(params).await
    }

    async fn instance_list(&self) -> Result<Vec<Instance>> {
        self.instance_list_impl().await
    }

    async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted> {
        self.instance_evict_stale_impl(params).await
    }

    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        self.instance_deregister_impl(params).await
    }

    async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus> {
        self.leader_acquire_impl(params).await
    }

    async fn leader_resign(&self, params: LeaderParams) -> Result<bool> {
        self.leader_resign_impl(params).await
    }

    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        self.leader_get_impl(name).await
    }

    async fn item_list(
        &self,
        params: tenure_core::ItemListParams,
    ) -> Result<tenure_core::ItemPage> {
        self.item_list_impl(params).await
    }

    async fn lease_list(
        &self,
        params: tenure_core::LeaseListParams,
    ) -> Result<tenure_core::LeasePage> {
        self.lease_list_impl(params).await
    }

    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        self.queue_list_impl().await
    }

    async fn item_cancel(
        &self,
        params: tenure_core::CancelParams,
    ) -> Result<Vec<tenure_core::CancelOutcome>> {
        self.item_cancel_impl(params).await
    }

    async fn queue_pause(&self, params: tenure_core::PauseParams) -> Result<bool> {
        self.queue_pause_impl(params).await
    }

    async fn queue_resume(&self, params: tenure_core::PauseParams) -> Result<bool> {
        self.queue_resume_impl(params).await
    }

    async fn limits_set(
        &self,
        params: tenure_core::LimitsParams,
    ) -> Result<Option<tenure_core::QueueLimits>> {
        self.limits_set_impl(params).await
    }

    async fn limits_get(&self, queue: &QueueName) -> Result<Option<tenure_core::QueueLimits>> {
        self.limits_get_impl(queue).await
    }

    async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
        self.limits_clear_impl(queue).await
    }

    async fn limits_list(&self) -> Result<Vec<(QueueName, tenure_core::QueueLimits)>> {
        self.limits_list_impl().await
    }

    async fn limits_defer(&self, params: tenure_core::DeferParams) -> Result<()> {
        self.limits_defer_impl(params).await
    }

    async fn limits_wait(&self, queues: &[QueueName]) -> Result<Option<std::time::Duration>> {
        self.limits_wait_impl(queues).await
    }
}
