//! Time and recovery (the contract's third group): the bodies of recover_expired and
//! purge, each one call into
//! [`State`](crate::state::State) under the lock.

use tenure_core::async_trait;
use tenure_core::contract::{Recovery, Valid};
use tenure_core::{PurgeParams, Purged, RecoverParams, Recovered, Result};

use crate::MemoryStore;

fn limit_u64(limit: u32) -> u64 {
    u64::from(limit)
}

#[async_trait]
impl Recovery for MemoryStore {
    async fn recover_expired(&self, params: Valid<RecoverParams>) -> Result<Recovered> {
        self.with_state(|s, now| s.recover_expired(limit_u64(params.limit), now))
    }

    async fn purge(&self, params: Valid<PurgeParams>) -> Result<Purged> {
        self.with_state(|s, now| s.purge(params.keep_done_for, limit_u64(params.limit), now))
    }
}
