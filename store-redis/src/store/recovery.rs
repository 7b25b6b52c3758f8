//! Time and recovery (the contract's third group): `Store::recover_expired` and
//! `Store::purge`.

use tenure_core::async_trait;
use tenure_core::contract::{Recovery, Valid};
use tenure_core::{duration_micros, PurgeParams, Purged, RecoverParams, Recovered, Result};

use crate::scripts::SCRIPTS;

use super::{u64_of, RedisStore};

#[async_trait]
impl Recovery for RedisStore {
    /// `Store::recover_expired`.
    async fn recover_expired(&self, params: Valid<RecoverParams>) -> Result<Recovered> {
        let mut inv = self.call(&SCRIPTS.recover);
        inv.arg(self.now()).arg(params.limit);
        let (requeued, dead): (i64, i64) = self.write(&inv).await?;
        Ok(Recovered {
            requeued: u64_of(requeued),
            dead: u64_of(dead),
        })
    }

    /// `Store::purge`.
    async fn purge(&self, params: Valid<PurgeParams>) -> Result<Purged> {
        let mut inv = self.call(&SCRIPTS.purge);
        inv.arg(self.now())
            .arg(duration_micros(params.keep_done_for))
            .arg(params.limit);
        let (items, keys): (i64, i64) = self.write(&inv).await?;
        Ok(Purged {
            items: u64_of(items),
            dedup_keys: u64_of(keys),
        })
    }
}
