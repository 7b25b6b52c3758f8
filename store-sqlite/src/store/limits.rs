//! Queue limits (G16, G17): the bodies of the `limits_*` operations of
//! [`Store`](tenure_core::Store), each running its SQL
//! (`ops/limits.rs`) on the writer thread.

use tenure_core::async_trait;
use tenure_core::contract::{Limiting, Valid};
use tenure_core::{DeferParams, LimitsParams, QueueLimits, QueueName, Result};

use crate::{ops, SqliteStore};

#[async_trait]
impl Limiting for SqliteStore {
    async fn limits_set(&self, params: Valid<LimitsParams>) -> Result<Option<QueueLimits>> {
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

    async fn limits_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
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

    async fn limits_wait(&self, queues: &[QueueName]) -> Result<Option<std::time::Duration>> {
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

    async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
        let queue = queue.clone();
        let had = self
            .inner
            .writer
            .call(move |cx| ops::limits_clear(cx, &queue))
            .await?;
        self.inner.wake.notify();
        Ok(had)
    }

    async fn limits_list(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        self.inner.writer.call(ops::limits_list).await
    }

    async fn limits_defer(&self, params: Valid<DeferParams>) -> Result<()> {
        self.inner
            .writer
            .call(move |cx| ops::limits_defer(cx, &params))
            .await
    }
}

impl SqliteStore {
    fn mark_limited(&self) {
        self.inner
            .limited
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
