//! Instances and leader (the contract's fourth group): heartbeats, eviction,
//! deregistration, and the leader lease.

use redis::Value;
use tenure_core::async_trait;
use tenure_core::contract::{Instances, Valid};
use tenure_core::{
    duration_micros, DeregisterParams, EvictParams, Evicted, HeartbeatParams, Instance, LeaderInfo,
    LeaderName, LeaderParams, LeaderStatus, OwnerId, Result, Timestamp,
};

use crate::error::bad_reply;
use crate::scripts::SCRIPTS;

use super::{int_of, string_of, u64_of, RedisStore};

#[async_trait]
impl Instances for RedisStore {
    /// `Store::instance_heartbeat`.
    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        let mut inv = self.call(&SCRIPTS.heartbeat);
        inv.arg(self.now()).arg(params.instance.as_str());
        let _: i64 = self.write(&inv).await?;
        Ok(())
    }

    /// `Store::instance_list`.
    async fn instance_list(&self) -> Result<Vec<Instance>> {
        let inv = self.call(&SCRIPTS.instance_list);
        let rows: Vec<(String, i64, i64)> = self.read(&inv).await?;
        rows.into_iter()
            .map(|(id, started, seen)| {
                Ok(Instance {
                    id: OwnerId::new(id)?,
                    started_at: Timestamp::from_micros(started),
                    last_seen: Timestamp::from_micros(seen),
                })
            })
            .collect()
    }

    /// `Store::instance_evict_stale`.
    async fn instance_evict_stale(&self, params: Valid<EvictParams>) -> Result<Evicted> {
        let mut inv = self.call(&SCRIPTS.evict);
        inv.arg(self.now()).arg(duration_micros(params.stale_after));
        let answer: Vec<Value> = self.write(&inv).await?;
        let Some((released, ids)) = answer.split_first() else {
            return Err(bad_reply("instance_evict_stale answered nothing"));
        };
        let instances = ids
            .iter()
            .map(|id| OwnerId::new(string_of(id)?))
            .collect::<Result<Vec<_>>>()?;
        Ok(Evicted {
            instances,
            released: u64_of(int_of(released)?),
        })
    }

    /// `Store::instance_deregister`.
    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        let mut inv = self.call(&SCRIPTS.deregister);
        inv.arg(self.now()).arg(params.instance.as_str());
        let (released, registered): (i64, i64) = self.write(&inv).await?;
        Ok(Evicted {
            instances: if registered == 1 {
                vec![params.instance]
            } else {
                Vec::new()
            },
            released: u64_of(released),
        })
    }

    /// `Store::leader_acquire`.
    async fn leader_acquire(&self, params: Valid<LeaderParams>) -> Result<LeaderStatus> {
        let mut inv = self.call(&SCRIPTS.leader_acquire);
        inv.arg(self.now())
            .arg(params.name.as_str())
            .arg(params.holder.as_str())
            .arg(duration_micros(params.lease_for));
        let answer: Vec<Value> = self.write(&inv).await?;
        match answer.as_slice() {
            [lead, term, expires] if int_of(lead)? == 1 => Ok(LeaderStatus::Leader {
                term: u64_of(int_of(term)?),
                expires_at: Timestamp::from_micros(int_of(expires)?),
            }),
            [_, holder, term, expires] => Ok(LeaderStatus::Follower {
                holder: OwnerId::new(string_of(holder)?)?,
                term: u64_of(int_of(term)?),
                expires_at: Timestamp::from_micros(int_of(expires)?),
            }),
            other => Err(bad_reply(format!("leader_acquire answered {other:?}"))),
        }
    }

    /// `Store::leader_resign`.
    async fn leader_resign(&self, params: Valid<LeaderParams>) -> Result<bool> {
        let mut inv = self.call(&SCRIPTS.leader_resign);
        inv.arg(self.now())
            .arg(params.name.as_str())
            .arg(params.holder.as_str());
        let n: i64 = self.write(&inv).await?;
        Ok(n == 1)
    }

    /// `Store::leader_get`.
    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        let mut inv = self.call(&SCRIPTS.leader_get);
        inv.arg(self.now()).arg(name.as_str());
        let answer: Vec<Value> = self.read(&inv).await?;
        match answer.as_slice() {
            [] => Ok(None),
            [holder, term, expires] => Ok(Some(LeaderInfo::new(
                OwnerId::new(string_of(holder)?)?,
                u64_of(int_of(term)?),
                Timestamp::from_micros(int_of(expires)?),
            ))),
            other => Err(bad_reply(format!("leader_get answered {other:?}"))),
        }
    }
}
