//! The contract between Tenure and a storage backend.
//!
//! [`Store`] is the whole contract as callers use it. A store implements it in groups
//! ([`crate::contract`]): every group method names the guarantee it keeps and the
//! conformance group (`tenure-conformance`) that checks it. Conveniences live on
//! [`StoreExt`](crate::StoreExt); do not add them here.
//!
//! Two rules hold for every method:
//!
//! * **Validated first.** [`Store`] checks each params struct against the store's
//!   [`Limits`] before the store sees it, and nothing is written on an error (G15;
//!   group `g15_bad_input`). `enqueue` also calls
//!   [`EnqueueParams::validate_schedule`] with the `now` it reads, before it writes.
//! * **One clock.** A method reads the store's [`Clock`](crate::Clock) once and uses that
//!   instant for every comparison and every timestamp it writes.
//!
//! A store that wraps another (to count, log or break calls) writes its impl with
//! [`forward_store!`](crate::forward_store): only the methods it changes, every other one
//! handed to the inner store.

mod capabilities;
mod forward;
mod history;
mod limits;
mod operate;
mod params;
mod validated;
mod wake;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

pub use capabilities::Capabilities;
pub use params::{
    ClaimParams, CompleteParams, DeregisterParams, DiscardParams, EnqueueParams, EvictParams,
    FailParams, Failure, HeartbeatParams, LeaderParams, Limits, PurgeParams, RecoverParams,
    ReleaseParams, RenewParams, RequeueParams, Retry, DEFAULT_STALE_AFTER, MAX_ERROR_BYTES,
    MAX_STREAM_RUN,
};
pub use params::{DEFAULT_MAX_CLAIM_QUEUES, DEFAULT_SCHEDULE_WINDOW};
pub use wake::{WakeHealth, WakeSignal};

pub use history::{
    history_minute, HistoryAddParams, HistoryCounts, HistoryEntry, HistoryParams, HistoryPoint,
    HISTORY_KEEP, MAX_HISTORY_ENTRIES, MAX_HISTORY_SPAN,
};

pub use limits::{
    DeferParams, LimitsParams, QueueLimits, Rate, MAX_CONCURRENCY, MAX_DEFER, MAX_LIMIT_ENTRIES,
    MAX_RATE_PERIOD, MAX_RATE_STARTS, MIN_RATE_PERIOD,
};

pub use operate::MAX_CANCEL_BY_BYTES;
pub use operate::{
    CancelParams, DeadFilter, ItemListParams, LeaseListParams, PauseParams, DEFAULT_DEAD_BATCH,
    DEFAULT_PAGE, MAX_DEAD_BATCH, MAX_PAGE,
};

use crate::contract::History;
use crate::contract::{Base, Claims, Finalize, Inspect, Instances, Limiting, Recovery, Valid};
use crate::error::{Error, Result};
use crate::keys::{LeaderName, QueueName};
use crate::model::{
    Enqueued, Evicted, FailOutcome, Instance, Item, ItemId, LeaderInfo, LeaderStatus, Lease,
    Purged, QueueCounts, Recovered, RenewOutcome, TokenOutcome,
};
use crate::operate::{CancelOutcome, ItemPage, LeasePage};

