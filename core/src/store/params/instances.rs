//! Params of the [`Instances`](crate::contract::Instances) group: heartbeat,
//! deregistration, eviction and the leader lease.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::{LeaderName, OwnerId};

use super::Limits;

/// Parameters of [`Store::instance_heartbeat`](crate::Store::instance_heartbeat).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HeartbeatParams {
    /// The instance, registered on its first heartbeat.
    pub instance: OwnerId,
}

impl HeartbeatParams {
    /// A heartbeat from `instance`.
    pub fn new(instance: OwnerId) -> Self {
        HeartbeatParams { instance }
    }
}

/// Parameters of [`Store::instance_deregister`](crate::Store::instance_deregister).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DeregisterParams {
    /// The instance that is leaving.
    pub instance: OwnerId,
}

impl DeregisterParams {
    /// `instance` leaves the registry.
    pub fn new(instance: OwnerId) -> Self {
        DeregisterParams { instance }
    }
}

/// Default silence after which an instance is evicted (G12).
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(30);

/// Parameters of [`Store::instance_evict_stale`](crate::Store::instance_evict_stale).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EvictParams {
    /// Instances whose last heartbeat is at least this old are evicted.
    pub stale_after: Duration,
}

impl EvictParams {
    /// Evict instances silent for `stale_after` or longer.
    pub fn new(stale_after: Duration) -> Self {
        EvictParams { stale_after }
    }

    /// Checks that the silence bound is sane (1 s ..= 24 h).
    pub fn validate(&self, _limits: &Limits) -> Result<()> {
        let max = Duration::from_secs(24 * 60 * 60);
        if self.stale_after < Duration::from_secs(1) || self.stale_after > max {
            return Err(Error::invalid(
                "stale_after",
                format!("{:?} is outside 1s..={max:?}", self.stale_after),
            ));
        }
        Ok(())
    }
}

impl Default for EvictParams {
    fn default() -> Self {
        EvictParams::new(DEFAULT_STALE_AFTER)
    }
}

/// Parameters of [`Store::leader_acquire`](crate::Store::leader_acquire) and
/// [`Store::leader_resign`](crate::Store::leader_resign).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LeaderParams {
    /// The lease's name.
    pub name: LeaderName,
    /// Who asks.
    pub holder: OwnerId,
    /// How long the lease lasts unless acquired again.
    pub lease_for: Duration,
}

impl LeaderParams {
    /// `holder` asks for the lease `name` for `lease_for`.
    pub fn new(name: LeaderName, holder: OwnerId, lease_for: Duration) -> Self {
        LeaderParams {
            name,
            holder,
            lease_for,
        }
    }

    /// Checks the lease duration (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        limits.check_lease("lease_for", self.lease_for)
    }
}
