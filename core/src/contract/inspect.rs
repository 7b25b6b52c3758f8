//! The [`Inspect`] group of the contract.

use async_trait::async_trait;

use super::{Base, Valid};
use crate::error::Result;
use crate::keys::QueueName;
use crate::model::{Item, ItemId, QueueCounts};
use crate::operate::{CancelOutcome, ItemPage, LeasePage};
use crate::store::{
    CancelParams, DiscardParams, ItemListParams, LeaseListParams, PauseParams, RequeueParams,
};

use crate::Store;

/// The operator's view and controls: dead items, reads, listings, cancel, pause and
/// resume (G5, groups `op_inspection` and `op_control`).
///
/// Part of the contract a store implements; callers reach these methods through
/// [`Store`], which validates their params first (see [`Valid`]).
#[async_trait]
pub trait Inspect: Base {
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
    async fn dead_requeue(&self, params: Valid<RequeueParams>) -> Result<u64>;

    /// Deletes dead items, returning how many (G5; `g05_retry`). Other items are left
    /// alone. A discarded head no longer blocks its stream, by id or by filter
    /// (`op_control`, `a_dead_head_discarded_or_requeued_by_filter_lets_its_stream_move_on`).
    /// Their dedup keys are kept (G11; `g11_dedup`,
    /// `a_discarded_dead_item_still_dedups_within_the_window`).
    ///
    /// # Contract
    /// - With [`DiscardParams::filter`] the items are chosen exactly as
    ///   [`Store::dead_requeue`] chooses them (conformance group `op_control`).
    async fn dead_discard(&self, params: Valid<DiscardParams>) -> Result<u64>;

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
    async fn item_list(&self, params: Valid<ItemListParams>) -> Result<ItemPage>;

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
    /// - Each lease names the limit key its item was enqueued with
    ///   ([`LeaseInfo::limit_key`](crate::LeaseInfo::limit_key)), so an operator sees
    ///   which key's slot it holds (G16; `g16_concurrency_limits`,
    ///   `a_lease_list_names_the_limit_key_each_lease_holds_a_slot_of`).
    async fn lease_list(&self, params: Valid<LeaseListParams>) -> Result<LeasePage>;

    /// The queues this store knows, by name: every queue with an unfinished, dead or
    /// kept finished item, and every paused queue (conformance group `op_inspection`;
    /// an unfinished item may be scheduled or running:
    /// `queue_list_names_a_queue_whose_only_items_are_scheduled_running_or_kept_done`).
    async fn queue_list(&self) -> Result<Vec<QueueName>>;

    /// Cancels ready and scheduled items, and running ones when asked to, answering per
    /// id, in order (conformance group `op_control`).
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
    /// - With [`CancelParams::stop_running`] set to `by`, a `running` item is stopped
    ///   instead, answering [`CancelOutcome::Stopped`] with the attempt and owner it
    ///   stopped: exactly as if its holder had failed it permanently
    ///   ([`machine::cancel_running`](crate::machine::cancel_running), applied as
    ///   [`Store::fail`] applies a failure, fenced on the item's current token), it goes
    ///   `dead` with `last_error` `cancelled by <by>`
    ///   ([`machine::cancelled_by`](crate::machine::cancelled_by) reads it back),
    ///   `updated_at = now`, owner and expiry cleared, `attempt` kept. Ready and
    ///   scheduled items in the same call are cancelled as above (`op_control`,
    ///   `cancelling_a_running_item_stops_it_dead_naming_who_and_when`).
    /// - The stopped attempt's lease is revoked: its holder's next [`Store::renew`]
    ///   answers lease lost (which cancels the handler in the runtime), and every
    ///   complete, fail and release with its token, alone or in a batch, answers lease
    ///   lost and changes nothing (G3; `op_control`,
    ///   `a_stopped_lease_is_refused_on_every_renew_and_finish`).
    /// - The stopped item is `dead` because that is the state an operator already
    ///   reads, lists ([`ListState::Dead`](crate::ListState::Dead)) and acts on: it is
    ///   never claimed again until requeued ([`Store::dead_requeue`], which keeps its
    ///   attempt so the revoked token stays refused) or discarded; as any dead stream
    ///   head, it holds its stream (G9) until then, and its scope and limit slots are
    ///   free at once, as after any failure.
    /// - Decided atomically per item against its holder: a running item that its
    ///   holder finishes, fails or releases at the same time either is stopped (and the
    ///   holder's finish answers lease lost) or was finished first (and the cancel
    ///   answers as it would for the item's new state). A store without an atomic
    ///   read-and-fail may read the token, apply the failure, and read again when the
    ///   failure answers lease lost.
    async fn item_cancel(&self, params: Valid<CancelParams>) -> Result<Vec<CancelOutcome>>;

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
    async fn queue_pause(&self, params: Valid<PauseParams>) -> Result<bool>;

