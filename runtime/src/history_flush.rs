//! Counting a worker's finishes into its history tallies and adding them to the
//! store (see `history.rs` for what the history is and when a count is taken).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use tenure_core::{HistoryAddParams, HistoryEntry, LeaseToken};

use crate::history::{Kind, HISTORY_FLUSH};
use crate::shared::Shared;

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
