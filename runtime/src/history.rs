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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use tenure_core::{HistoryAddParams, HistoryCounts, HistoryEntry, LeaseToken, QueueName};

use crate::shared::Shared;

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

    fn add(&self, queue: u32, kind: Kind, n: u64) {
        let i = usize::try_from(queue).unwrap_or(0);
        if let Some((_, c)) = self.queues.get(i).or_else(|| self.queues.first()) {
            c[kind as usize].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Takes every queue's counts, leaving zeros.
    fn take(&self) -> Vec<(QueueName, HistoryCounts)> {
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
    fn put_back(&self, taken: &[(QueueName, HistoryCounts)]) {
        for (q, c) in taken {
            if let Some((_, a)) = self.queues.iter().find(|(n, _)| n == q) {
                a[0].fetch_add(c.finished, Ordering::Relaxed);
                a[1].fetch_add(c.failed, Ordering::Relaxed);
                a[2].fetch_add(c.dead, Ordering::Relaxed);
            }
        }
    }
}

impl Shared {
    /// Counts `tokens`' finishes of `kind` for the history: one add when the worker
    /// serves one queue, else one lock for every token.
    pub(crate) fn history_tally<'a>(
        &self,
        tokens: impl IntoIterator<Item = &'a LeaseToken>,
        kind: Kind,
    ) {
        if self.export.single() {
            let n = tokens.into_iter().count() as u64;
            if n > 0 {
                self.history.add(0, kind, n);
            }
            return;
        }
        for t in tokens {
            self.history.add(self.inflight.queue(t), kind, 1);
        }
    }
}

/// Adds what was counted since the last flush to the store, if anything was; answers
/// false when the store did not take it (kept for the next flush).
pub(crate) async fn flush(shared: &Shared) -> bool {
    let taken = shared.history.take();
    if taken.is_empty() {
        return true;
    }
    let now = shared.settings.clock.now();
    let entries = taken
        .iter()
        .map(|(q, c)| HistoryEntry::new(q.clone(), now, *c))
        .collect();
    let call = shared.store.history_add(HistoryAddParams::new(entries));
    match tokio::time::timeout(HISTORY_FLUSH, call).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::debug!(event = "history", error = %e, "history flush failed; kept for the next");
            shared.history.put_back(&taken);
            false
        }
        Err(_) => {
            tracing::debug!(
                event = "history",
                "history flush timed out; kept for the next"
            );
            shared.history.put_back(&taken);
            false
        }
    }
}

/// Flushes every [`HISTORY_FLUSH`] until `stop`.
pub(crate) async fn history_loop(shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(HISTORY_FLUSH) => {}
        }
        flush(&shared).await;
    }
}
