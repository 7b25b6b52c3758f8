//! The worker's share of the store's work history: what its finishes did, per queue,
//! summed in memory and added to the store every [`HISTORY_FLUSH`] with one
//! [`Store::history_add`](tenure_core::Store::history_add) call, never one per item.
//!
//! A count is taken when the store accepted the finish (a completion, a failure that
//! retries, a failure that made the item dead) and is added to the minute of the
//! flush that carries it, so a minute's figure may hold the last seconds of the minute
//! before. A flush the store refuses is kept and sent with the next one. What has not
//! been flushed when the process dies is lost: the history is an operator's view,
//! not an account.
//!
//! The tallies live here, below the worker state that holds them;
//! counting into them and flushing them is in `history_flush.rs`, above it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tenure_core::{HistoryCounts, QueueName};

/// How often a worker adds its counts to the store's history.
pub const HISTORY_FLUSH: Duration = Duration::from_secs(5);

/// Which count a finish adds to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Finished,
    Failed,
    Dead,
}

/// Per served queue (in the order of the worker's metric handles), the counts not yet
/// added to the store.
#[derive(Debug)]
pub(crate) struct Tallies {
    queues: Vec<(QueueName, [AtomicU64; 3])>,
}

impl Tallies {
    /// Zero counts for `queues`, in this order.
    pub(crate) fn new<'a>(queues: impl IntoIterator<Item = &'a QueueName>) -> Self {
        Tallies {
            queues: queues
                .into_iter()
                .map(|q| (q.clone(), Default::default()))
                .collect(),
        }
    }

    pub(crate) fn add(&self, queue: u32, kind: Kind, n: u64) {
        let i = usize::try_from(queue).unwrap_or(0);
        if let Some((_, c)) = self.queues.get(i).or_else(|| self.queues.first()) {
            c[kind as usize].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Takes every queue's counts, leaving zeros.
    pub(crate) fn take(&self) -> Vec<(QueueName, HistoryCounts)> {
        self.queues
            .iter()
            .map(|(q, c)| {
                let [f, x, d] = c.each_ref().map(|a| a.swap(0, Ordering::Relaxed));
                (q.clone(), HistoryCounts::new(f, x, d))
            })
            .filter(|(_, c)| !c.is_empty())
            .collect()
    }

    /// Puts counts a flush could not write back, for the next one.
    pub(crate) fn put_back(&self, taken: &[(QueueName, HistoryCounts)]) {
        for (q, c) in taken {
            if let Some((_, a)) = self.queues.iter().find(|(n, _)| n == q) {
                a[0].fetch_add(c.finished, Ordering::Relaxed);
                a[1].fetch_add(c.failed, Ordering::Relaxed);
                a[2].fetch_add(c.dead, Ordering::Relaxed);
            }
        }
    }
}
