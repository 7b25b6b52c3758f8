//! Enqueue and claim (the contract's first group): the bodies of
//! [`Store::enqueue`] and [`Store::claim`]. Each runs its
//! SQL (`ops/claim.rs`) on the writer's connection; a claim takes the inline path.

use tenure_core::async_trait;
use tenure_core::contract::{Claims, Valid};
use tenure_core::{ClaimParams, EnqueueParams, Enqueued, Error, Lease, Result, Store};

use crate::error::STORE;
use crate::{ops, SqliteStore};

#[async_trait]
impl Claims for SqliteStore {
    async fn enqueue(&self, params: Valid<EnqueueParams>) -> Result<Vec<Enqueued>> {
        let limits = *self.limits_ref();
        let out = self
            .inner
            .writer
            .call(move |cx| {
                params.validate_schedule(&limits, cx.now)?;
                ops::enqueue(cx, &params)
            })
            .await?;
        self.inner.wake.notify();
        Ok(out)
    }

    async fn claim(&self, params: Valid<ClaimParams>) -> Result<Vec<Lease>> {
        if params.partitioning.is_some() && !self.capabilities().partitioned_claiming {
            return Err(Error::Unsupported {
                operation: "partitioned claim",
                store: STORE,
            });
        }
        self.inner
            .writer
            .call_inline(move |cx| ops::claim(cx, &params))
            .await
    }
}
