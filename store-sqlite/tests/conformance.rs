//! The shared conformance suite against the SQLite store: every case on its own
//! database file in its own temporary directory.

use std::process::ExitCode;
use std::sync::Arc;

use tempfile::TempDir;
use tenure_core::{
    async_trait, Capabilities, ClaimParams, CompleteParams, DiscardParams, EnqueueParams, Enqueued,
    EvictParams, Evicted, FailOutcome, FailParams, HeartbeatParams, Instance, Item, ItemId,
    LeaderParams, LeaderStatus, Lease, Limits, ManualClock, PurgeParams, Purged, QueueCounts,
    QueueName, RecoverParams, Recovered, ReleaseParams, RenewOutcome, RenewParams, RequeueParams,
    Result, Store, TokenOutcome, WakeSignal,
};
use tenure_sqlite::{SqliteConfig, SqliteStore};

/// A store plus the directory of its file, removed when the last handle (the case's
/// store and its peers) is dropped.
#[derive(Clone, Debug)]
struct CaseStore {
    store: SqliteStore,
    _dir: Arc<TempDir>,
}

struct SqliteHarness;

#[async_trait]
impl tenure_conformance::Harness for SqliteHarness {
    type Store = CaseStore;

    async fn open(&self, clock: ManualClock) -> Result<CaseStore> {
        let dir = TempDir::new().map_err(|e| tenure_core::Error::internal("sqlite", e))?;
        let store =
            SqliteStore::open(SqliteConfig::new(dir.path().join("case.db")).clock(clock)).await?;
        Ok(CaseStore {
            store,
            _dir: Arc::new(dir),
        })
    }

    async fn open_peer(&self, store: &CaseStore, clock: ManualClock) -> Result<CaseStore> {
        // A second open of the same file: its own writer thread and connection, meeting
        // the first at SQLite's lock as another process would.
        let peer = SqliteStore::open(SqliteConfig::new(store.store.path()).clock(clock)).await?;
        Ok(CaseStore {
            store: peer,
            _dir: store._dir.clone(),
        })
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Option<CaseStore>> {
        // A store whose file (and directory) was taken away after it opened.
        let dir = TempDir::new().map_err(|e| tenure_core::Error::internal("sqlite", e))?;
        let store =
            SqliteStore::open(SqliteConfig::new(dir.path().join("gone.db")).clock(clock)).await?;
        let keep = TempDir::new().map_err(|e| tenure_core::Error::internal("sqlite", e))?;
        dir.close()
            .map_err(|e| tenure_core::Error::internal("sqlite", e))?;
        Ok(Some(CaseStore {
            store,
            _dir: Arc::new(keep),
        }))
    }
}

#[async_trait]
impl Store for CaseStore {
    fn name(&self) -> &'static str {
        self.store.name()
    }
    fn capabilities(&self) -> Capabilities {
        self.store.capabilities()
    }
    fn limits(&self) -> Limits {
        self.store.limits()
    }
    fn wake_signal(&self) -> Option<WakeSignal> {
        self.store.wake_signal()
    }
    async fn enqueue(&self, p: EnqueueParams) -> Result<Vec<Enqueued>> {
        self.store.enqueue(p).await
    }
    async fn claim(&self, p: ClaimParams) -> Result<Vec<Lease>> {
        self.store.claim(p).await
    }
    async fn renew(&self, p: RenewParams) -> Result<Vec<RenewOutcome>> {
        self.store.renew(p).await
    }
    async fn complete(&self, p: CompleteParams) -> Result<Vec<TokenOutcome>> {
        self.store.complete(p).await
    }
    async fn fail(&self, p: FailParams) -> Result<Vec<FailOutcome>> {
        self.store.fail(p).await
    }
    async fn release(&self, p: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        self.store.release(p).await
    }
    async fn recover_expired(&self, p: RecoverParams) -> Result<Recovered> {
        self.store.recover_expired(p).await
    }
    async fn purge(&self, p: PurgeParams) -> Result<Purged> {
        self.store.purge(p).await
    }
    async fn dead_requeue(&self, p: RequeueParams) -> Result<u64> {
        self.store.dead_requeue(p).await
    }
    async fn dead_discard(&self, p: DiscardParams) -> Result<u64> {
        self.store.dead_discard(p).await
    }
    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        self.store.item_get(id).await
    }
    async fn queue_counts(&self, q: &QueueName) -> Result<QueueCounts> {
        self.store.queue_counts(q).await
    }
    async fn instance_heartbeat(&self, p: HeartbeatParams) -> Result<()> {
        self.store.instance_heartbeat(p).await
    }
    async fn instance_list(&self) -> Result<Vec<Instance>> {
        self.store.instance_list().await
    }
    async fn instance_evict_stale(&self, p: EvictParams) -> Result<Evicted> {
        self.store.instance_evict_stale(p).await
    }
    async fn leader_acquire(&self, p: LeaderParams) -> Result<LeaderStatus> {
        self.store.leader_acquire(p).await
    }
    async fn leader_resign(&self, p: LeaderParams) -> Result<bool> {
        self.store.leader_resign(p).await
    }
}

fn main() -> ExitCode {
    tenure_conformance::main(SqliteHarness)
}
