//! The [`History`] group of the contract.

use async_trait::async_trait;

use super::{Base, Valid};
use crate::error::Result;
use crate::store::{HistoryAddParams, HistoryParams, HistoryPoint};

// The docs name them.
#[cfg(doc)]
use crate::{Store, HISTORY_KEEP};

/// Work over time: per-queue, per-minute sums of finished, failed and dead attempts,
/// kept by the store so every reader of the store sees one history (conformance group
/// `op_history`).
///
/// Workers add their counts in aggregate, one call every few seconds, never one per
/// item, so the history costs the claim and finalize paths nothing.
///
/// Part of the contract a store implements; callers reach these methods through
/// [`Store`], which validates their params first (see [`Valid`]).
#[async_trait]
pub trait History: Base {
    /// Adds each entry's counts to the totals of its queue and minute.
    ///
    /// # Contract
    /// - Additive: a minute's totals are the sums of every count ever added to it,
    ///   through any handle of the store, in one call or many, concurrent calls
    ///   included (`op_history`, `history_adds_sum_per_queue_and_minute_across_handles`).
    /// - Keeps every minute younger than [`HISTORY_KEEP`] before the newest minute
    ///   added; MAY delete older minutes, in work bounded per call.
    /// - Writes nothing else: no item, queue or count of [`Store::queue_list`] changes.
    async fn history_add(&self, params: Valid<HistoryAddParams>) -> Result<()>;

    /// The minutes of `params.queue` from `params.since` (inclusive) to `params.until`
    /// (exclusive) that have a count other than zero, earliest first.
    ///
    /// # Contract
    /// - Only that queue's: a queue whose name begins with this one's is another queue
    ///   (`op_history`, `history_reads_one_queue_and_only_the_span_asked`).
    /// - A minute with no count added is left out, not answered as zeros.
    async fn history(&self, params: Valid<HistoryParams>) -> Result<Vec<HistoryPoint>>;
}