/// A storage backend for Tenure: the whole contract, as callers use it.
///
/// Object-safe: `Arc<dyn Store>` works, so an application picks its backend at run time.
/// Every write on a running item names a [`LeaseToken`](crate::LeaseToken) and is fenced
/// on `(id, attempt, lease)`: the attempt orders the attempts, and the lease id a claim
/// mints ([`LeaseId::mint`](crate::LeaseId::mint)) tells apart two leases of one attempt
/// number, as a failover that lost an acknowledged claim hands out.
///
/// The state transitions themselves are defined, with their preconditions and effects,
/// in [`crate::machine`]; a store applies exactly those transitions.
///
/// A store does not implement this trait: it implements [`Base`] and the groups of
/// [`crate::contract`] ([`Claims`], [`Finalize`], [`Recovery`], [`Inspect`],
/// [`Instances`], [`Limiting`]), whose methods carry each rule under `# Contract`, and
/// gets `Store` from the impl in `validated.rs`, which validates params once for every store. A
/// wrapper of a store implements it with [`forward_store!`](crate::forward_store).
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug + 'static {
    /// Short backend name used in errors and reports (`"postgres"`, `"sqlite"`, `"memory"`).
    /// See [`Base::name`].
    fn name(&self) -> &'static str;

    /// Optional features this store offers.
    /// See [`Base::capabilities`].
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// The bounds this store enforces (G15).
    /// See [`Base::limits`].
    fn limits(&self) -> Limits {
        Limits::default()
    }

    /// An in-process signal fired after every enqueue through this handle (and, with
    /// [`Capabilities::cross_process_wakeups`], after enqueues elsewhere), or `None`.
    /// See [`Base::wake_signal`].
    fn wake_signal(&self) -> Option<WakeSignal> {
        None
    }

    // Claims: work in, leases out.

    /// Inserts items, in order, as `ready` with `attempt = 0`.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Claims::enqueue`], whose `# Contract` a store keeps.
    async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>>;

    /// Leases up to `limit` claimable items of `queues` to `owner`.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Claims::claim`], whose `# Contract` a store keeps.
    async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>>;

    // Finalize: every write on a running item.

    /// Extends leases, answering per token, in order.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Finalize::renew`], whose `# Contract` a store keeps.
    async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>>;

    /// Finishes attempts successfully, answering per token, in order.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Finalize::complete`], whose `# Contract` a store keeps.
    async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>>;

    /// Records failed attempts, answering per failure, in order.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Finalize::fail`], whose `# Contract` a store keeps.
    async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>>;

    /// Gives leases back unfinished, answering per token, in order.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Finalize::release`], whose `# Contract` a store keeps.
    async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>>;

    // Recovery: maintenance.

    /// Recovers up to `limit` expired leases (`lease_expires_at <= now`) in any queue.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Recovery::recover_expired`], whose `# Contract` a store keeps.
    async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered>;

    /// Deletes finished items older than `keep_done_for` and dedup keys past their
    /// window (G11; `g11_dedup`).
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Recovery::purge`], whose `# Contract` a store keeps.
    async fn purge(&self, params: PurgeParams) -> Result<Purged>;

    // Inspect: the operator's view and controls.

    /// Puts dead items back to `ready` (G5; `g05_retry`), returning how many.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Inspect::dead_requeue`], whose `# Contract` a store keeps.
    async fn dead_requeue(&self, params: RequeueParams) -> Result<u64>;

    /// Deletes dead items, returning how many (G5; `g05_retry`). Other items are left
    /// alone. A discarded head no longer blocks its stream, by id or by filter
    /// (`op_control`, `a_dead_head_discarded_or_requeued_by_filter_lets_its_stream_move_on`).
    /// Their dedup keys are kept (G11; `g11_dedup`,
    /// `a_discarded_dead_item_still_dedups_within_the_window`).
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Inspect::dead_discard`], whose `# Contract` a store keeps.
    async fn dead_discard(&self, params: DiscardParams) -> Result<u64>;

    /// Reads one item, or `None` if it does not exist (or was deleted when finished).
    ///
    /// A store keeps the `# Contract` of [`Inspect::item_get`].
    async fn item_get(&self, id: ItemId) -> Result<Option<Item>>;

    /// Counts a queue's items by state, `ready` split into due and scheduled at `now`.
    ///
    /// A store keeps the `# Contract` of [`Inspect::queue_counts`].
    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts>;

    // Instances: workers and their leader.

    /// Registers `instance` on its first call and records a heartbeat at `now` on every
    /// call (G12; `g12_instances`).
    ///
    /// A store keeps the `# Contract` of [`Instances::instance_heartbeat`].
    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()>;

    /// The registered instances, oldest registration first.
    ///
    /// A store keeps the `# Contract` of [`Instances::instance_list`].
    async fn instance_list(&self) -> Result<Vec<Instance>>;

    /// Evicts instances whose last heartbeat is at least `stale_after` old.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Instances::instance_evict_stale`], whose `# Contract` a store keeps.
    async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted>;

    /// Removes `instance` from the registry at once, as a worker does when it shuts down,
    /// instead of leaving it to be evicted as stale.
    ///
    /// A store keeps the `# Contract` of [`Instances::instance_deregister`].
    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted>;

    /// Tries to hold the leader lease `name` (G13; `g13_leader`).
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Instances::leader_acquire`], whose `# Contract` a store keeps.
    async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus>;

    /// Gives the lease up if the caller holds it; true when it did. The term is kept, so
    /// the next holder still gets a greater one (G13; `g13_leader`).
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Instances::leader_resign`], whose `# Contract` a store keeps.
    async fn leader_resign(&self, params: LeaderParams) -> Result<bool>;

    /// Reads who holds the leader lease `name`, writing nothing (G13; `g13_leader`).
    ///
    /// A store keeps the `# Contract` of [`Instances::leader_get`].
    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>>;

    /// One page of a queue's items in one listable state (conformance group
    /// `op_inspection`). Only that queue's: a queue whose name begins with this one's
    /// is another queue.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Inspect::item_list`], whose `# Contract` a store keeps.
    async fn item_list(&self, params: ItemListParams) -> Result<ItemPage>;

    /// One page of a queue's leases: its `running` items' owner, attempt, expiry and
    /// renewals, soonest expiry first (ties in an order of the store's choosing, the same
    /// on every page, so paging shows leases of one expiry each once:
    /// `lease_pages_show_leases_of_one_expiry_each_once`), including expired leases not yet recovered, which come first
    /// with their expiry at or before the page's `as_of` (conformance group
    /// `op_inspection`).
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Inspect::lease_list`], whose `# Contract` a store keeps.
    async fn lease_list(&self, params: LeaseListParams) -> Result<LeasePage>;

    /// The queues this store knows, by name: every queue with an unfinished, dead or
    /// kept finished item, and every paused queue (conformance group `op_inspection`;
    /// an unfinished item may be scheduled or running:
    /// `queue_list_names_a_queue_whose_only_items_are_scheduled_running_or_kept_done`).
    ///
    /// A store keeps the `# Contract` of [`Inspect::queue_list`].
    async fn queue_list(&self) -> Result<Vec<QueueName>>;

    /// Cancels ready and scheduled items, answering per id, in order (conformance
    /// group `op_control`).
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Inspect::item_cancel`], whose `# Contract` a store keeps.
    async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>>;

    /// Pauses a queue: from when this returns, no claim takes the queue's items until
    /// [`Store::queue_resume`] (conformance group `op_control`).
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Inspect::queue_pause`], whose `# Contract` a store keeps.
    async fn queue_pause(&self, params: PauseParams) -> Result<bool>;

    /// Resumes a paused queue: its items are claimable again. Answers true when it was
    /// paused (conformance group `op_control`).
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Inspect::queue_resume`], whose `# Contract` a store keeps.
    async fn queue_resume(&self, params: PauseParams) -> Result<bool>;

    // Limiting: queue limits (G16, G17, G18).

    /// Sets a queue's limits (G16, G17, G18), replacing what it had, at run time.
    /// Answers the limits it had before, `None` when it had none. Only on stores that
    /// declare [`Capabilities::limits`]; the default answers
    /// [`Error::Unsupported`](crate::Error::Unsupported) and writes nothing.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Limiting::limits_set`], whose `# Contract` a store keeps.
    async fn limits_set(&self, params: LimitsParams) -> Result<Option<QueueLimits>> {
        let _ = params;
        Err(Error::unsupported("limits_set", self.name()))
    }

    /// The limits of `queue`, `None` when it has none (G16; `g16_concurrency_limits`).
    /// Reads nothing but the configuration and writes nothing.
    ///
    /// A store keeps the `# Contract` of [`Limiting::limits_get`].
    async fn limits_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        let _ = queue;
        Err(Error::unsupported("limits_get", self.name()))
    }

    /// Removes `queue`'s limits; answers true when it had some. Its rate history (the
    /// starts of the last period, a deferral) goes with them (G16, G17).
    ///
    /// A store keeps the `# Contract` of [`Limiting::limits_clear`].
    async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
        let _ = queue;
        Err(Error::unsupported("limits_clear", self.name()))
    }

    /// Every queue with limits, by name, with its limits.
    ///
    /// A store keeps the `# Contract` of [`Limiting::limits_list`].
    async fn limits_list(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        Err(Error::unsupported("limits_list", self.name()))
    }

    /// Pushes the next start of a limit key (or of the whole queue) back: no claim
    /// starts an item of `params.key` in `params.queue` (of any key, with `None`)
    /// before `now + params.delay` (G17). A handler told "rate limited, retry in 30 s"
    /// by the service behind its key calls it, then fails or releases its attempt.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`Limiting::limits_defer`], whose `# Contract` a store keeps.
    async fn limits_defer(&self, params: DeferParams) -> Result<()> {
        let _ = params;
        Err(Error::unsupported("limits_defer", self.name()))
    }

    /// How long from the store's `now` until time alone may make claimable an item of
    /// `queues` that limits hold back (G16, G17): the next start a rate allows, the end
    /// of a deferral, or, while items wait for a slot, the next expiry of a running
    /// lease of those queues (a crashed holder's slot comes back then). `None` when
    /// nothing waits on time: a slot a finish gives back fires the wake signal
    /// instead ([`Store::wake_signal`]). Writes nothing that changes an answer. The
    /// worker asks after a claim that found nothing and polls again at that time
    /// rather than a poll interval later. The default (stores without
    /// [`Capabilities::limits`]) answers `None`.
    ///
    /// A store keeps the `# Contract` of [`Limiting::limits_wait`].
    async fn limits_wait(&self, queues: &[QueueName]) -> Result<Option<std::time::Duration>> {
        let _ = queues;
        Ok(None)
    }

    // History: work over time.

    /// Adds per-queue, per-minute sums of finished, failed and dead attempts to the
    /// store's history (conformance group `op_history`). Workers call it in aggregate,
    /// every few seconds.
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`History::history_add`], whose `# Contract` a store keeps.
    async fn history_add(&self, params: HistoryAddParams) -> Result<()>;

    /// One queue's history, minute by minute, over at most [`MAX_HISTORY_SPAN`]
    /// (conformance group `op_history`).
    ///
    /// Validates `params` against [`Store::limits`] first (G15), then hands them to
    /// [`History::history`], whose `# Contract` a store keeps.
    async fn history(&self, params: HistoryParams) -> Result<Vec<HistoryPoint>>;
}

