//! The [`Finalize`] group of the contract.

use async_trait::async_trait;

use super::{Base, Valid};
use crate::error::Result;
use crate::model::{FailOutcome, RenewOutcome, TokenOutcome};
use crate::store::{CompleteParams, FailParams, ReleaseParams, RenewParams};

// The docs name them.
#[cfg(doc)]
use crate::store::Retry;
#[cfg(doc)]
use crate::Store;

/// Renew, complete, fail and release: every write on a running item, fenced on its lease
/// token (G3, G4, G5, G9).
///
/// Part of the contract a store implements; callers reach these methods through
/// [`Store`], which validates their params first (see [`Valid`]).
#[async_trait]
pub trait Finalize: Base {
    /// Extends leases, answering per token, in order.
    ///
    /// # Contract
    /// - A token that is not the item's current `running` lease (its attempt and its
    ///   lease id, compared for every token of a batch as for a token alone) answers
    ///   [`RenewOutcome::LeaseLost`] and changes nothing (G3; `g03_fenced_finalize`).
    /// - When `renewals == max_renewals` answers [`RenewOutcome::LimitReached`] and leaves
    ///   the expiry alone (G4; `g04_renewal_cap`); otherwise sets
    ///   `lease_expires_at = now + lease_for` and `renewals + 1`.
    /// - A lease that has expired but was neither recovered nor re-claimed is still the
    ///   current attempt and may be renewed.
    /// - Progress reported with a token ([`RenewParams::progress_at`]) is kept on the
    ///   item as [`machine::report`](crate::machine::report) keeps it (its attempt set
    ///   to the token's) when the renewal answers `Renewed`, in the same step as the
    ///   renewal; a token that answers `LeaseLost` (or `LimitReached`) stores none, so a superseded holder never overwrites the
    ///   current one's progress (conformance group `op_control`,
    ///   `progress_is_kept_from_the_holder_and_refused_from_a_superseded_lease`).
    ///   A renewal that reports nothing leaves the kept progress alone.
    async fn renew(&self, params: Valid<RenewParams>) -> Result<Vec<RenewOutcome>>;

    /// Finishes attempts successfully, answering per token, in order.
    ///
    /// # Contract
    /// - A token that is not the item's current `running` lease (its attempt and its
    ///   lease id, compared for every token of a batch as for a token alone) answers
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
    async fn complete(&self, params: Valid<CompleteParams>) -> Result<Vec<TokenOutcome>>;

    /// Records failed attempts, answering per failure, in order.
    ///
    /// # Contract
    /// - A token that is not the item's current `running` lease (its attempt and its
    ///   lease id, compared for every token of a batch as for a token alone) answers
    ///   [`FailOutcome::LeaseLost`] and changes nothing (G3; `g03_fenced_finalize`).
    /// - [`Retry::After`] with `attempt < max_attempts` puts the item back to `ready`
    ///   with `run_at = now + delay`, keeping `attempt`; with `attempt >= max_attempts`,
    ///   and [`Retry::Never`] always, the item goes `dead` (G5; `g05_retry`).
    /// - `last_error` keeps the failure's message either way. A dead or waiting item
    ///   keeps blocking its stream (G9).
    async fn fail(&self, params: Valid<FailParams>) -> Result<Vec<FailOutcome>>;

    /// Gives leases back unfinished, answering per token, in order.
    ///
    /// # Contract
    /// - A token that is not the item's current `running` lease (its attempt and its
    ///   lease id, compared for every token of a batch as for a token alone) answers
    ///   [`TokenOutcome::LeaseLost`] and changes nothing (G3; `g03_fenced_finalize`).
    /// - Accepted items go back to `ready` with `run_at = now`, keeping `attempt` and
    ///   `stalls`: a release is not a failure. The next claim is a new attempt, so
    ///   `max_attempts` goes up by one: a release never uses up the item's attempts
    ///   (G5; `g05_retry`).
    async fn release(&self, params: Valid<ReleaseParams>) -> Result<Vec<TokenOutcome>>;
}
