//! Time and recovery (the contract's third group): the bodies of recover_expired and
//! purge. Each runs its SQL (`ops/recovery.rs`) on the
//! writer thread.

use tenure_core::async_trait;
use tenure_core::contract::{Recovery, Valid};
use tenure_core::{PurgeParams, Purged, RecoverParams, Recovered, Result};

use crate::{ops, SqliteStore};

#[async_trait]
impl Recovery for SqliteStore {
    async fn recover_expired(&self, params: Valid<RecoverParams>) -> Result<Recovered> {
        self.inner
            .writer
            .call(move |cx| ops::recover_expired(cx, &params))
            .await
    }

    async fn purge(&self, params: Valid<PurgeParams>) -> Result<Purged> {
        self.inner
            .writer
            .call(move |cx| ops::purge(cx, &params))
            .await
    }
}
