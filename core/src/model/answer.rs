//! What the operations answer: a lease, the per-item and per-token outcomes, the passes
//! of maintenance, instances and leaders, and a queue's counts.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::OwnerId;
use crate::time::Timestamp;

use super::{Item, ItemId, ItemState, LeaseToken};

/// What a claim returns: the item, its token, owner and expiry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The item as it is after the claim (state running, attempt raised).
    pub item: Item,
    /// The fencing token for this attempt.
    pub token: LeaseToken,
    /// The lease holder.
    pub owner: OwnerId,
    /// When the lease ends unless renewed.
    pub expires_at: Timestamp,
}

impl Lease {
    /// Builds a lease from a claimed item (state running, owner and expiry set).
    pub fn from_item(item: Item) -> Result<Self> {
        match (&item.owner, item.lease_expires_at, item.state) {
            (Some(owner), Some(expires_at), ItemState::Running) => Ok(Lease {
                token: item.token(),
                owner: owner.clone(),
                expires_at,
                item,
            }),
            _ => Err(Error::internal(
                "core",
                format!("item {} is not running with an owner and expiry", item.id),
            )),
        }
    }
}

/// The answer to one enqueued item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enqueued {
    /// The new item's id, or the existing item's id for a duplicate.
    pub id: ItemId,
    /// True when the dedup key was seen within its window and nothing was inserted (G11).
    pub duplicate: bool,
}

/// The per-token answer of `complete` and `release`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenOutcome {
    /// The write was applied.
    Accepted,
    /// The token is not the current running attempt; nothing changed (G3).
    LeaseLost,
    /// Only from `complete`: the item is behind an unfinished item of its stream (the
    /// rest of a stream run, completed before an earlier item of the run). Nothing
    /// changed and the lease is still the current one: complete it again once the
    /// items ahead of it are complete (G9). If one of those fails or is released
    /// instead, the put-back rule ends this lease and the next complete answers
    /// [`TokenOutcome::LeaseLost`].
    OutOfOrder,
}

/// The per-token answer of `renew`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RenewOutcome {
    /// The lease now ends at `expires_at`; `renewals` have been used in this attempt.
    Renewed {
        /// The new expiry.
        expires_at: Timestamp,
        /// Renewals used in this attempt, this one included.
        renewals: u32,
    },
    /// The attempt used all its renewals; the lease keeps its expiry (G4).
    LimitReached {
        /// The item's cap.
        limit: u32,
    },
    /// The token is not the current running attempt; nothing changed (G3).
    LeaseLost,
}

/// The per-token answer of `fail`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailOutcome {
    /// Back to ready, claimable from `run_at` (G5).
    Retrying {
        /// When it becomes claimable again.
        run_at: Timestamp,
    },
    /// Dead: attempts exhausted or a permanent failure (G5).
    Dead,
    /// The token is not the current running attempt; nothing changed (G3).
    LeaseLost,
}

/// What one recovery pass did (G2, G6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Recovered {
    /// Expired items put back to ready.
    pub requeued: u64,
    /// Expired items that reached `max_stalls` and went dead.
    pub dead: u64,
}

/// What one purge pass deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Purged {
    /// Finished items deleted.
    pub items: u64,
    /// Expired dedup keys deleted.
    pub dedup_keys: u64,
}

/// What one eviction pass did (G12).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Evicted {
    /// The instances evicted.
    pub instances: Vec<OwnerId>,
    /// Their leases released (items put back to ready, or dead when out of stalls).
    pub released: u64,
}

/// A registered worker instance (G12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// Its id, which is also the owner of its leases.
    pub id: OwnerId,
    /// When it registered.
    pub started_at: Timestamp,
    /// Its last heartbeat.
    pub last_seen: Timestamp,
}

/// The answer to a leader-lease acquisition (G13). An unreachable store is an
/// `Err(Error::Unavailable)` (Faulted), never `Follower`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderStatus {
    /// The caller holds the lease.
    Leader {
        /// Its fencing term: strictly greater than every earlier holder's.
        term: u64,
        /// When the lease ends unless acquired again.
        expires_at: Timestamp,
    },
    /// Someone else holds it.
    Follower {
        /// The current holder.
        holder: OwnerId,
        /// The holder's term.
        term: u64,
        /// When the holder's lease ends unless renewed.
        expires_at: Timestamp,
    },
}

impl LeaderStatus {
    /// True when the caller holds the lease.
    pub fn is_leader(&self) -> bool {
        matches!(self, LeaderStatus::Leader { .. })
    }
}

/// Who holds a leader lease now, as [`Store::leader_get`](crate::Store::leader_get)
/// reads it (G13): only a live holder (`expires_at` after the store's `now`) is shown.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderInfo {
    /// The current holder.
    pub holder: OwnerId,
    /// The holder's fencing term.
    pub term: u64,
    /// When the holder's lease ends unless acquired again; after the store's `now`.
    pub expires_at: Timestamp,
}

impl LeaderInfo {
    /// A live holder as a store read it.
    pub fn new(holder: OwnerId, term: u64, expires_at: Timestamp) -> Self {
        LeaderInfo {
            holder,
            term,
            expires_at,
        }
    }
}

/// Counts of a queue's items by state, with its pause flag and the wait of its oldest
/// due item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct QueueCounts {
    /// Ready and due now.
    pub ready: u64,
    /// Ready but not due yet.
    pub scheduled: u64,
    /// Running.
    pub running: u64,
    /// Dead.
    pub dead: u64,
    /// Finished and still kept (stores that delete finished items report 0).
    pub done: u64,
    /// True while the queue is paused ([`Store::queue_pause`](crate::Store::queue_pause)):
    /// its items are not claimed.
    pub paused: bool,
    /// How long the longest-waiting due item has been claimable: `now - run_at` of the
    /// ready, due item with the smallest `run_at`; `None` when no item is ready and due.
    pub oldest_ready_age: Option<Duration>,
}

impl QueueCounts {
    /// Items not yet finished or dead: ready, scheduled and running.
    pub fn pending(&self) -> u64 {
        self.ready + self.scheduled + self.running
    }

    /// Counts with these five numbers, not paused, and no oldest age.
    pub fn new(ready: u64, scheduled: u64, running: u64, dead: u64, done: u64) -> Self {
        QueueCounts {
            ready,
            scheduled,
            running,
            dead,
            done,
            paused: false,
            oldest_ready_age: None,
        }
    }

    /// Sets the pause flag.
    pub fn with_paused(mut self, paused: bool) -> Self {
        self.paused = paused;
        self
    }

    /// Sets the wait of the oldest due item.
    pub fn with_oldest_ready_age(mut self, age: Option<Duration>) -> Self {
        self.oldest_ready_age = age;
        self
    }
}
