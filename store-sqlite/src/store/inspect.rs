//! Inspection and control (the contract's fifth group): the bodies of the dead-item
//! requeue and discard, the reads (item, counts, listings) and the operator's controls
//! (cancel, pause, resume), each run (`ops/inspect.rs`) on the writer thread.

use tenure_core::async_trait;
use tenure_core::contract::{Inspect, Valid};
use tenure_core::{DiscardParams, Item, ItemId, QueueCounts, QueueName, RequeueParams, Result};

use crate::{ops, SqliteStore};

#[async_trait]
impl Inspect for SqliteStore {
    async fn dead_requeue(&self, params: Valid<RequeueParams>) -> Result<u64> {
        self.inner
            .writer
            .call(move |cx| ops::dead_requeue(cx, &params))
            .await
    }

    async fn dead_discard(&self, params: Valid<DiscardParams>) -> Result<u64> {
        self.inner
            .writer
            .call(move |cx| ops::dead_discard(cx, &params))
            .await
    }

    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        self.inner
            .writer
            .call(move |cx| ops::item_get(cx, id))
            .await
    }

    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
        let queue = queue.clone();
        self.inner
            .writer
            .call(move |cx| ops::queue_counts(cx, &queue))
            .await
    }

    async fn item_list(
        &self,
        params: Valid<tenure_core::ItemListParams>,
    ) -> Result<tenure_core::ItemPage> {
        self.inner
            .writer
            .call(move |cx| ops::item_list(cx, &params))
            .await
    }

    async fn lease_list(
        &self,
        params: Valid<tenure_core::LeaseListParams>,
    ) -> Result<tenure_core::LeasePage> {
        self.inner
            .writer
            .call(move |cx| ops::lease_list(cx, &params))
            .await
    }

    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        self.inner.writer.call(ops::queue_list).await
    }

    async fn item_cancel(
        &self,
        params: Valid<tenure_core::CancelParams>,
    ) -> Result<Vec<tenure_core::CancelOutcome>> {
        self.inner
            .writer
            .call(move |cx| ops::item_cancel(cx, &params.ids, params.stop_running.as_deref()))
            .await
    }

    async fn queue_pause(&self, params: Valid<tenure_core::PauseParams>) -> Result<bool> {
        self.inner
            .writer
            .call(move |cx| ops::set_paused(cx, &params, true))
            .await
    }

    async fn queue_resume(&self, params: Valid<tenure_core::PauseParams>) -> Result<bool> {
        self.inner
            .writer
            .call(move |cx| ops::set_paused(cx, &params, false))
            .await
    }
}
