//! Finalize (the contract's second group): the bodies of renew, complete, fail and
//! release. Each runs its SQL (`ops/finalize.rs`) through
//! the writer's inline path.

use tenure_core::async_trait;
use tenure_core::contract::{Finalize, Valid};
use tenure_core::{
    CompleteParams, FailOutcome, FailParams, ReleaseParams, RenewOutcome, RenewParams, Result,
    TokenOutcome,
};

use crate::{ops, SqliteStore};

#[async_trait]
impl Finalize for SqliteStore {
    async fn renew(&self, params: Valid<RenewParams>) -> Result<Vec<RenewOutcome>> {
        self.inner
            .writer
            .call_inline(move |cx| ops::renew(cx, &params))
            .await
    }

    async fn complete(&self, params: Valid<CompleteParams>) -> Result<Vec<TokenOutcome>> {
        let out = self
            .inner
            .writer
            .call_inline(move |cx| ops::complete(cx, &params))
            .await;
        self.slot_freed();
        out
    }

    async fn fail(&self, params: Valid<FailParams>) -> Result<Vec<FailOutcome>> {
        let out = self
            .inner
            .writer
            .call_inline(move |cx| ops::fail(cx, &params))
            .await;
        self.slot_freed();
        out
    }

    async fn release(&self, params: Valid<ReleaseParams>) -> Result<Vec<TokenOutcome>> {
        let out = self
            .inner
            .writer
            .call_inline(move |cx| ops::release(cx, &params))
            .await;
        self.slot_freed();
        out
    }
}

impl SqliteStore {
    /// After a finish: with limits in use through this handle, fires the wake signal,
    /// so a worker waiting for the slot claims at once (G16).
    fn slot_freed(&self) {
        if self
            .inner
            .limited
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            self.inner.wake.notify();
        }
    }
}
