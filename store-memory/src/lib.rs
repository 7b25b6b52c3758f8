//! In-memory Tenure store: every guarantee, no server, for tests and single-process use.
//!
//! [`MemoryStore`] keeps G1..G15, the optional G14 partitioned claiming included, by
//! running the pure state machine of [`tenure_core::machine`] directly: every transition a store method
//! makes is one call to the machine function of the same name, under one lock.
//!
//! ```
//! # async fn demo() -> tenure_core::Result<()> {
//! use std::time::Duration;
//! use tenure_core::{NewItem, OwnerId, QueueName, StoreExt};
//! use tenure_memory::MemoryStore;
//!
//! let store = MemoryStore::default();
//! let queue = QueueName::new("emails")?;
//! store.enqueue_one(NewItem::new(queue.clone(), b"hi".to_vec())).await?;
//! let me = OwnerId::new("worker-1")?;
//! let lease = store.claim_one(queue, me, Duration::from_secs(30)).await?;
//! if let Some(lease) = lease {
//!     store.complete_one(lease.token).await?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Cost
//!
//! Claims never scan. Claimable items are indexed by `(priority, run_at, enqueue
//! order)`; items waiting for their `run_at`, behind their stream's head or behind a
//! busy scope sit in other indexes and are not looked at, so claiming `B` items costs
//! about `O(B log n)`, plus `O(log n)` for each expired lease the claim recovers and
//! each scheduled item that has come due since the last claim (each is moved once).
//! Recovering `k` expired leases costs `O(k log n)`; evicting an instance costs its
//! running items. `queue_counts` visits the queue's own items, as a SQL count would.
//!
//! # Concurrency
//!
//! All data sits behind one [`std::sync::Mutex`]. Every method does all its work
//! synchronously inside the lock and never holds it across an `.await`, so a claim,
//! a recovery and a complete are each atomic (G1, G3). Clones of a store are handles
//! onto the same data.
//!
//! # Finished items
//!
//! By default a completed item is deleted at once, as the SQL stores do, so
//! [`Store::item_get`] answers `None` for it. [`MemoryStore::keep_done`] keeps finished
//! items as [`ItemState::Done`](tenure_core::ItemState::Done) until [`Store::purge`].
//!
//! # Keys
//!
//! Stream and scope keys are global, as the contract states them: a stream spans
//! queues, and one running item of a scope blocks that scope in every queue. Dedup keys
//! are per queue.
//!
//! # Files
//!
//! The store crates share one shape (crate docs, config, errors, the `Store` impl, the
//! schema), so reading one means reading all. Here:
//!
//! | file | holds |
//! |---|---|
//! | `lib.rs` | these docs, [`MemoryStore`] and its `Store` impl; the configuration is its constructors' arguments (a clock, the [`Limits`]) |
//! | `state.rs` | the schema: the data and its indexes, and every operation as a synchronous function on them |
//! | `state/operate.rs` | the operator's operations on the same data |
//! | `tests.rs` | tests that read the internals |
//!
//! There is no `error.rs`: with no backend, every error is one of
//! [`tenure_core::Error`]'s own.
#![deny(missing_docs)]

mod state;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tenure_core::{
    async_trait, CancelOutcome, CancelParams, Capabilities, ClaimParams, Clock, CompleteParams,
    DeregisterParams, DiscardParams, EnqueueParams, Enqueued, Error, EvictParams, Evicted,
    FailOutcome, FailParams, HeartbeatParams, Instance, Item, ItemId, ItemListParams, ItemPage,
    LeaderParams, LeaderStatus, Lease, LeaseListParams, LeasePage, Limits, PauseParams,
    PurgeParams, Purged, QueueCounts, QueueName, RecoverParams, Recovered, ReleaseParams,
    RenewOutcome, RenewParams, RequeueParams, Result, SharedClock, Store, SystemClock, Timestamp,
    TokenOutcome, WakeSignal,
};

use crate::state::State;

/// The backend name in errors and reports.
const NAME: &str = "memory";

/// An in-memory [`Store`]: every guarantee of G1..G13 and G15, no server.
///
/// Cloning gives a second handle onto the same data (the conformance suite's peer
/// handle). Every comparison reads the one [`Clock`] given at construction.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    clock: SharedClock,
    limits: Limits,
    available: AtomicBool,
    wake: WakeSignal,
    state: Mutex<State>,
}

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
    fn visits(&self) -> u64 {
        self.inner.state.lock().map(|s| s.visits()).unwrap_or(0)
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
            return self.with_state(|s, now| {
                s.claim(
                    &params.queues,
                    &params.owner,
                    (limit, run),
                    params.lease_for,
                    now,
                )
            });
        };
        let (queues, owner, lease_for) = (&params.queues, &params.owner, params.lease_for);
        self.with_state(|s, now| {
            s.claim_partitioned(queues, owner, (limit, run), lease_for, partitioning, now)
        })?
        .ok_or_else(|| Error::not_found("instance", owner.to_string()))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
            .with_partitioned_claiming()
            .with_stream_runs()
    }

    async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.renew(&params.tokens, params.lease_for, now))
    }

    async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.complete(&params.tokens, now))
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

#[cfg(test)]
mod tests;
