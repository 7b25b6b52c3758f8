//! Inspection and control (the contract's fifth group): the bodies of the dead-item
//! requeue and discard, the reads (item, counts, listings) and the operator's controls
//! (cancel, pause, resume), each validating its params and then one call into
//! [`State`](crate::state::State) under the lock.

use tenure_core::{
    CancelOutcome, CancelParams, DiscardParams, Item, ItemId, ItemListParams, ItemPage,
    LeaseListParams, LeasePage, PauseParams, QueueCounts, QueueName, RequeueParams, Result,
};

use crate::MemoryStore;

impl MemoryStore {
    pub(super) fn dead_requeue_impl(&self, params: &RequeueParams) -> Result<u64> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| match &params.filter {
            Some(f) => {
                let ids = s.dead_matching(f, now);
                s.dead_requeue(&ids, params.additional_attempts, now)
            }
            None => s.dead_requeue(&params.ids, params.additional_attempts, now),
        })
    }

    pub(super) fn dead_discard_impl(&self, params: &DiscardParams) -> Result<u64> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| match &params.filter {
            Some(f) => {
                let ids = s.dead_matching(f, now);
                s.dead_discard(&ids, now)
            }
            None => s.dead_discard(&params.ids, now),
        })
    }

    pub(super) fn item_get_impl(&self, id: ItemId) -> Result<Option<Item>> {
        self.with_state(|s, _| s.item_get(id))
    }

    pub(super) fn queue_counts_impl(&self, queue: &QueueName) -> Result<QueueCounts> {
        self.with_state(|s, now| s.queue_counts(queue, now))
    }

    pub(super) fn item_list_impl(&self, params: &ItemListParams) -> Result<ItemPage> {
        params.validate(&self.inner.limits)?;
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

    pub(super) fn lease_list_impl(&self, params: &LeaseListParams) -> Result<LeasePage> {
        params.validate(&self.inner.limits)?;
        let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
        self.with_state(|s, now| s.lease_list(&params.queue, limit, params.cursor.as_ref(), now))?
    }

    pub(super) fn queue_list_impl(&self) -> Result<Vec<QueueName>> {
        self.with_state(|s, _| s.queue_list())
    }

    pub(super) fn item_cancel_impl(&self, params: &CancelParams) -> Result<Vec<CancelOutcome>> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.item_cancel(&params.ids, now))?
    }

    pub(super) fn queue_pause_impl(&self, params: &PauseParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, _| s.set_paused(&params.queue, true))
    }

    pub(super) fn queue_resume_impl(&self, params: &PauseParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, _| s.set_paused(&params.queue, false))
    }
}
