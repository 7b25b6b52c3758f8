//! Time and recovery (the contract's third group): the bodies of recover_expired and
//! purge, each validating its params and then one call into
//! [`State`](crate::state::State) under the lock.

use tenure_core::{PurgeParams, Purged, RecoverParams, Recovered, Result};

use crate::MemoryStore;

fn limit_u64(limit: u32) -> u64 {
    u64::from(limit)
}

impl MemoryStore {
    pub(super) fn recover_expired_impl(&self, params: &RecoverParams) -> Result<Recovered> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.recover_expired(limit_u64(params.limit), now))
    }

    pub(super) fn purge_impl(&self, params: &PurgeParams) -> Result<Purged> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.purge(params.keep_done_for, limit_u64(params.limit), now))
    }
}
