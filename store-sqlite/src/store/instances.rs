//! Instances and leader (the contract's fourth group): the bodies of the heartbeat,
//! the instance list, eviction, deregistration and the leader leases, each run
//! (`ops/instances.rs`) on the writer thread.

use tenure_core::{
    DeregisterParams, EvictParams, Evicted, HeartbeatParams, Instance, LeaderInfo, LeaderName,
    LeaderParams, LeaderStatus, Result,
};

use crate::{ops, SqliteStore};

impl SqliteStore {
    pub(super) async fn instance_heartbeat_impl(&self, params: HeartbeatParams) -> Result<()> {
        self.inner
            .writer
            .call(move |cx| ops::instance_heartbeat(cx, &params))
            .await
    }

    pub(super) async fn instance_list_impl(&self) -> Result<Vec<Instance>> {
        self.inner.writer.call(ops::instance_list).await
    }

    pub(super) async fn instance_evict_stale_impl(&self, params: EvictParams) -> Result<Evicted> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::instance_evict_stale(cx, &params))
            .await
    }

    pub(super) async fn instance_deregister_impl(
        &self,
        params: DeregisterParams,
    ) -> Result<Evicted> {
        self.inner
            .writer
            .call(move |cx| ops::instance_deregister(cx, &params))
            .await
    }

    pub(super) async fn leader_acquire_impl(&self, params: LeaderParams) -> Result<LeaderStatus> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::leader_acquire(cx, &params))
            .await
    }

    pub(super) async fn leader_resign_impl(&self, params: LeaderParams) -> Result<bool> {
        params.validate(self.limits_ref())?;
        self.inner
            .writer
            .call(move |cx| ops::leader_resign(cx, &params))
            .await
    }

    pub(super) async fn leader_get_impl(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        let name = name.clone();
        self.inner
            .writer
            .call(move |cx| ops::leader_get(cx, &name))
            .await
    }
}
