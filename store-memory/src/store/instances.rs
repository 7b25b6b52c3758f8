//! Instances and leader (the contract's fourth group): the bodies of the heartbeat,
//! the instance listing, eviction and deregistration, and the leader leases, each one
//! call into [`State`](crate::state::State) under the lock.

use tenure_core::{
    DeregisterParams, EvictParams, Evicted, HeartbeatParams, Instance, LeaderInfo, LeaderName,
    LeaderParams, LeaderStatus, Result,
};

use crate::MemoryStore;

impl MemoryStore {
    pub(super) fn instance_heartbeat_impl(&self, params: &HeartbeatParams) -> Result<()> {
        self.with_state(|s, now| s.heartbeat(&params.instance, now))
    }

    pub(super) fn instance_list_impl(&self) -> Result<Vec<Instance>> {
        self.with_state(|s, _| s.instance_list())
    }

    pub(super) fn instance_evict_stale_impl(&self, params: &EvictParams) -> Result<Evicted> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.evict_stale(params.stale_after, now))
    }

    pub(super) fn instance_deregister_impl(&self, params: &DeregisterParams) -> Result<Evicted> {
        self.with_state(|s, now| s.deregister(&params.instance, now))
    }

    pub(super) fn leader_acquire_impl(&self, params: &LeaderParams) -> Result<LeaderStatus> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| {
            s.leader_acquire(&params.name, &params.holder, params.lease_for, now)
        })
    }

    pub(super) fn leader_resign_impl(&self, params: &LeaderParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        self.with_state(|s, now| s.leader_resign(&params.name, &params.holder, now))
    }

    pub(super) fn leader_get_impl(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        self.with_state(|s, now| s.leader_get(name, now))
    }
}
