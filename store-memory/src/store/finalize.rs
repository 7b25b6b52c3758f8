//! Finalize (the contract's second group): the bodies of renew, complete, fail and
//! release, each one call into
//! [`State`](crate::state::State) under the lock.

use tenure_core::async_trait;
use tenure_core::contract::{Finalize, Valid};
use tenure_core::{
    CompleteParams, FailOutcome, FailParams, ReleaseParams, RenewOutcome, RenewParams, Result,
    TokenOutcome,
};

use crate::MemoryStore;

#[async_trait]
impl Finalize for MemoryStore {
    async fn renew(&self, params: Valid<RenewParams>) -> Result<Vec<RenewOutcome>> {
        self.with_state(|s, now| s.renew(&params.tokens, &params.progress, params.lease_for, now))
    }

    async fn complete(&self, params: Valid<CompleteParams>) -> Result<Vec<TokenOutcome>> {
        let out = Vec::with_capacity(params.tokens.len());
        self.with_state(|s, now| s.complete(&params.tokens, now, out))
    }

    async fn fail(&self, params: Valid<FailParams>) -> Result<Vec<FailOutcome>> {
        self.with_state(|s, now| s.fail(&params.failures, now))
    }

    async fn release(&self, params: Valid<ReleaseParams>) -> Result<Vec<TokenOutcome>> {
        self.with_state(|s, now| s.release(&params.tokens, now))
    }
}
