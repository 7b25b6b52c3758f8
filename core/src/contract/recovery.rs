//! The [`Recovery`] group of the contract.

use async_trait::async_trait;

use super::{Base, Valid};
use crate::error::Result;
use crate::model::{Purged, Recovered};
use crate::store::{PurgeParams, RecoverParams};

// The docs name it.
#[cfg(doc)]
use crate::Store;

/// Maintenance: expired leases back to work, finished items and old dedup keys out (G2,
/// G6, G11).
///
/// Part of the contract a store implements; callers reach these methods through
/// [`Store`], which validates their params first (see [`Valid`]).
#[async_trait]
pub trait Recovery: Base {
    /// Recovers up to `limit` expired leases (`lease_expires_at <= now`) in any queue.
    ///
    /// # Contract
    /// - Each counts a stall. With `stalls >= max_stalls` the item goes `dead` with
    ///   a `last_error` that says it stalled (G6; `g06_stalls`); otherwise it goes back to
    ///   `ready` with `run_at = now`, keeping `attempt` (G2; `g02_expiry`).
    async fn recover_expired(&self, params: Valid<RecoverParams>) -> Result<Recovered>;

    /// Deletes finished items older than `keep_done_for` and dedup keys past their
    /// window (G11; `g11_dedup`).
    ///
    /// # Contract
    /// - A finished item is deleted once its last change is at least `keep_done_for`
    ///   old, never before; [`Purged::items`] says how many were (0 on a store that
    ///   deletes finished items when they finish) (`g11_dedup`,
    ///   `purge_keeps_finished_items_younger_than_keep_done_for_and_counts_those_it_deletes`).
    /// - One pass deletes at most `limit` rows of each kind.
    async fn purge(&self, params: Valid<PurgeParams>) -> Result<Purged>;
}
