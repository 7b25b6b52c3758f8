//! Work over time (the contract's `History` group): per-queue, per-minute sums in a
//! map under their own lock, apart from the items' state so a history write never
//! waits on claims.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use tenure_core::async_trait;
use tenure_core::contract::{History, Valid};
use tenure_core::{
    HistoryAddParams, HistoryCounts, HistoryParams, HistoryPoint, QueueName, Result, Timestamp,
    HISTORY_KEEP,
};

use crate::error::{poisoned, switched_off};
use crate::MemoryStore;

/// Totals by queue, then minute.
pub(crate) type HistoryMap = BTreeMap<QueueName, BTreeMap<Timestamp, HistoryCounts>>;

#[async_trait]
impl History for MemoryStore {
    async fn history_add(&self, params: Valid<HistoryAddParams>) -> Result<()> {
        if !self.inner.available.load(Ordering::SeqCst) {
            return Err(switched_off());
        }
        let mut map = self.inner.history.lock().map_err(|_| poisoned())?;
        for e in &params.entries {
            let minutes = map.entry(e.queue.clone()).or_default();
            let total = minutes.entry(e.minute).or_default();
            *total = total.plus(e.counts);
            let keep_from = e.minute.saturating_sub(HISTORY_KEEP);
            // Older minutes go, the oldest first: as many as there are, since a map
            // split is bounded by its size anyway.
            let newer = minutes.split_off(&keep_from);
            *minutes = newer;
        }
        Ok(())
    }

    async fn history(&self, params: Valid<HistoryParams>) -> Result<Vec<HistoryPoint>> {
        if !self.inner.available.load(Ordering::SeqCst) {
            return Err(switched_off());
        }
        let map = self.inner.history.lock().map_err(|_| poisoned())?;
        Ok(map
            .get(&params.queue)
            .map(|minutes| {
                minutes
                    .range(params.since..params.until)
                    .filter(|(_, c)| !c.is_empty())
                    .map(|(m, c)| HistoryPoint::new(*m, *c))
                    .collect()
            })
            .unwrap_or_default())
    }
}
