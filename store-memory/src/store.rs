//! [`MemoryStore`]: the [`Store`] contract in memory, each operation one call into
//! [`State`] under the store's lock, in contract order.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tenure_core::{
    async_trait, CancelOutcome, CancelParams, Capabilities, ClaimParams, Clock, CompleteParams,
    DeregisterParams, DiscardParams, EnqueueParams, Enqueued, Error, EvictParams, Evicted,
    FailOutcome, FailParams, HeartbeatParams, Instance, Item, ItemId, ItemListParams, ItemPage,
    LeaderInfo, LeaderName, LeaderParams, LeaderStatus, Lease, LeaseListParams, LeasePage, Limits,
    PauseParams, PurgeParams, Purged, QueueCounts, QueueName, RecoverParams, Recovered,
    ReleaseParams, RenewOutcome, RenewParams, RequeueParams, Result, Store, SystemClock, Timestamp,
    TokenOutcome, WakeSignal,
};

use crate::state::State;
use crate::{Inner, MemoryStore, NAME};

impl MemoryStore {
    /// An empty store reading `clock`, with the default [`Limits`].
    pub fn new(clock: impl Clock) -> Self {
        MemoryStore::with_limits(clock, Limits::default())
    }

    /// An empty store reading `clock` and enforcing `limits` (G15).
    pub fn with_limits(clock: impl Clock, limits: Limits) -> Self {
        MemoryStore {
            inner: Arc::new(Inner {
                clock: Arc::new(clock),
                limits,
                available: AtomicBool::new(true),
                wake: WakeSignal::new(),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Keeps finished items as `done` until [`Store::purge`] deletes them (`true`), or
    /// deletes them as soon as they complete (`false`, the default). Applies to every
    /// handle of this store.
    pub fn keep_done(self, keep: bool) -> Self {
        if let Ok(mut state) = self.inner.state.lock() {
            state.keep_done = keep;
        }
        self
    }

    /// **Test aid: fault injection.** While `false`, every [`Store`] call with valid
    /// input answers [`Error::Unavailable`] (store `"memory"`) and changes nothing, as a
    /// store whose database went away does; `true` again restores service with all data
    /// intact, without rebuilding the store. Input is validated first, as every store
    /// does before it reaches its backend. Applies to every handle of this store.
    pub fn set_available(&self, available: bool) {
        self.inner.available.store(available, Ordering::SeqCst);
    }

    /// Runs `f` on the state at the clock's `now`, under the lock, after the
    /// availability check.
    ///
    /// The clock is read under the lock: a `now` read before it could be older than an
    /// enqueue that went ahead of this call, whose item the ready index already holds
    /// but which would not yet be due at that `now`.
    fn with_state<T>(&self, f: impl FnOnce(&mut State, Timestamp) -> T) -> Result<T> {
        if !self.inner.available.load(Ordering::SeqCst) {
            return Err(Error::unavailable(
                NAME,
                "the store is switched off (set_available(false))",
            ));
        }
        let mut state = self
            .inner
            .state
            .lock()
            .map_err(|_| Error::internal(NAME, "the store's state was poisoned by a panic"))?;
        let now = self.inner.clock.now();
        Ok(f(&mut state, now))
    }

    #[cfg(test)]
    pub(crate) fn visits(&self) -> u64 {
        self.inner.state.lock().map(|s| s.visits()).unwrap_or(0)
    }

    /// Records in the expiry and owner indexes, and the running items.
    #[cfg(test)]
    pub(crate) fn running_records(&self) -> (usize, usize, usize) {
        self.inner
            .state
            .lock()
            .map(|s| s.running_records())
            .unwrap_or_default()
    }
}

impl Default for MemoryStore {
    /// An empty store on the [`SystemClock`].
    fn default() -> Self {
        MemoryStore::new(SystemClock)
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("clock", &self.inner.clock)
            .field("limits", &self.inner.limits)
            .field("available", &self.inner.available.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

fn limit_u64(limit: u32) -> u64 {
    u64::from(limit)
}

#[async_trait]
impl Store for MemoryStore {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
            .with_partitioned_claiming()
            .with_stream_runs()
    }

    fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Every enqueue through any handle of this store fires it. Its health is always
    /// [`WakeHealth::Local`](tenure_core::WakeHealth::Local): a memory store lives in
    /// one process and nothing can go down, so workers keep their tight poll (which
    /// also finds scheduled items and retries coming due).
    fn wake_signal(&self) -> Option<WakeSignal> {
        Some(self.inner.wake.clone())
    }

    async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
        params.validate(&self.inner.limits)?;
        let limits = &self.inner.limits;
        let pin_to = params.pin_to.as_ref();
        let out = self.with_state(|s, now| {
            params.validate_schedule(limits, now)?;
            s.enqueue(&params.items, pin_to, now)
        })??;
        self.inner.wake.notify();
        Ok(out)
    }

    async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
        params.validate(&self.inner.limits)?;
        let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
        let run = usize::try_from(params.stream_run).unwrap_or(1);
        let Some(partitioning) = params.partitioning else {
            // Allocated before the lock is taken, so the lock is held for the claim
            // alone.
            let leases = Vec::with_capacity(limit.min(128));
            return self.with_state(|s, now| {
                s.claim(
                    &params.queues,
                    &params.owner,
                    (limit, run),
                    params.lease_for,
                    now,
                    leases,
                )
            });
        };
        let (queues, owner, lease_for) = (&params.queues, &params.owner, params.lease_for);
        self.with_state(|s, now| {
            s.claim_partitioned(queues, owner, (limit, run), lease_for, partitioning, now)
        })?
        .ok_or_else(|| Error::not_found("instance", owner.to_string()))
    }

    async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.renew(&params.tokens, params.lease_for, now))
    }

    async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
        params.validate(&self.inner.limits)?;
        let out = Vec::with_capacity(params.tokens.len());
        self.with_state(|s, now| s.complete(&params.tokens, now, out))
    }

    async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.fail(&params.failures, now))
    }

    async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.release(&params.tokens, now))
    }

    async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.recover_expired(limit_u64(params.limit), now))
    }

    async fn purge(&self, params: PurgeParams) -> Result<Purged> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.purge(params.keep_done_for, limit_u64(params.limit), now))
    }

    async fn dead_requeue(&self, params: RequeueParams) -> Result<u64> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| match &params.filter {
            Some(f) => {
                let ids = s.dead_matching(f, now);
                s.dead_requeue(&ids, params.additional_attempts, now)
            }
            None => s.dead_requeue(&params.ids, params.additional_attempts, now),
        })
    }

    async fn dead_discard(&self, params: DiscardParams) -> Result<u64> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| match &params.filter {
            Some(f) => {
                let ids = s.dead_matching(f, now);
                s.dead_discard(&ids, now)
            }
            None => s.dead_discard(&params.ids, now),
        })
    }

    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        self.with_state(|s, _| s.item_get(id))
    }

    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
        self.with_state(|s, now| s.queue_counts(queue, now))
    }

    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        self.with_state(|s, now| s.heartbeat(&params.instance, now))
    }

    async fn instance_list(&self) -> Result<Vec<Instance>> {
        self.with_state(|s, _| s.instance_list())
    }

    async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.evict_stale(params.stale_after, now))
    }

    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        self.with_state(|s, now| s.deregister(&params.instance, now))
    }

    async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| {
            s.leader_acquire(&params.name, &params.holder, params.lease_for, now)
        })
    }

    async fn leader_resign(&self, params: LeaderParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.leader_resign(&params.name, &params.holder, now))
    }

    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        self.with_state(|s, now| s.leader_get(name, now))
    }

    async fn item_list(&self, params: ItemListParams) -> Result<ItemPage> {
        params.validate(&self.inner.limits)?;
        let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
        self.with_state(|s, now| {
            s.item_list(
                &params.queue,
                params.state,
                params.order,
                limit,
                params.cursor.as_ref(),
                now,
            )
        })?
    }

    async fn lease_list(&self, params: LeaseListParams) -> Result<LeasePage> {
        params.validate(&self.inner.limits)?;
        let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
        self.with_state(|s, now| s.lease_list(&params.queue, limit, params.cursor.as_ref(), now))?
    }

    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        self.with_state(|s, _| s.queue_list())
    }

    async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.item_cancel(&params.ids, now))?
    }

    async fn queue_pause(&self, params: PauseParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, _| s.set_paused(&params.queue, true))
    }

    async fn queue_resume(&self, params: PauseParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, _| s.set_paused(&params.queue, false))
    }
}
