//! Finalize (the contract's second group): the bodies of renew, complete, fail and
//! release. Each validates its params, then runs its SQL (`ops/finalize.rs`) through
//! the writer's inline path.

use tenure_core::{
    CompleteParams, FailOutcome, FailParams, ReleaseParams, RenewOutcome, RenewParams, Result,
    TokenOutcome,
};

use crate::{ops, SqliteStore};

impl SqliteStore {
    pub(super) async fn renew_impl(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call_inline(move |cx| ops::renew(cx, &params))
            .await
    }

    pub(super) async fn complete_impl(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
        params.validate(self.limits_ref())?;
        let out = self
            .inner
            .writer
            .call_inline(move |cx| ops::complete(cx, &params))
            .await;
        self.slot_freed();
        out
    }

    pub(super) async fn fail_impl(&self, params: FailParams) -> Result<Vec<FailOutcome>> {
        params.validate(self.limits_ref())?;
        let out = self
            .inner
            .writer
            .call_inline(move |cx| ops::fail(cx, &params))
            .await;
        self.slot_freed();
        out
    }

    pub(super) async fn release_impl(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        params.validate(self.limits_ref())?;
        let out = self
            .inner
            .writer
            .call_inline(move |cx| ops::release(cx, &params))
            .await;
        self.slot_freed();
        out
    }

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
