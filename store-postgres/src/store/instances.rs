//! Instances and leader (the contract's fourth group): heartbeats, eviction,
//! deregistration, and the leader lease.

use sqlx::Row;
use tenure_core::{
    DeregisterParams, Error, EvictParams, Evicted, HeartbeatParams, Instance, LeaderInfo,
    LeaderName, LeaderParams, LeaderStatus, OwnerId, Result, Timestamp,
};

use crate::error::map;
use crate::STORE;

use super::{count, PgStore};

impl PgStore {
    /// `Store::instance_heartbeat`.
    pub(super) async fn instance_heartbeat_impl(&self, params: HeartbeatParams) -> Result<()> {
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
    pub(super) async fn instance_list_impl(&self) -> Result<Vec<Instance>> {
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
    pub(super) async fn instance_evict_stale_impl(&self, params: EvictParams) -> Result<Evicted> {
        params.validate(&self.inner.limits)?;
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
    pub(super) async fn instance_deregister_impl(
        &self,
        params: DeregisterParams,
    ) -> Result<Evicted> {
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
    pub(super) async fn leader_acquire_impl(&self, params: LeaderParams) -> Result<LeaderStatus> {
        params.validate(&self.inner.limits)?;
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
    pub(super) async fn leader_resign_impl(&self, params: LeaderParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
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
    pub(super) async fn leader_get_impl(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
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
