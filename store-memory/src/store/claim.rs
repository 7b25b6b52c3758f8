//! Enqueue and claim (the contract's first group): the bodies of
//! [`Store::enqueue`](tenure_core::Store::enqueue) and
//! [`Store::claim`](tenure_core::Store::claim), each one call into
//! [`State`](crate::state::State) under the lock.

use tenure_core::async_trait;
use tenure_core::contract::{Claims, Valid};
use tenure_core::{ClaimParams, EnqueueParams, Enqueued, Error, Lease, Result};

use crate::MemoryStore;

#[async_trait]
impl Claims for MemoryStore {
    async fn enqueue(&self, params: Valid<EnqueueParams>) -> Result<Vec<Enqueued>> {
        let limits = &self.inner.limits;
        let pin_to = params.pin_to.as_ref();
        let out = self.with_state(|s, now| {
            params.validate_schedule(limits, now)?;
            s.enqueue(&params.items, pin_to, now)
        })??;
        self.inner.wake.notify();
        Ok(out)
    }

    async fn claim(&self, params: Valid<ClaimParams>) -> Result<Vec<Lease>> {
        let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
        let run = usize::try_from(params.stream_run).unwrap_or(1);
        let Some(partitioning) = params.partitioning else {
            // Allocated before the lock is taken, so the lock is held for the claim
            // alone.
            let leases = Vec::with_capacity(limit.min(128));
            return self.with_state(|s, now| {
                s.claim(
                    &params.queues,
                    &params.owner,
                    (limit, run),
                    params.lease_for,
                    now,
                    leases,
                )
            });
        };
        let (queues, owner, lease_for) = (&params.queues, &params.owner, params.lease_for);
        self.with_state(|s, now| {
            s.claim_partitioned(queues, owner, (limit, run), lease_for, partitioning, now)
        })?
        .ok_or_else(|| Error::not_found("instance", owner.to_string()))
    }
}
