//! The contract between Tenure and a storage backend.
//!
//! [`Store`] is the whole contract in one trait, readable top to bottom. Every method
//! names the guarantee it keeps and the conformance group (`tenure-conformance`) that
//! checks it. Conveniences live on [`StoreExt`](crate::StoreExt); do not add them here.
//!
//! Two rules hold for every method:
//!
//! * **Validate first.** A method MUST call its params' `validate` with the store's
//!   [`Limits`] and return that error before writing anything (G15; group
//!   `g15_bad_input`). `enqueue` also calls
//!   [`EnqueueParams::validate_schedule`] with the `now` it reads, before it writes.
//! * **One clock.** A method reads the store's [`Clock`](crate::Clock) once and uses that
//!   instant for every comparison and every timestamp it writes.
//!
//! A store that wraps another (to count, log or break calls) writes its impl with
//! [`forward_store!`](crate::forward_store): only the methods it changes, every other one
//! handed to the inner store.

mod forward;
mod limits;
mod operate;
mod params;
mod wake;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

pub use params::{
    ClaimParams, CompleteParams, DeregisterParams, DiscardParams, EnqueueParams, EvictParams,
    FailParams, Failure, HeartbeatParams, LeaderParams, Limits, PurgeParams, RecoverParams,
    ReleaseParams, RenewParams, RequeueParams, Retry, DEFAULT_STALE_AFTER, MAX_ERROR_BYTES,
    MAX_STREAM_RUN,
};
pub use params::{DEFAULT_MAX_CLAIM_QUEUES, DEFAULT_SCHEDULE_WINDOW};
pub use wake::{WakeHealth, WakeSignal};

pub use limits::{
    DeferParams, LimitsParams, QueueLimits, Rate, MAX_CONCURRENCY, MAX_DEFER, MAX_LIMIT_ENTRIES,
    MAX_RATE_PERIOD, MAX_RATE_STARTS, MIN_RATE_PERIOD,
};

pub use operate::{
    CancelParams, DeadFilter, ItemListParams, LeaseListParams, PauseParams, DEFAULT_DEAD_BATCH,
    DEFAULT_PAGE, MAX_DEAD_BATCH, MAX_PAGE,
};

use crate::error::Result;
use crate::keys::{LeaderName, QueueName};
use crate::model::{
    Enqueued, Evicted, FailOutcome, Instance, Item, ItemId, LeaderInfo, LeaderStatus, Lease,
    Purged, QueueCounts, Recovered, RenewOutcome, TokenOutcome,
};
use crate::operate::{CancelOutcome, ItemPage, LeasePage};

/// Optional features a store may offer. Mandatory guarantees are not listed: every
/// store keeps all of G1..G13 and G15.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// G14 partitioned claiming.
    pub partitioned_claiming: bool,
    /// Wake-ups from other processes (for example Postgres LISTEN/NOTIFY). Every store
    /// may hand out an in-process [`WakeSignal`] regardless.
    pub cross_process_wakeups: bool,
    /// Stream runs: a claim with [`ClaimParams::stream_runs`] leases up to `k`
    /// consecutive items of one stream (G9). Stores without it claim heads only.
    pub stream_runs: bool,
    /// Queue limits: concurrency (G16) and rate (G17), with the `limits_*` operations
    /// and the items' limit keys. Optional while not every store has them: the
    /// PostgreSQL store does not yet.
    pub limits: bool,
    /// Fair shares (G18): claims serve the tenants of a queue by fairness key and
    /// weight. Stores without it refuse items with a fairness key
    /// ([`Error::Unsupported`](crate::Error::Unsupported)).
    pub fair_shares: bool,
}

impl Capabilities {
    /// Declares G14 partitioned claiming.
    pub fn with_partitioned_claiming(mut self) -> Self {
        self.partitioned_claiming = true;
        self
    }

    /// Declares wake-ups from other processes.
    pub fn with_cross_process_wakeups(mut self) -> Self {
        self.cross_process_wakeups = true;
        self
    }

