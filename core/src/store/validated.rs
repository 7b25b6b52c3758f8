//! [`Store`] for every type that implements the contract groups: each params struct is
//! validated once here, and the store's group method gets it as [`Valid`].

use super::*;

/// Every store: validates each params struct against the store's [`Base::limits`]
/// (G15; group `g15_bad_input`) and hands it to the store's group method as [`Valid`],
/// so a store never validates and no params reach it unchecked. A store without
/// [`Capabilities::limits`] answers `limits_set` and `limits_defer` with
/// [`Error::Unsupported`] before their params are checked, as it always has.
#[async_trait]
impl<T> Store for T
where
    T: Base + Claims + Finalize + Recovery + Inspect + Instances + Limiting + History,
{
    fn name(&self) -> &'static str {
        Base::name(self)
    }

    fn capabilities(&self) -> Capabilities {
        Base::capabilities(self)
    }

    fn limits(&self) -> Limits {
        Base::limits(self)
    }

    fn wake_signal(&self) -> Option<WakeSignal> {
        Base::wake_signal(self)
    }

    async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Claims::enqueue(self, params).await
    }

    async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Claims::claim(self, params).await
    }

    async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Finalize::renew(self, params).await
    }

    async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Finalize::complete(self, params).await
    }

    async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Finalize::fail(self, params).await
    }

    async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Finalize::release(self, params).await
    }

    async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Recovery::recover_expired(self, params).await
    }

    async fn purge(&self, params: PurgeParams) -> Result<Purged> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Recovery::purge(self, params).await
    }

    async fn dead_requeue(&self, params: RequeueParams) -> Result<u64> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Inspect::dead_requeue(self, params).await
    }

    async fn dead_discard(&self, params: DiscardParams) -> Result<u64> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Inspect::dead_discard(self, params).await
    }

    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        Inspect::item_get(self, id).await
    }

    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
        Inspect::queue_counts(self, queue).await
    }

    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        Instances::instance_heartbeat(self, params).await
    }

    async fn instance_list(&self) -> Result<Vec<Instance>> {
        Instances::instance_list(self).await
    }

    async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Instances::instance_evict_stale(self, params).await
    }

    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        Instances::instance_deregister(self, params).await
    }

    async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Instances::leader_acquire(self, params).await
    }

    async fn leader_resign(&self, params: LeaderParams) -> Result<bool> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Instances::leader_resign(self, params).await
    }

    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        Instances::leader_get(self, name).await
    }

    async fn item_list(&self, params: ItemListParams) -> Result<ItemPage> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Inspect::item_list(self, params).await
    }

    async fn lease_list(&self, params: LeaseListParams) -> Result<LeasePage> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Inspect::lease_list(self, params).await
    }

    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        Inspect::queue_list(self).await
    }

    async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Inspect::item_cancel(self, params).await
    }

    async fn queue_pause(&self, params: PauseParams) -> Result<bool> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Inspect::queue_pause(self, params).await
    }

    async fn queue_resume(&self, params: PauseParams) -> Result<bool> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Inspect::queue_resume(self, params).await
    }

    async fn limits_set(&self, params: LimitsParams) -> Result<Option<QueueLimits>> {
        if !Base::capabilities(self).limits {
            return Err(Error::unsupported("limits_set", Base::name(self)));
        }
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Limiting::limits_set(self, params).await
    }

    async fn limits_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        Limiting::limits_get(self, queue).await
    }

    async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
        Limiting::limits_clear(self, queue).await
    }

    async fn limits_list(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        Limiting::limits_list(self).await
    }

    async fn limits_defer(&self, params: DeferParams) -> Result<()> {
        if !Base::capabilities(self).limits {
            return Err(Error::unsupported("limits_defer", Base::name(self)));
        }
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        Limiting::limits_defer(self, params).await
    }

    async fn limits_wait(&self, queues: &[QueueName]) -> Result<Option<std::time::Duration>> {
        Limiting::limits_wait(self, queues).await
    }

    async fn history_add(&self, params: HistoryAddParams) -> Result<()> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        History::history_add(self, params).await
    }

    async fn history(&self, params: HistoryParams) -> Result<Vec<HistoryPoint>> {
        let params = Valid::check(params, |p| p.validate(&Base::limits(self)))?;
        History::history(self, params).await
    }
}
