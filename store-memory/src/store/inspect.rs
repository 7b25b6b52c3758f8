//! Inspection and control (the contract's fifth group): the bodies of the dead-item
//! requeue and discard, the reads (item, counts, listings) and the operator's controls
//! (cancel, pause, resume), each one call into
//! [`State`](crate::state::State) under the lock.

use tenure_core::async_trait;
use tenure_core::contract::{Inspect, Valid};
use tenure_core::{
    CancelOutcome, CancelParams, DiscardParams, Item, ItemId, ItemListParams, ItemPage,
    LeaseListParams, LeasePage, PauseParams, QueueCounts, QueueName, RequeueParams, Result,
};

use crate::MemoryStore;

#[async_trait]
impl Inspect for MemoryStore {
    async fn dead_requeue(&self, params: Valid<RequeueParams>) -> Result<u64> {
        self.with_state(|s, now| match &params.filter {
            Some(f) => {
                let ids = s.dead_matching(f, now);
                s.dead_requeue(&ids, params.additional_attempts, now)
            }
            None => s.dead_requeue(&params.ids, params.additional_attempts, now),
        })
    }

    async fn dead_discard(&self, params: Valid<DiscardParams>) -> Result<u64> {
        self.with_state(|s, now| match &params.filter {
            Some(f) => {
                let ids = s.dead_matching(f, now);
                s.dead_discard(&ids, now)
            }
            None => s.dead_discard(&params.ids, now),
        })
    }

    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        self.with_state(|s, _| s.item_get(id))
    }

    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
        self.with_state(|s, now| s.queue_counts(queue, now))
    }

    async fn item_list(&self, params: Valid<ItemListParams>) -> Result<ItemPage> {
        let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
        self.with_state(|s, now| {
            s.item_list(
                &params.queue,
                params.state,
                params.order,
                limit,
                params.cursor.as_ref(),
                now,
            )
        })?
    }

    async fn lease_list(&self, params: Valid<LeaseListParams>) -> Result<LeasePage> {
        let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
        self.with_state(|s, now| s.lease_list(&params.queue, limit, params.cursor.as_ref(), now))?
    }

    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        self.with_state(|s, _| s.queue_list())
    }

    async fn item_cancel(&self, params: Valid<CancelParams>) -> Result<Vec<CancelOutcome>> {
        self.with_state(|s, now| s.item_cancel(&params.ids, params.stop_running.as_deref(), now))?
    }

    async fn queue_pause(&self, params: Valid<PauseParams>) -> Result<bool> {
        self.with_state(|s, _| s.set_paused(&params.queue, true))
    }

    async fn queue_resume(&self, params: Valid<PauseParams>) -> Result<bool> {
        self.with_state(|s, _| s.set_paused(&params.queue, false))
    }
}
