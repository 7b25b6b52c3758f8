//! Queue limits (G16, G17): the bodies of the `limits_*` operations of
//! [`Store`](tenure_core::Store), each validating its params and then one call into
//! [`State`](crate::state::State) under the lock.

use tenure_core::{DeferParams, LimitsParams, QueueLimits, QueueName, Result};

use crate::MemoryStore;

impl MemoryStore {
    pub(super) fn limits_set_impl(&self, params: &LimitsParams) -> Result<Option<QueueLimits>> {
        params.validate(&self.inner.limits)?;
        let before = self.with_state(|s, _| s.limits_set(&params.queue, params.limits.clone()))?;
        // Raised limits may free slots: a waiting worker claims again.
        self.inner.wake.notify();
        Ok(before)
    }

    pub(super) fn limits_get_impl(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        self.with_state(|s, _| s.limits_get(queue))
    }

    pub(super) fn limits_clear_impl(&self, queue: &QueueName) -> Result<bool> {
        let had = self.with_state(|s, _| s.limits_clear(queue))?;
        self.inner.wake.notify();
        Ok(had)
    }

    pub(super) fn limits_list_impl(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        self.with_state(|s, _| s.limits_list())
    }

    pub(super) fn limits_wait_impl(
        &self,
        queues: &[QueueName],
    ) -> Result<Option<std::time::Duration>> {
        self.with_state(|s, now| s.limits_wait(queues, now))
    }

    pub(super) fn limits_defer_impl(&self, params: &DeferParams) -> Result<()> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| {
            s.limits_defer(&params.queue, params.key.as_ref(), now + params.delay)
        })
    }
}
