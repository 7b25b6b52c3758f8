//! Inspection and control (the contract's fifth group): the bodies of the dead-item
//! requeue and discard, the reads (item, counts, listings) and the operator's controls
//! (cancel, pause, resume), each run (`ops/inspect.rs`) on the writer thread.

use tenure_core::{DiscardParams, Item, ItemId, QueueCounts, QueueName, RequeueParams, Result};

use crate::{ops, SqliteStore};

impl SqliteStore {
    pub(super) async fn dead_requeue_impl(&self, params: RequeueParams) -> Result<u64> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::dead_requeue(cx, &params))
            .await
    }

    pub(super) async fn dead_discard_impl(&self, params: DiscardParams) -> Result<u64> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::dead_discard(cx, &params))
            .await
    }

    pub(super) async fn item_get_impl(&self, id: ItemId) -> Result<Option<Item>> {
        self.inner
            .writer
            .call(move |cx| ops::item_get(cx, id))
            .await
    }

    pub(super) async fn queue_counts_impl(&self, queue: &QueueName) -> Result<QueueCounts> {
        let queue = queue.clone();
        self.inner
            .writer
            .call(move |cx| ops::queue_counts(cx, &queue))
            .await
    }

    pub(super) async fn item_list_impl(
        &self,
        params: tenure_core::ItemListParams,
    ) -> Result<tenure_core::ItemPage> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::item_list(cx, &params))
            .await
    }

    pub(super) async fn lease_list_impl(
        &self,
        params: tenure_core::LeaseListParams,
    ) -> Result<tenure_core::LeasePage> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::lease_list(cx, &params))
            .await
    }

    pub(super) async fn queue_list_impl(&self) -> Result<Vec<QueueName>> {
        self.inner.writer.call(ops::queue_list).await
    }

    pub(super) async fn item_cancel_impl(
        &self,
        params: tenure_core::CancelParams,
    ) -> Result<Vec<tenure_core::CancelOutcome>> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::item_cancel(cx, &params.ids))
            .await
    }

    pub(super) async fn queue_pause_impl(&self, params: tenure_core::PauseParams) -> Result<bool> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::set_paused(cx, &params, true))
            .await
    }

    pub(super) async fn queue_resume_impl(&self, params: tenure_core::PauseParams) -> Result<bool> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::set_paused(cx, &params, false))
            .await
    }
}
