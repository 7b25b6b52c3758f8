//! Queue limits (G16, G17): the bodies of the `limits_*` operations of
//! [`Store`](tenure_core::Store), each validating its params and then running its SQL
//! (`ops/limits.rs`) on the writer thread.

use tenure_core::{DeferParams, LimitsParams, QueueLimits, QueueName, Result};

use crate::{ops, SqliteStore};

impl SqliteStore {
    pub(super) async fn limits_set_impl(
        &self,
        params: LimitsParams,
    ) -> Result<Option<QueueLimits>> {
        params.validate(self.limits_ref())?;
        self.mark_limited();
        let before = self
            .inner
            .writer
            .call(move |cx| ops::limits_set(cx, &params.queue, &params.limits))
            .await?;
        // Raised limits may free slots: a waiting worker claims again.
        self.inner.wake.notify();
        Ok(before)
    }

    pub(super) async fn limits_get_impl(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        let queue = queue.clone();
        let got = self
            .inner
            .writer
            .call(move |cx| ops::limits_get(cx, &queue))
            .await?;
        if got.is_some() {
            self.mark_limited();
        }
        Ok(got)
    }

    pub(super) async fn limits_wait_impl(
        &self,
        queues: &[QueueName],
    ) -> Result<Option<std::time::Duration>> {
        let queues = queues.to_vec();
        let wait = self
            .inner
            .writer
            .call(move |cx| ops::limits_wait(cx, &queues))
            .await?;
        if wait.is_some() {
            self.mark_limited();
        }
        Ok(wait)
    }

    fn mark_limited(&self) {
        self.inner
            .limited
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) async fn limits_clear_impl(&self, queue: &QueueName) -> Result<bool> {
        let queue = queue.clone();
        let had = self
            .inner
            .writer
            .call(move |cx| ops::limits_clear(cx, &queue))
            .await?;
        self.inner.wake.notify();
        Ok(had)
    }

    pub(super) async fn limits_list_impl(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        self.inner.writer.call(ops::limits_list).await
    }

    pub(super) async fn limits_defer_impl(&self, params: DeferParams) -> Result<()> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::limits_defer(cx, &params))
            .await
    }
}
