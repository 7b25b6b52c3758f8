//! Time and recovery (the contract's third group): `Store::recover_expired` and
//! `Store::purge`, and the recovery a claim runs first.

use sqlx::Row;
use tenure_core::async_trait;
use tenure_core::contract::{Recovery, Valid};
use tenure_core::{ItemState, PurgeParams, Purged, RecoverParams, Recovered, Result, Timestamp};
use uuid::Uuid;

use crate::error::map;

use super::{count, PgStore};

#[async_trait]
impl Recovery for PgStore {
    /// `Store::recover_expired`.
    async fn recover_expired(&self, params: Valid<RecoverParams>) -> Result<Recovered> {
        let now = self.inner.clock.now();
        Ok(self.recover(now, i64::from(params.limit), None).await?.0)
    }

    /// `Store::purge`.
    async fn purge(&self, params: Valid<PurgeParams>) -> Result<Purged> {
        let now = self.inner.clock.now();
        let cutoff = now - params.keep_done_for;
        let limit = i64::from(params.limit);
        let items = count(
            &self
                .fetch_one(
                    self.query(&self.inner.sql.purge_done)
                        .bind(cutoff.as_micros())
                        .bind(limit),
                )
                .await?,
            0,
        )?;
        let keys = count(
            &self
                .fetch_one(
                    self.query(&self.inner.sql.purge_dedup)
                        .bind(now.as_micros())
                        .bind(limit),
                )
                .await?,
            0,
        )?;
        self.execute(self.query(&self.inner.sql.purge_streams))
            .await?;
        Ok(Purged {
            items,
            dedup_keys: keys,
        })
    }
}

impl PgStore {
    /// machine::recover over up to `limit` expired leases of `queues` (all when None);
    /// answers the counts and the ids put back to ready. The items of stream runs
    /// behind an expired item are put back first, so they count no stall (G9).
    pub(super) async fn recover(
        &self,
        now: Timestamp,
        limit: i64,
        queues: Option<&[String]>,
    ) -> Result<(Recovered, Vec<Uuid>)> {
        self.execute(
            self.query(&self.inner.sql.put_back_expired)
                .bind(now.as_micros())
                .bind(queues),
        )
        .await?;
        let rows = self
            .fetch_all(
                self.query(&self.inner.sql.recover)
                    .bind(now.as_micros())
                    .bind(limit)
                    .bind(queues),
            )
            .await?;
        let mut out = Recovered::default();
        let mut ready = Vec::new();
        for r in rows {
            let id: Uuid = r.try_get(0).map_err(map)?;
            let state: String = r.try_get(1).map_err(map)?;
            if state == ItemState::Ready.as_str() {
                out.requeued += 1;
                ready.push(id);
            } else {
                out.dead += 1;
            }
        }
        Ok((out, ready))
    }
}
