//! A store that keeps something alive as long as it lives.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use tenure_core::{
    async_trait, Capabilities, ClaimParams, CompleteParams, DeregisterParams, DiscardParams,
    EnqueueParams, Enqueued, EvictParams, Evicted, FailOutcome, FailParams, HeartbeatParams,
    Instance, Item, ItemId, LeaderParams, LeaderStatus, Lease, Limits, PurgeParams, Purged,
    QueueCounts, QueueName, RecoverParams, Recovered, ReleaseParams, RenewOutcome, RenewParams,
    RequeueParams, Result, Store, TokenOutcome, WakeSignal,
};

/// A store bundled with a guard that must outlive it: the temporary directory its file
/// lives in, a permit that bounds how many cases hold a database connection at once, a
/// schema to drop when the last handle goes.
///
/// Harnesses return it as their `Store` type so they need not write a delegating store
/// of their own. Every call goes straight to the inner store. Clones share the guard;
/// it is dropped with the last clone.
#[derive(Clone)]
pub struct Guarded<S> {
    store: S,
    guard: Arc<dyn Any + Send + Sync>,
}

impl<S: Store> Guarded<S> {
    /// Wraps `store`, keeping `guard` alive as long as any clone of the result.
    pub fn new(store: S, guard: impl Any + Send + Sync) -> Self {
        Guarded {
            store,
            guard: Arc::new(guard),
        }
    }

    /// Wraps `store` sharing the guard of `other`, for peer handles onto the same data.
    pub fn sharing<T>(store: S, other: &Guarded<T>) -> Self {
        Guarded {
            store,
            guard: Arc::clone(&other.guard),
        }
    }

    /// The inner store.
    pub fn inner(&self) -> &S {
        &self.store
    }
}

impl<S: fmt::Debug> fmt::Debug for Guarded<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Guarded").field(&self.store).finish()
    }
}

#[async_trait]
impl<S: Store> Store for Guarded<S> {
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
    async fn instance_deregister(&self, p: DeregisterParams) -> Result<Evicted> {
        self.store.instance_deregister(p).await
    }
    async fn leader_acquire(&self, p: LeaderParams) -> Result<LeaderStatus> {
        self.store.leader_acquire(p).await
    }
    async fn leader_resign(&self, p: LeaderParams) -> Result<bool> {
        self.store.leader_resign(p).await
    }
    async fn leader_get(
        &self,
        name: &tenure_core::LeaderName,
    ) -> Result<Option<tenure_core::LeaderInfo>> {
        self.store.leader_get(name).await
    }

    async fn item_list(
        &self,
        params: tenure_core::ItemListParams,
    ) -> tenure_core::Result<tenure_core::ItemPage> {
        self.store.item_list(params).await
    }
    async fn lease_list(
        &self,
        params: tenure_core::LeaseListParams,
    ) -> tenure_core::Result<tenure_core::LeasePage> {
        self.store.lease_list(params).await
    }
    async fn queue_list(&self) -> tenure_core::Result<Vec<tenure_core::QueueName>> {
        self.store.queue_list().await
    }
    async fn item_cancel(
        &self,
        params: tenure_core::CancelParams,
    ) -> tenure_core::Result<Vec<tenure_core::CancelOutcome>> {
        self.store.item_cancel(params).await
    }
    async fn queue_pause(&self, params: tenure_core::PauseParams) -> tenure_core::Result<bool> {
        self.store.queue_pause(params).await
    }
    async fn queue_resume(&self, params: tenure_core::PauseParams) -> tenure_core::Result<bool> {
        self.store.queue_resume(params).await
    }
    async fn limits_set(
        &self,
        params: tenure_core::LimitsParams,
    ) -> tenure_core::Result<Option<tenure_core::QueueLimits>> {
        self.store.limits_set(params).await
    }
    async fn limits_get(
        &self,
        queue: &tenure_core::QueueName,
    ) -> tenure_core::Result<Option<tenure_core::QueueLimits>> {
        self.store.limits_get(queue).await
    }
    async fn limits_clear(&self, queue: &tenure_core::QueueName) -> tenure_core::Result<bool> {
        self.store.limits_clear(queue).await
    }
    async fn limits_list(
        &self,
    ) -> tenure_core::Result<Vec<(tenure_core::QueueName, tenure_core::QueueLimits)>> {
        self.store.limits_list().await
    }
    async fn limits_defer(&self, params: tenure_core::DeferParams) -> tenure_core::Result<()> {
        self.store.limits_defer(params).await
    }
    async fn limits_wait(
        &self,
        queues: &[tenure_core::QueueName],
    ) -> tenure_core::Result<Option<std::time::Duration>> {
        self.store.limits_wait(queues).await
    }
}
