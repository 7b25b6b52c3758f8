//! Queue limits (G16, G17): the bodies of the `limits_*` operations of
//! [`Store`](tenure_core::Store), each one call into
//! [`State`](crate::state::State) under the lock.

use tenure_core::async_trait;
use tenure_core::contract::{Limiting, Valid};
use tenure_core::{DeferParams, LimitsParams, QueueLimits, QueueName, Result};

use crate::MemoryStore;

#[async_trait]
impl Limiting for MemoryStore {
    async fn limits_set(&self, params: Valid<LimitsParams>) -> Result<Option<QueueLimits>> {
        let before = self.with_state(|s, _| s.limits_set(&params.queue, params.limits.clone()))?;
        // Raised limits may free slots: a waiting worker claims again.
        self.inner.wake.notify();
        Ok(before)
    }

    async fn limits_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        self.with_state(|s, _| s.limits_get(queue))
    }

    async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
        let had = self.with_state(|s, _| s.limits_clear(queue))?;
        self.inner.wake.notify();
        Ok(had)
    }

    async fn limits_list(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        self.with_state(|s, _| s.limits_list())
    }

    async fn limits_wait(&self, queues: &[QueueName]) -> Result<Option<std::time::Duration>> {
        self.with_state(|s, now| s.limits_wait(queues, now))
    }

    async fn limits_defer(&self, params: Valid<DeferParams>) -> Result<()> {
        self.with_state(|s, now| {
            s.limits_defer(&params.queue, params.key.as_ref(), now + params.delay)
        })
    }
}
