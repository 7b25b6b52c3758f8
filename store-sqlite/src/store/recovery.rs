//! Time and recovery (the contract's third group): the bodies of recover_expired and
//! purge. Each validates its params, then runs its SQL (`ops/recovery.rs`) on the
//! writer thread.

use tenure_core::{PurgeParams, Purged, RecoverParams, Recovered, Result};

use crate::{ops, SqliteStore};

impl SqliteStore {
    pub(super) async fn recover_expired_impl(&self, params: RecoverParams) -> Result<Recovered> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::recover_expired(cx, &params))
            .await
    }

    pub(super) async fn purge_impl(&self, params: PurgeParams) -> Result<Purged> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::purge(cx, &params))
            .await
    }
}
