//! Enqueue and claim (the contract's first group): the bodies of
//! [`Store::enqueue`] and [`Store::claim`]. Each validates its params, then runs its
//! SQL (`ops/claim.rs`) on the writer's connection; a claim takes the inline path.

use tenure_core::{ClaimParams, EnqueueParams, Enqueued, Error, Lease, Result, Store};

use crate::error::STORE;
use crate::{ops, SqliteStore};

impl SqliteStore {
    pub(super) async fn enqueue_impl(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
        params.validate(self.limits_ref())?;
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

    pub(super) async fn claim_impl(&self, params: ClaimParams) -> Result<Vec<Lease>> {
        params.validate(self.limits_ref())?;
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