/// Every method of [`Store`], in contract order, for
/// [`forward_store!`](crate::forward_store): a method added to the trait is added here
/// too (the `Arc` impl below fails to compile, or to pass clippy, until it is).
///
/// Hands the list to `$callback` after `$args`. Not part of the API.
#[doc(hidden)]
#[macro_export]
macro_rules! __store_methods {
    ($callback:path { $($args:tt)* }) => {
        $callback! { $($args)* [
            [fn name() -> &'static str]
            [fn capabilities() -> $crate::Capabilities]
            [fn limits() -> $crate::Limits]
            [fn wake_signal() -> ::core::option::Option<$crate::WakeSignal>]
            [async enqueue(params: $crate::EnqueueParams) -> $crate::Result<::std::vec::Vec<$crate::Enqueued>>]
            [async claim(params: $crate::ClaimParams) -> $crate::Result<::std::vec::Vec<$crate::Lease>>]
            [async renew(params: $crate::RenewParams) -> $crate::Result<::std::vec::Vec<$crate::RenewOutcome>>]
            [async complete(params: $crate::CompleteParams) -> $crate::Result<::std::vec::Vec<$crate::TokenOutcome>>]
            [async fail(params: $crate::FailParams) -> $crate::Result<::std::vec::Vec<$crate::FailOutcome>>]
            [async release(params: $crate::ReleaseParams) -> $crate::Result<::std::vec::Vec<$crate::TokenOutcome>>]
            [async recover_expired(params: $crate::RecoverParams) -> $crate::Result<$crate::Recovered>]
            [async purge(params: $crate::PurgeParams) -> $crate::Result<$crate::Purged>]
            [async dead_requeue(params: $crate::RequeueParams) -> $crate::Result<u64>]
            [async dead_discard(params: $crate::DiscardParams) -> $crate::Result<u64>]
            [async item_get(id: $crate::ItemId) -> $crate::Result<::core::option::Option<$crate::Item>>]
            [async queue_counts(queue: &$crate::QueueName) -> $crate::Result<$crate::QueueCounts>]
            [async instance_heartbeat(params: $crate::HeartbeatParams) -> $crate::Result<()>]
            [async instance_list() -> $crate::Result<::std::vec::Vec<$crate::Instance>>]
            [async instance_evict_stale(params: $crate::EvictParams) -> $crate::Result<$crate::Evicted>]
            [async instance_deregister(params: $crate::DeregisterParams) -> $crate::Result<$crate::Evicted>]
            [async leader_acquire(params: $crate::LeaderParams) -> $crate::Result<$crate::LeaderStatus>]
            [async leader_resign(params: $crate::LeaderParams) -> $crate::Result<bool>]
            [async leader_get(name: &$crate::LeaderName) -> $crate::Result<::core::option::Option<$crate::LeaderInfo>>]
            [async item_list(params: $crate::ItemListParams) -> $crate::Result<$crate::ItemPage>]
            [async lease_list(params: $crate::LeaseListParams) -> $crate::Result<$crate::LeasePage>]
            [async queue_list() -> $crate::Result<::std::vec::Vec<$crate::QueueName>>]
            [async item_cancel(params: $crate::CancelParams) -> $crate::Result<::std::vec::Vec<$crate::CancelOutcome>>]
            [async queue_pause(params: $crate::PauseParams) -> $crate::Result<bool>]
            [async queue_resume(params: $crate::PauseParams) -> $crate::Result<bool>]
            [async limits_set(params: $crate::LimitsParams) -> $crate::Result<::core::option::Option<$crate::QueueLimits>>]
            [async limits_get(queue: &$crate::QueueName) -> $crate::Result<::core::option::Option<$crate::QueueLimits>>]
            [async limits_clear(queue: &$crate::QueueName) -> $crate::Result<bool>]
            [async limits_list() -> $crate::Result<::std::vec::Vec<($crate::QueueName, $crate::QueueLimits)>>]
            [async limits_defer(params: $crate::DeferParams) -> $crate::Result<()>]
            [async limits_wait(queues: &[$crate::QueueName]) -> $crate::Result<::core::option::Option<::std::time::Duration>>]
            [async history_add(params: $crate::HistoryAddParams) -> $crate::Result<()>]
            [async history(params: $crate::HistoryParams) -> $crate::Result<::std::vec::Vec<$crate::HistoryPoint>>]
        ] }
    };
}

crate::forward_store! {
    impl<S: Store + ?Sized> Store for Arc<S> {
        forward self => **self;
    }
}
