//! Instances and leader (the contract's fourth group): the bodies of the heartbeat,
//! the instance listing, eviction and deregistration, and the leader leases, each one
//! call into [`State`](crate::state::State) under the lock.

use tenure_core::async_trait;
use tenure_core::contract::{Instances, Valid};
use tenure_core::{
    DeregisterParams, EvictParams, Evicted, HeartbeatParams, Instance, LeaderInfo, LeaderName,
    LeaderParams, LeaderStatus, Result,
};

use crate::MemoryStore;

#[async_trait]
impl Instances for MemoryStore {
    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        self.with_state(|s, now| s.heartbeat(&params.instance, now))
    }

    async fn instance_list(&self) -> Result<Vec<Instance>> {
        self.with_state(|s, _| s.instance_list())
    }

    async fn instance_evict_stale(&self, params: Valid<EvictParams>) -> Result<Evicted> {
        self.with_state(|s, now| s.evict_stale(params.stale_after, now))
    }

    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        self.with_state(|s, now| s.deregister(&params.instance, now))
    }

    async fn leader_acquire(&self, params: Valid<LeaderParams>) -> Result<LeaderStatus> {
        self.with_state(|s, now| {
            s.leader_acquire(&params.name, &params.holder, params.lease_for, now)
        })
    }

    async fn leader_resign(&self, params: Valid<LeaderParams>) -> Result<bool> {
        self.with_state(|s, now| s.leader_resign(&params.name, &params.holder, now))
    }

    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        self.with_state(|s, now| s.leader_get(name, now))
    }
}
