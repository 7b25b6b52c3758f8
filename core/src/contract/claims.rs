//! The [`Claims`] group of the contract.

use async_trait::async_trait;

use super::{Base, Valid};
use crate::error::Result;
use crate::model::{Enqueued, Lease};
use crate::store::{ClaimParams, EnqueueParams};

// The docs name them.
#[cfg(doc)]
use crate::store::{Capabilities, Limits, QueueLimits};
#[cfg(doc)]
use crate::Store;

/// Enqueue and claim: how work comes in and how it is leased out (G1, G2, G7..G11, G14,
/// G16..G18).
///
/// Part of the contract a store implements; callers reach these methods through
/// [`Store`], which validates their params first (see [`Valid`]).
#[async_trait]
pub trait Claims: Base {
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
    async fn enqueue(&self, params: Valid<EnqueueParams>) -> Result<Vec<Enqueued>>;

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
    async fn claim(&self, params: Valid<ClaimParams>) -> Result<Vec<Lease>>;
}
