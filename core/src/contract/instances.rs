//! The [`Instances`] group of the contract.

use async_trait::async_trait;

use super::{Base, Valid};
use crate::error::Result;
use crate::keys::LeaderName;
use crate::model::{Evicted, Instance, LeaderInfo, LeaderStatus};
use crate::store::{DeregisterParams, EvictParams, HeartbeatParams, LeaderParams};

// The docs name it.
#[cfg(doc)]
use crate::Store;

/// Workers and their leader: registration, heartbeats, eviction and the leader lease
/// (G12, G13, G14).
///
/// Part of the contract a store implements; callers reach these methods through
/// [`Store`], which validates their params first (see [`Valid`]).
#[async_trait]
pub trait Instances: Base {
    /// Registers `instance` on its first call and records a heartbeat at `now` on every
    /// call (G12; `g12_instances`).
    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()>;

    /// The registered instances, oldest registration first.
    async fn instance_list(&self) -> Result<Vec<Instance>>;

    /// Evicts instances whose last heartbeat is at least `stale_after` old.
    ///
    /// # Contract
    /// - Every running item owned by an evicted instance is released at once, counting
    ///   a stall as recovery does (dead at `max_stalls`), so peers can claim it and the
    ///   evicted owner's late finalizes answer lease lost (G12, G3; `g12_instances`).
    /// - Streams pinned to an evicted instance are unpinned (G14, on stores that
    ///   declare it; `g14_partitioned_claiming`).
    async fn instance_evict_stale(&self, params: Valid<EvictParams>) -> Result<Evicted>;

    /// Removes `instance` from the registry at once, as a worker does when it shuts down,
    /// instead of leaving it to be evicted as stale.
    ///
    /// # Contract
    /// - The instance no longer appears in [`Store::instance_list`] (G12; `g12_instances`).
    /// - Every running item it still owns is released exactly as
    ///   [`Store::instance_evict_stale`] releases an evicted instance's items (a stall
    ///   each), so nothing it held waits for its lease to expire, and its streams are
    ///   unpinned (G14).
    /// - An instance that is not registered is not an error: the answer lists no
    ///   instance, and any running item with that owner is still released
    ///   (`g12_instances`,
    ///   `deregistering_an_owner_that_never_registered_still_releases_its_leases`).
    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted>;

    /// Tries to hold the leader lease `name` (G13; `g13_leader`).
    ///
    /// # Contract
    /// - Free or expired (`expires_at <= now`): the caller becomes leader with a term
    ///   strictly greater than every earlier term of that name.
    /// - Held by the caller and not expired: extended to `now + lease_for`, same term.
    /// - Held by another and not expired: [`LeaderStatus::Follower`].
    /// - An unreachable backend is `Err` ([`Error::Unavailable`](crate::Error)), never
    ///   `Follower`.
    async fn leader_acquire(&self, params: Valid<LeaderParams>) -> Result<LeaderStatus>;

    /// Gives the lease up if the caller holds it; true when it did. The term is kept, so
    /// the next holder still gets a greater one (G13; `g13_leader`).
    async fn leader_resign(&self, params: Valid<LeaderParams>) -> Result<bool>;

    /// Reads who holds the leader lease `name`, writing nothing (G13; `g13_leader`).
    ///
    /// # Contract
    /// - Answers the holder, term and expiry of a live lease (`expires_at > now`,
    ///   exactly the lease [`Store::leader_acquire`] would answer `Follower` for to
    ///   anyone else), and `None` when nobody holds it live: never acquired, resigned,
    ///   or expired (`expires_at <= now`). An expired holder is never reported as the
    ///   leader.
    /// - MUST NOT change the lease: not its holder, term or expiry. Reading it any
    ///   number of times leaves the next holder's term exactly as it would have been.
    /// - An unreachable backend is `Err` ([`Error::Unavailable`](crate::Error)), never
    ///   `None`.
    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>>;
}