    /// Declares stream runs.
    pub fn with_stream_runs(mut self) -> Self {
        self.stream_runs = true;
        self
    }

    /// Declares queue limits (G16, G17).
    pub fn with_limits(mut self) -> Self {
        self.limits = true;
        self
    }

    /// Declares fair shares (G18).
    pub fn with_fair_shares(mut self) -> Self {
        self.fair_shares = true;
        self
    }
}

/// A storage backend for Tenure.
///
/// Object-safe: `Arc<dyn Store>` works, so an application picks its backend at run time.
/// Every write on a running item names a [`LeaseToken`](crate::LeaseToken) and is fenced
/// on `(id, attempt, lease)`: the attempt orders the attempts, and the lease id a claim
/// mints ([`LeaseId::mint`](crate::LeaseId::mint)) tells apart two leases of one attempt
/// number, as a failover that lost an acknowledged claim hands out.
///
/// The state transitions themselves are defined, with their preconditions and effects,
/// in [`crate::machine`]; a store applies exactly those transitions.
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug + 'static {
    /// Short backend name used in errors and reports (`"postgres"`, `"sqlite"`, `"memory"`).
    fn name(&self) -> &'static str;

    /// Optional features this store offers.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// The bounds this store enforces (G15).
    fn limits(&self) -> Limits {
        Limits::default()
    }

    /// An in-process signal fired after every enqueue through this handle (and, with
    /// [`Capabilities::cross_process_wakeups`], after enqueues elsewhere), or `None`.
    ///
    /// A store with cross-process wake-ups reports on the signal whether its listener
    /// is delivering them ([`WakeSignal::set_health`], [`WakeHealth`]); the worker
    /// polls at its tight base while it is down. Every call MUST hand out the same
    /// signal (clones of it), so the health one listener sets is seen by every worker.
    fn wake_signal(&self) -> Option<WakeSignal> {
        None
    }

    /// Inserts items, in order, as `ready` with `attempt = 0`.
    ///
    /// # Contract
    /// - MUST assign enqueue order in the order of `params.items`; it is the last key of
    ///   claim order (G8; `g08_order`) and the order within a stream (G9; `g09_stream_fifo`).
    /// - MUST compute `run_at` from the item's schedule at the store's `now` (G7;
    ///   `g07_schedule`), after refusing, with [`EnqueueParams::validate_schedule`] at
    ///   that `now`, a `run_at` outside [`Limits::schedule_window`] (G15).
    /// - For an item with a dedup key whose `(queue, key)` was recorded less than its
    ///   window ago (including earlier in the same call) MUST insert nothing and answer
    ///   the earlier item's id with `duplicate = true`; otherwise it records the key
    ///   until `now + dedup_window` (G11; `g11_dedup`).
    /// - Answers one [`Enqueued`] per item, in order. All or nothing: on error nothing
    ///   is written.
    /// - With [`EnqueueParams::pin_to`] (G14; `g14_partitioned_claiming`), only on
    ///   stores that declare [`Capabilities::partitioned_claiming`] (others answer
    ///   [`Error::Unsupported`](crate::Error::Unsupported), writing nothing): the
    ///   instance MUST be registered, else [`Error::NotFound`](crate::Error::NotFound)
    ///   with `what = "instance"` and nothing written; the stream of every inserted item
    ///   that is pinned to nobody is pinned to it, and an existing pin is kept (first
    ///   write wins).
    /// - An item's [`limit_key`](crate::NewItem::limit_key),
    ///   [`fairness_key`](crate::NewItem::fairness_key) and
    ///   [`weight`](crate::NewItem::weight) are kept for its claims (G16, G17, G18).
    ///   A store that does not declare [`Capabilities::limits`] MUST answer
    ///   [`Error::Unsupported`](crate::Error::Unsupported) for an item with a limit
    ///   key, and one that does not declare [`Capabilities::fair_shares`] for an item
    ///   with a fairness key, writing nothing.
    /// - With [`Capabilities::fair_shares`], the item's start tag is fixed here (G18;
    ///   `g18_fair_shares`): `max(virtual time, its tenant's finish tag)`, and the
    ///   tenant's finish tag moves on by `1 / weight`, the weight the queue configures
    ///   for the key ([`QueueLimits::weights`]) or else the item's own. A weight
    ///   changed later applies to items enqueued after the change.
    async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>>;

    /// Leases up to `limit` claimable items of `queues` to `owner`.
    ///
    /// # Contract
    /// - First recovers expired leases of those queues exactly as
    ///   [`Store::recover_expired`] does (a stall each), so an expired item is claimable
    ///   without a maintenance pass (G2; `g02_expiry`, G6; `g06_stalls`).
    /// - An item is claimable when it is `ready` and `run_at <= now` (G7), it is the
    ///   first unfinished item of its stream, or has none (G9; `g09_stream_fifo`), and no
    ///   other item of its scope is `running`, or has none (G10; `g10_scope`). Items that
    ///   fail the scope rule are passed over, not waited for; the same holds between
    ///   the items of one batch.
    /// - Takes claimable items by `priority`, then `run_at`, then enqueue order (G8;
    ///   `g08_order`).
    /// - Each claimed item becomes `running` with `attempt + 1`, `owner`, `renewals = 0`
    ///   and `lease_expires_at = now + lease_for`, on a lease id the claim mints
    ///   ([`LeaseId::mint`](crate::LeaseId::mint)), never taken from the stored item:
    ///   after a failover that lost a claim, the attempt number comes back, and only a
    ///   fresh lease id keeps the lost lease's token refused (G3;
    ///   `g03_fenced_finalize::a_claim_lost_in_a_failover_leaves_its_token_refused`).
    /// - MUST never hand one item to two concurrent callers (G1; `g01_exclusive_claim`).
    /// - Returns fewer than `limit` (possibly none) when fewer are claimable.
    /// - With [`ClaimParams::partitioning`] (G14; `g14_partitioned_claiming`), only on
    ///   stores that declare [`Capabilities::partitioned_claiming`] (others answer
    ///   [`Error::Unsupported`](crate::Error::Unsupported), writing nothing): `owner`
    ///   MUST be a registered instance, else [`Error::NotFound`](crate::Error::NotFound)
    ///   with `what = "instance"` and nothing written. A claimable item is then also
    ///   one of the owner's share: its stream is pinned to `owner`, or it is unpinned
    ///   (no stream, or a stream pinned to nobody) and its partition is taken by the
    ///   owner's rank ([`partition::takes`](crate::partition::takes)). Claiming an item
    ///   of an unpinned stream pins the stream to `owner`. Instance eviction and
    ///   deregistration drop the instance's pins. See [`crate::partition`].
    /// - With [`ClaimParams::stream_run`] `k > 1`, on stores that declare
    ///   [`Capabilities::stream_runs`] (others claim heads only): each stream head taken
    ///   brings the items right behind it in enqueue order, while each is `ready`, due,
    ///   in one of `queues` and not of a scope that is busy (a scope taken by an earlier
    ///   item of the run included), up to `k` items in all and within `limit` (G9;
    ///   `g09_stream_fifo`). Each is claimed as above. The run's leases are adjacent in
    ///   the answer, in stream order.
    /// - **Limits (G16, G17, G18)**, on stores that declare [`Capabilities::limits`],
    ///   for a queue with [`QueueLimits`] (see [`Store::limits_set`]), decided in the
    ///   same atomic step as the claim, across every handle and process:
    ///   - **G16 Concurrency limits.** The claim takes an item only while the queue has
    ///     fewer than `concurrency` running items and the item's limit key fewer than
    ///     its limit ([`QueueLimits::key_limit`]), counting the items this claim takes.
    ///     The running count is the number of items `running` under a lease, never a
    ///     counter: a slot comes back only when its lease leaves `running` (its own
    ///     token, expiry recovery, eviction), so a crashed holder's slot comes back at
    ///     its lease's expiry and not before, and a superseded lease's refused finish
    ///     frees nothing (`g16_concurrency_limits`). Items of a saturated key are passed
    ///     over, not waited for, as busy scopes are: they never hold up other keys'
    ///     items (no head-of-line blocking).
    ///   - **G17 Rate limits.** With `rate` (queue) or `key_rate` (per key) of R per
    ///     period P, the claim takes an item only when fewer than R claims of the queue
    ///     (of the key) started in `(now - P, now]`, counting this claim's, and not
    ///     before a deferral ([`Store::limits_defer`]) ends; so no window of length P
    ///     holds more than R starts. A start stays counted for P whatever becomes of
    ///     its lease. Items held back are not claimed and use no attempt
    ///     (`g17_rate_limits`).
    ///   - **G18 Fair shares**, on stores that declare [`Capabilities::fair_shares`],
    ///     in a queue where an item named a tenant: start-time fair queueing. Within a
    ///     priority, the claim takes the least start tag first (see
    ///     [`Store::enqueue`]), then `run_at`, then enqueue order, and the queue's
    ///     virtual time becomes the greatest tag claimed. So a tenant with one ready
    ///     item beside one with a million is served within a turn of the tenants
    ///     (about one claim per tenant), busy tenants are served in the ratio of their
    ///     weights, and the share is per fairness key, never per limit key
    ///     (`g18_fair_shares`). Items without a fairness key are one unnamed tenant. A
    ///     queue whose items never named a tenant keeps G8 order exactly. Across the
    ///     queues of one claim, candidates compare by G8 order without their tags.
    /// - **Put-back rule (G9).** When a running item of a stream leaves `running` other
    ///   than by [`Store::complete`] (a failure, a release, expiry recovery, eviction),
    ///   every later running item of that stream goes back to `ready` untouched: owner
    ///   and expiry cleared, `attempt`, `stalls` and `run_at` kept, `max_attempts + 1`
    ///   (no attempt spent, as [`machine::put_back`](crate::machine::put_back)), no
    ///   stall counted; their tokens then answer lease lost. Items so put back are not
    ///   counted as recovered or released. So a stream's running items are always a
    ///   prefix of its unfinished items, and G9 holds exactly as without runs. Applies
    ///   only to stores that declare [`Capabilities::stream_runs`].
    async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>>;

    /// Extends leases, answering per token, in order.
    ///
    /// # Contract
    /// - A token that is not the item's current `running` lease (its attempt and its
    ///   lease id) answers
    ///   [`RenewOutcome::LeaseLost`] and changes nothing (G3; `g03_fenced_finalize`).
    /// - When `renewals == max_renewals` answers [`RenewOutcome::LimitReached`] and leaves
    ///   the expiry alone (G4; `g04_renewal_cap`); otherwise sets
    ///   `lease_expires_at = now + lease_for` and `renewals + 1`.
    /// - A lease that has expired but was neither recovered nor re-claimed is still the
    ///   current attempt and may be renewed.
    async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>>;

    /// Finishes attempts successfully, answering per token, in order.
    ///
    /// # Contract
    /// - A token that is not the item's current `running` lease (its attempt and its
    ///   lease id) answers
    ///   [`TokenOutcome::LeaseLost`] and changes nothing (G3; `g03_fenced_finalize`).
    /// - A late complete of an expired lease that nobody recovered or re-claimed is
    ///   accepted: the token proves no other attempt started (G3).
    /// - Accepted items become `done` (or are deleted at once; either way
    ///   [`Store::item_get`] never again shows them `ready` or `running`), and the next
    ///   item of their stream becomes the head (G9).
    /// - **Stream order (G9).** A current token whose item is not the first unfinished
    ///   item of its stream (an item of a stream run behind an earlier item of the run
    ///   that still runs) answers [`TokenOutcome::OutOfOrder`] and changes nothing; its
    ///   lease stays current. Tokens are taken in order, each seeing the ones before
    ///   it, so one call may complete a run in stream order; a run's items in reverse
    ///   order in one call answer `OutOfOrder` for all but the first item of the run
    ///   (conformance group `g09_stream_fifo`). Items of one stream thus complete in
    ///   enqueue order, and a later item never finishes while an earlier one may
    ///   still fail and run again.
    async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>>;

    /// Records failed attempts, answering per failure, in order.
    ///
    /// # Contract
    /// - A token that is not the item's current `running` lease (its attempt and its
    ///   lease id) answers
    ///   [`FailOutcome::LeaseLost`] and changes nothing (G3; `g03_fenced_finalize`).
    /// - [`Retry::After`] with `attempt < max_attempts` puts the item back to `ready`
    ///   with `run_at = now + delay`, keeping `attempt`; with `attempt >= max_attempts`,
    ///   and [`Retry::Never`] always, the item goes `dead` (G5; `g05_retry`).
    /// - `last_error` keeps the failure's message either way. A dead or waiting item
    ///   keeps blocking its stream (G9).
    async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>>;

    /// Gives leases back unfinished, answering per token, in order.
    ///
    /// # Contract
    /// - A token that is not the item's current `running` lease (its attempt and its
    ///   lease id) answers
    ///   [`TokenOutcome::LeaseLost`] and changes nothing (G3; `g03_fenced_finalize`).
    /// - Accepted items go back to `ready` with `run_at = now`, keeping `attempt` and
    ///   `stalls`: a release is not a failure. The next claim is a new attempt, so
    ///   `max_attempts` goes up by one: a release never uses up the item's attempts
    ///   (G5; `g05_retry`).
    async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>>;

    /// Recovers up to `limit` expired leases (`lease_expires_at <= now`) in any queue.
    ///
    /// # Contract
    /// - Each counts a stall. With `stalls >= max_stalls` the item goes `dead` with
    ///   a `last_error` that says it stalled (G6; `g06_stalls`); otherwise it goes back to
    ///   `ready` with `run_at = now`, keeping `attempt` (G2; `g02_expiry`).
    async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered>;

    /// Deletes finished items older than `keep_done_for` and dedup keys past their
    /// window (G11; `g11_dedup`).
    ///
    /// # Contract
    /// - A finished item is deleted once its last change is at least `keep_done_for`
    ///   old, never before; [`Purged::items`] says how many were (0 on a store that
    ///   deletes finished items when they finish) (`g11_dedup`,
    ///   `purge_keeps_finished_items_younger_than_keep_done_for_and_counts_those_it_deletes`).
    /// - One pass deletes at most `limit` rows of each kind.
    async fn purge(&self, params: PurgeParams) -> Result<Purged>;

    /// Puts dead items back to `ready` (G5; `g05_retry`), returning how many.
    ///
    /// # Contract
    /// - Only `dead` items change; others are left alone and not counted.
    /// - `attempt` is kept; `max_attempts` becomes at least `attempt +
    ///   additional_attempts`; `stalls` goes back to 0; `run_at = now`; `last_error`
    ///   is kept until the next attempt fails ([`machine::requeue`](crate::machine::requeue)).
    ///   So no token of an earlier attempt can become valid again. A filtered requeue
    ///   changes each item exactly so (conformance group `op_control`,
    ///   `a_filtered_requeue_grants_attempts_and_resets_stalls_as_a_requeue_by_id_does`).
    /// - With [`RequeueParams::filter`] the items are the dead items of the filter's
    ///   queue whose `updated_at <= filter.dead_before(now)` (`updated_at` of a dead
    ///   item is when it last died), earliest `updated_at` first, ties in enqueue
    ///   order, at most `filter.limit` of them; fewer than the limit means none is
    ///   left. Only the filter's queue: never a queue whose name merely begins with
    ///   it (conformance group `op_control`,
    ///   `a_bounded_dead_filter_takes_the_earliest_dead_first`).
    /// - A filtered call does work in proportion to `filter.limit`, not to the queue's
    ///   dead items: it reads them in the order above and stops at the limit.
    async fn dead_requeue(&self, params: RequeueParams) -> Result<u64>;

    /// Deletes dead items, returning how many (G5; `g05_retry`). Other items are left
    /// alone. A discarded head no longer blocks its stream, by id or by filter
    /// (`op_control`, `a_dead_head_discarded_or_requeued_by_filter_lets_its_stream_move_on`).
    /// Their dedup keys are kept (G11; `g11_dedup`,
    /// `a_discarded_dead_item_still_dedups_within_the_window`).
    ///
    /// # Contract
    /// - With [`DiscardParams::filter`] the items are chosen exactly as
    ///   [`Store::dead_requeue`] chooses them (conformance group `op_control`).
    async fn dead_discard(&self, params: DiscardParams) -> Result<u64>;

    /// Reads one item, or `None` if it does not exist (or was deleted when finished).
    async fn item_get(&self, id: ItemId) -> Result<Option<Item>>;

    /// Counts a queue's items by state, `ready` split into due and scheduled at `now`.
    ///
    /// # Contract
    /// - `paused` is true while the queue is paused ([`Store::queue_pause`]).
    /// - `oldest_ready_age` is `now - run_at` of the due ready item with the smallest
    ///   `run_at`, `None` without one: a delayed or retried item waits from its
    ///   `run_at`, not from its enqueue or its failure (conformance group
    ///   `op_inspection`).
    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts>;

    /// Registers `instance` on its first call and records a heartbeat at `now` on every
    /// call (G12; `g12_instances`).
    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()>;

    /// The registered instances, oldest registration first.
    async fn instance_list(&self) -> Result<Vec<Instance>>;

    /// Evicts instances whose last heartbeat is at least `stale_after` old.
    ///
    /// # Contract
    /// - Every running item owned by an evicted instance is released at once, counting
    ///   a stall as recovery does (dead at `max_stalls`), so peers can claim it and the
    ///   evicted owner's late finalizes answer lease lost (G12, G3; `g12_instances`).
    /// - Streams pinned to an evicted instance are unpinned (G14, on stores that
    ///   declare it; `g14_partitioned_claiming`).
    async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted>;

    /// Removes `instance` from the registry at once, as a worker does when it shuts down,
    /// instead of leaving it to be evicted as stale.
    ///
    /// # Contract
    /// - The instance no longer appears in [`Store::instance_list`] (G12; `g12_instances`).
    /// - Every running item it still owns is released exactly as
    ///   [`Store::instance_evict_stale`] releases an evicted instance's items (a stall
    ///   each), so nothing it held waits for its lease to expire, and its streams are
    ///   unpinned (G14).
    /// - An instance that is not registered is not an error: the answer lists no
    ///   instance, and any running item with that owner is still released
    ///   (`g12_instances`,
    ///   `deregistering_an_owner_that_never_registered_still_releases_its_leases`).
    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted>;

    /// Tries to hold the leader lease `name` (G13; `g13_leader`).
    ///
    /// # Contract
    /// - Free or expired (`expires_at <= now`): the caller becomes leader with a term
    ///   strictly greater than every earlier term of that name.
    /// - Held by the caller and not expired: extended to `now + lease_for`, same term.
    /// - Held by another and not expired: [`LeaderStatus::Follower`].
    /// - An unreachable backend is `Err` ([`Error::Unavailable`](crate::Error)), never
    ///   `Follower`.
    async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus>;

    /// Gives the lease up if the caller holds it; true when it did. The term is kept, so
    /// the next holder still gets a greater one (G13; `g13_leader`).
    async fn leader_resign(&self, params: LeaderParams) -> Result<bool>;

    /// Reads who holds the leader lease `name`, writing nothing (G13; `g13_leader`).
    ///
    /// # Contract
    /// - Answers the holder, term and expiry of a live lease (`expires_at > now`,
    ///   exactly the lease [`Store::leader_acquire`] would answer `Follower` for to
    ///   anyone else), and `None` when nobody holds it live: never acquired, resigned,
    ///   or expired (`expires_at <= now`). An expired holder is never reported as the
    ///   leader.
    /// - MUST NOT change the lease: not its holder, term or expiry. Reading it any
    ///   number of times leaves the next holder's term exactly as it would have been.
    /// - An unreachable backend is `Err` ([`Error::Unavailable`](crate::Error)), never
    ///   `None`.
    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>>;

    /// One page of a queue's items in one listable state (conformance group
    /// `op_inspection`). Only that queue's: a queue whose name begins with this one's
    /// is another queue.
    ///
    /// # Contract
    /// - Shows the items of `params.queue` that [`ListState::matches`](crate::ListState::matches)
    ///   at the store's `now` (answered as [`ItemPage::as_of`]), in enqueue order
    ///   (`params.order`), at most `params.limit`, each as [`Store::item_get`] would
    ///   read it (`attempt`, `owner`, `lease_expires_at`, `last_error` included).
    /// - [`ItemPage::next`] is `Some` when more items may follow; passing it back as
    ///   `params.cursor` (same queue, state and order) continues strictly after the last
    ///   item of the page, so paging through an unchanging queue shows every item once.
    ///   A cursor this store did not hand out is [`Error::InvalidInput`](crate::Error)
    ///   naming `cursor`.
    /// - MUST NOT slow claims: it reads through an index and never locks, or waits for,
    ///   a row a claim may take.
    async fn item_list(&self, params: ItemListParams) -> Result<ItemPage>;

    /// One page of a queue's leases: its `running` items' owner, attempt, expiry and
    /// renewals, soonest expiry first (ties in an order of the store's choosing, the same
    /// on every page, so paging shows leases of one expiry each once:
    /// `lease_pages_show_leases_of_one_expiry_each_once`), including expired leases not yet recovered, which come first
    /// with their expiry at or before the page's `as_of` (conformance group
    /// `op_inspection`).
    ///
    /// # Contract
    /// - Paged by cursor exactly as [`Store::item_list`] is, under the same rule on
    ///   claims.
    async fn lease_list(&self, params: LeaseListParams) -> Result<LeasePage>;

    /// The queues this store knows, by name: every queue with an unfinished, dead or
    /// kept finished item, and every paused queue (conformance group `op_inspection`;
    /// an unfinished item may be scheduled or running:
    /// `queue_list_names_a_queue_whose_only_items_are_scheduled_running_or_kept_done`).
    async fn queue_list(&self) -> Result<Vec<QueueName>>;

    /// Cancels ready and scheduled items, answering per id, in order (conformance
    /// group `op_control`).
    ///
    /// # Contract
    /// - A `ready` item (due or not) is deleted: [`Store::item_get`] answers `None`, it
    ///   is never claimed, and a cancelled stream head no longer blocks its stream (G9).
    ///   Its dedup key stays recorded for its window, so enqueueing the key again is a
    ///   duplicate naming the cancelled id (G11).
    /// - A `running` item is not cancelled, and answers [`CancelOutcome::Running`] with
    ///   its attempt and owner; `dead` and kept `done` items answer so and are left
    ///   alone; an unknown id answers [`CancelOutcome::NotFound`].
    /// - Decided atomically per item against claims: a cancelled item is never also
    ///   leased, and an item a concurrent claim leased answers `Running` naming the
    ///   claim's owner and attempt (`op_control`,
    ///   `a_cancel_racing_claims_never_leaves_an_item_both_cancelled_and_leased`).
    async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>>;

    /// Pauses a queue: from when this returns, no claim takes the queue's items until
    /// [`Store::queue_resume`] (conformance group `op_control`).
    ///
    /// # Contract
    /// - Answers true when the queue was not paused before.
    /// - Leases already held run on: they can be renewed, completed, failed and
    ///   released; recovery and eviction treat them as usual. Enqueues are accepted.
    /// - [`QueueCounts::paused`] is true and [`Store::queue_list`] lists the queue while
    ///   it is paused, even with no items.
    /// - A claim that overlaps the pause either takes an item before the pause (its
    ///   lease then runs on) or does not take it; no claim that starts after the pause
    ///   returned takes it.
    async fn queue_pause(&self, params: PauseParams) -> Result<bool>;

    /// Resumes a paused queue: its items are claimable again. Answers true when it was
    /// paused (conformance group `op_control`).
    async fn queue_resume(&self, params: PauseParams) -> Result<bool>;

    /// Sets a queue's limits (G16, G17, G18), replacing what it had, at run time.
    /// Answers the limits it had before, `None` when it had none. Only on stores that
    /// declare [`Capabilities::limits`]; the default answers
    /// [`Error::Unsupported`](crate::Error::Unsupported) and writes nothing.
    ///
    /// # Contract
    /// - Validates first: a limit of 0 or over the maximum, a rate under one start or
    ///   a period under 1 s, a weight of 0 is [`Error::InvalidInput`](crate::Error)
    ///   naming the field, and nothing is written (G15; `g16_concurrency_limits`,
    ///   `bad_limits_name_their_field_and_write_nothing`).
    /// - Claims that start after it returns obey the new limits. Lowering a limit below
    ///   what runs preempts nothing: running leases run on, renew and finish as usual,
    ///   and no claim takes a slot of the key until its running count is under the new
    ///   bound (G16; `g16_concurrency_limits`,
    ///   `lowering_a_limit_preempts_nothing_and_stops_new_claims`).
    /// - A queue with limits is listed by [`Store::limits_list`] even with no items.
    async fn limits_set(&self, params: LimitsParams) -> Result<Option<QueueLimits>> {
        let _ = params;
        Err(crate::Error::unsupported("limits_set", self.name()))
    }

    /// The limits of `queue`, `None` when it has none (G16; `g16_concurrency_limits`).
    /// Reads nothing but the configuration and writes nothing.
    async fn limits_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        let _ = queue;
        Err(crate::Error::unsupported("limits_get", self.name()))
    }

    /// Removes `queue`'s limits; answers true when it had some. Its rate history (the
    /// starts of the last period, a deferral) goes with them (G16, G17).
    async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
        let _ = queue;
        Err(crate::Error::unsupported("limits_clear", self.name()))
    }

    /// Every queue with limits, by name, with its limits.
    async fn limits_list(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        Err(crate::Error::unsupported("limits_list", self.name()))
    }

    /// Pushes the next start of a limit key (or of the whole queue) back: no claim
    /// starts an item of `params.key` in `params.queue` (of any key, with `None`)
    /// before `now + params.delay` (G17). A handler told "rate limited, retry in 30 s"
    /// by the service behind its key calls it, then fails or releases its attempt.
    ///
    /// # Contract
    /// - Items held back are not claimed, so they use no attempt; other keys' items
    ///   are not held up (G17; `g17_rate_limits`,
    ///   `a_deferred_key_starts_nothing_until_its_time_and_holds_up_no_other_key`).
    /// - A later deferral never shortens an earlier one.
    /// - Works whether or not the queue has limits; [`Store::limits_clear`] ends it.
    async fn limits_defer(&self, params: DeferParams) -> Result<()> {
        let _ = params;
        Err(crate::Error::unsupported("limits_defer", self.name()))
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
    /// # Contract
    /// - Never later than the instant a claim would take a held-back item by time
    ///   alone; an earlier answer costs one empty poll, never a missed start
    ///   (runtime test `limits::a_worker_at_a_rate_polls_again_when_the_next_start_is_allowed`).
    async fn limits_wait(&self, queues: &[QueueName]) -> Result<Option<std::time::Duration>> {
        let _ = queues;
        Ok(None)
    }
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
        ] }
    };
}

crate::forward_store! {
    impl<S: Store + ?Sized> Store for Arc<S> {
        forward self => **self;
    }
}
