//! Finalize (the contract's second group): the bodies of renew, complete, fail and
//! release, each validating its params and then one call into
//! [`State`](crate::state::State) under the lock.

use tenure_core::{
    CompleteParams, FailOutcome, FailParams, ReleaseParams, RenewOutcome, RenewParams, Result,
    TokenOutcome,
};

use crate::MemoryStore;

impl MemoryStore {
    pub(super) fn renew_impl(&self, params: &RenewParams) -> Result<Vec<RenewOutcome>> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.renew(&params.tokens, params.lease_for, now))
    }

    pub(super) fn complete_impl(&self, params: &CompleteParams) -> Result<Vec<TokenOutcome>> {
        params.validate(&self.inner.limits)?;
        let out = Vec::with_capacity(params.tokens.len());
        self.with_state(|s, now| s.complete(&params.tokens, now, out))
    }

    pub(super) fn fail_impl(&self, params: &FailParams) -> Result<Vec<FailOutcome>> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.fail(&params.failures, now))
    }

    pub(super) fn release_impl(&self, params: &ReleaseParams) -> Result<Vec<TokenOutcome>> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.release(&params.tokens, now))
    }
}