    /// Resumes a paused queue: its items are claimable again. Answers true when it was
    /// paused (conformance group `op_control`).
    async fn queue_resume(&self, params: Valid<PauseParams>) -> Result<bool>;
}

/// Times [`stop_running`] reads an item again after its holder moved it on first.
const STOP_TRIES: usize = 8;

/// Stops one running item on behalf of `by` through `store`'s own fenced reads and
/// [`Store::fail`], for a store whose [`Inspect::item_cancel`] cannot read a running
/// item and fail it in one atomic step (the PostgreSQL and Redis stores use it).
///
/// It reads the item and fails its current token permanently
/// ([`machine::cancel_running`](crate::machine::cancel_running)). When the fail
/// answers lease lost, the holder finished, failed or released the attempt first (or
/// a claim took the item again), and it reads the item again: a ready item is
/// cancelled as a ready item, a running one (a new attempt) is stopped, a dead or
/// done one answers so. Each step is fenced, so the answer always says what happened
/// to the item; an item that keeps changing under it after a few tries is
/// [`Error::Conflict`](crate::Error::Conflict).
pub async fn stop_running<S: Store + ?Sized>(
    store: &S,
    id: ItemId,
    by: &str,
) -> Result<CancelOutcome> {
    use crate::error::Error;
    use crate::model::{FailOutcome, ItemState};
    for _ in 0..STOP_TRIES {
        let Some(item) = store.item_get(id).await? else {
            return Ok(CancelOutcome::NotFound);
        };
        match item.state {
            ItemState::Running => {
                let owner = item.owner.clone().ok_or_else(|| {
                    Error::internal(store.name(), format!("running item {id} has no owner"))
                })?;
                let Some(failure) = crate::machine::cancel_running(&item, by) else {
                    continue;
                };
                let answer = store.fail(crate::store::FailParams::one(failure)).await?;
                match answer.as_slice() {
                    [FailOutcome::Dead] => {
                        return Ok(CancelOutcome::Stopped {
                            attempt: item.attempt,
                            owner,
                        })
                    }
                    [FailOutcome::LeaseLost] => continue,
                    other => {
                        return Err(Error::internal(
                            store.name(),
                            format!("stopping running item {id} answered {other:?}"),
                        ))
                    }
                }
            }
            ItemState::Ready => {
                let answer = store.item_cancel(CancelParams::new(vec![id])).await?;
                match answer.as_slice() {
                    [CancelOutcome::Running { .. }] => continue,
                    [one] => return Ok(one.clone()),
                    other => {
                        return Err(Error::internal(
                            store.name(),
                            format!("cancelling item {id} answered {other:?}"),
                        ))
                    }
                }
            }
            ItemState::Dead => return Ok(CancelOutcome::Dead),
            ItemState::Done => return Ok(CancelOutcome::Done),
        }
    }
    Err(Error::conflict(
        "item",
        format!("{id} kept changing state under the cancel; try again"),
    ))
}
