//! Instances and leader (the contract's fourth group): the bodies of the heartbeat,
//! the instance list, eviction, deregistration and the leader leases, each run
//! (`ops/instances.rs`) on the writer thread.

use tenure_core::async_trait;
use tenure_core::contract::{Instances, Valid};
use tenure_core::{
    DeregisterParams, EvictParams, Evicted, HeartbeatParams, Instance, LeaderInfo, LeaderName,
    LeaderParams, LeaderStatus, Result,
};

use crate::{ops, SqliteStore};

#[async_trait]
impl Instances for SqliteStore {
    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        self.inner
            .writer
            .call(move |cx| ops::instance_heartbeat(cx, &params))
            .await
    }

    async fn instance_list(&self) -> Result<Vec<Instance>> {
        self.inner.writer.call(ops::instance_list).await
    }

    async fn instance_evict_stale(&self, params: Valid<EvictParams>) -> Result<Evicted> {
        self.inner
            .writer
            .call(move |cx| ops::instance_evict_stale(cx, &params))
            .await
    }

    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        self.inner
            .writer
            .call(move |cx| ops::instance_deregister(cx, &params))
            .await
    }

    async fn leader_acquire(&self, params: Valid<LeaderParams>) -> Result<LeaderStatus> {
        self.inner
            .writer
            .call(move |cx| ops::leader_acquire(cx, &params))
            .await
    }

    async fn leader_resign(&self, params: Valid<LeaderParams>) -> Result<bool> {
        self.inner
            .writer
            .call(move |cx| ops::leader_resign(cx, &params))
            .await
    }

    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        let name = name.clone();
        self.inner
            .writer
            .call(move |cx| ops::leader_get(cx, &name))
            .await
    }
}
