//! Instances and leader (the contract's fourth group): heartbeats, eviction,
//! deregistration, and the leader lease.

use sqlx::Row;
use tenure_core::async_trait;
use tenure_core::contract::{Instances, Valid};
use tenure_core::{
    DeregisterParams, Error, EvictParams, Evicted, HeartbeatParams, Instance, LeaderInfo,
    LeaderName, LeaderParams, LeaderStatus, OwnerId, Result, Timestamp,
};

use crate::error::map;
use crate::STORE;

use super::{count, PgStore};

#[async_trait]
impl Instances for PgStore {
    /// `Store::instance_heartbeat`.
    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        let now = self.inner.clock.now();
        self.execute(
            self.query(&self.inner.sql.heartbeat)
                .bind(params.instance.as_str())
                .bind(now.as_micros()),
        )
        .await?;
        Ok(())
    }

    /// `Store::instance_list`.
    async fn instance_list(&self) -> Result<Vec<Instance>> {
        let rows = self
            .fetch_all(self.query(&self.inner.sql.instance_list))
            .await?;
        rows.iter()
            .map(|r| {
                let id: String = r.try_get(0).map_err(map)?;
                Ok(Instance {
                    id: OwnerId::new(id)
                        .map_err(|e| Error::internal(STORE, format!("corrupt instance: {e}")))?,
                    started_at: Timestamp::from_micros(r.try_get(1).map_err(map)?),
                    last_seen: Timestamp::from_micros(r.try_get(2).map_err(map)?),
                })
            })
            .collect()
    }

    /// `Store::instance_evict_stale`.
    async fn instance_evict_stale(&self, params: Valid<EvictParams>) -> Result<Evicted> {
        let now = self.inner.clock.now();
        let cutoff = now - params.stale_after;
        let row = self
            .fetch_one(
                self.query(&self.inner.sql.evict)
                    .bind(now.as_micros())
                    .bind(cutoff.as_micros()),
            )
            .await?;
        let ids: Vec<String> = row.try_get(0).map_err(map)?;
        let instances = ids
            .into_iter()
            .map(|id| {
                OwnerId::new(id)
                    .map_err(|e| Error::internal(STORE, format!("corrupt instance: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Evicted {
            instances,
            released: count(&row, 1)?,
        })
    }

    /// `Store::instance_deregister`.
    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        let now = self.inner.clock.now();
        let row = self
            .fetch_one(
                self.query(&self.inner.sql.deregister)
                    .bind(now.as_micros())
                    .bind(params.instance.as_str()),
            )
            .await?;
        let ids: Vec<String> = row.try_get(0).map_err(map)?;
        Ok(Evicted {
            instances: if ids.is_empty() {
                Vec::new()
            } else {
                vec![params.instance]
            },
            released: count(&row, 1)?,
        })
    }

    /// `Store::leader_acquire`.
    async fn leader_acquire(&self, params: Valid<LeaderParams>) -> Result<LeaderStatus> {
        let now = self.inner.clock.now();
        let expires = now + params.lease_for;
        let won = self
            .fetch_optional(
                self.query(&self.inner.sql.leader_acquire)
                    .bind(params.name.as_str())
                    .bind(params.holder.as_str())
                    .bind(now.as_micros())
                    .bind(expires.as_micros()),
            )
            .await?;
        if let Some(r) = won {
            let term: i64 = r.try_get(0).map_err(map)?;
            let at: i64 = r.try_get(1).map_err(map)?;
            return Ok(LeaderStatus::Leader {
                term: u64::try_from(term).unwrap_or(0),
                expires_at: Timestamp::from_micros(at),
            });
        }
        let r = self
            .fetch_one(
                self.query(&self.inner.sql.leader_read)
                    .bind(params.name.as_str()),
            )
            .await?;
        let holder: String = r.try_get(0).map_err(map)?;
        let term: i64 = r.try_get(1).map_err(map)?;
        let at: i64 = r.try_get(2).map_err(map)?;
        Ok(LeaderStatus::Follower {
            holder: OwnerId::new(holder)
                .map_err(|e| Error::internal(STORE, format!("corrupt leader: {e}")))?,
            term: u64::try_from(term).unwrap_or(0),
            expires_at: Timestamp::from_micros(at),
        })
    }

    /// `Store::leader_resign`.
    async fn leader_resign(&self, params: Valid<LeaderParams>) -> Result<bool> {
        let now = self.inner.clock.now();
        let row = self
            .fetch_optional(
                self.query(&self.inner.sql.leader_resign)
                    .bind(params.name.as_str())
                    .bind(params.holder.as_str())
                    .bind(now.as_micros()),
            )
            .await?;
        Ok(row.is_some())
    }

    /// `Store::leader_get`.
    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        let now = self.inner.clock.now();
        let Some(r) = self
            .fetch_optional(
                self.query(&self.inner.sql.leader_live)
                    .bind(name.as_str())
                    .bind(now.as_micros()),
            )
            .await?
        else {
            return Ok(None);
        };
        let holder: String = r.try_get(0).map_err(map)?;
        let term: i64 = r.try_get(1).map_err(map)?;
        let at: i64 = r.try_get(2).map_err(map)?;
        Ok(Some(LeaderInfo::new(
            OwnerId::new(holder)
                .map_err(|e| Error::internal(STORE, format!("corrupt leader: {e}")))?,
            u64::try_from(term).unwrap_or(0),
            Timestamp::from_micros(at),
        )))
    }
}
