//! The data model: items, their states, leases and the answers stores give.
//!
//! This file holds the item (its states, its schedule, a new item to enqueue); `ids.rs`
//! the identifiers and the fencing token, `answer.rs` what a claim and the other
//! operations answer.

mod answer;
mod ids;
mod progress;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::{DedupKey, FairnessKey, LimitKey, OwnerId, QueueName, ScopeKey, StreamKey};
use crate::time::Timestamp;

pub use answer::{
    Enqueued, Evicted, FailOutcome, Instance, LeaderInfo, LeaderStatus, Lease, Purged, QueueCounts,
    Recovered, RenewOutcome, TokenOutcome,
};
pub use ids::{ItemId, LeaseId, LeaseToken};
pub use progress::{Progress, MAX_PROGRESS_MESSAGE_BYTES};

/// Default most attempts an item gets before a retryable failure makes it dead (G5).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 20;
/// Default most expired leases an item survives before it goes dead as stalled (G6).
pub const DEFAULT_MAX_STALLS: u32 = 3;
/// Default most renewals within one attempt (G4).
pub const DEFAULT_MAX_RENEWALS: u32 = 6;
/// Default window in which a dedup key makes a second enqueue a duplicate (G11).
pub const DEFAULT_DEDUP_WINDOW: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// Most attempts an item may be given.
pub const MAX_ATTEMPTS_LIMIT: u32 = 10_000;
/// Largest fair-share weight of an item or of a fairness key (G18).
pub const MAX_WEIGHT: u32 = 10_000;

/// Where an item is in its life.
///
/// `Ready -> Running -> Done`; `Running -> Ready` (retry, release, recovered expiry);
/// `Running -> Dead` (attempts or stalls exhausted, permanent failure);
/// `Dead -> Ready` only by an operator's requeue. See [`crate::machine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ItemState {
    /// Waiting to be claimed (possibly not before `run_at`).
    Ready,
    /// Leased to an owner until `lease_expires_at`.
    Running,
    /// Finished successfully. Stores may delete finished items at once.
    Done,
    /// Given up on; kept with its last error until an operator requeues or discards it.
    Dead,
}

impl ItemState {
    /// The lowercase name stores persist (`"ready"`, `"running"`, `"done"`, `"dead"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ItemState::Ready => "ready",
            ItemState::Running => "running",
            ItemState::Done => "done",
            ItemState::Dead => "dead",
        }
    }
}

impl fmt::Display for ItemState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ItemState {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ready" => Ok(ItemState::Ready),
            "running" => Ok(ItemState::Running),
            "done" => Ok(ItemState::Done),
            "dead" => Ok(ItemState::Dead),
            other => Err(Error::invalid("state", format!("unknown state {other:?}"))),
        }
    }
}

/// A unit of work as a store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// Identifier (UUID v7).
    pub id: ItemId,
    /// The queue it belongs to.
    pub queue: QueueName,
    /// Opaque bytes for the handler.
    pub payload: Vec<u8>,
    /// Stream key: strict FIFO among items sharing it (G9).
    pub stream: Option<StreamKey>,
    /// Scope key: at most one running item per scope (G10).
    pub scope: Option<ScopeKey>,
    /// The producer's idempotency key (G11).
    pub dedup_key: Option<DedupKey>,
    /// Smaller runs first (G8). Default 0.
    pub priority: i16,
    /// Not claimable before this instant (G7).
    pub run_at: Timestamp,
    /// Current state.
    pub state: ItemState,
    /// Number of claims so far; part of the [`LeaseToken`]. Never decreases.
    pub attempt: u32,
    /// The id the latest claim minted for its lease ([`LeaseId::NONE`] before the first
    /// claim); part of the [`LeaseToken`], so a token names one lease, not only an
    /// attempt number (G3).
    pub lease: LeaseId,
    /// Owner of the current lease while running.
    pub owner: Option<OwnerId>,
    /// When the current lease ends while running.
    pub lease_expires_at: Option<Timestamp>,
    /// Renewals made in the current attempt (G4).
    pub renewals: u32,
    /// Expired leases counted so far (G6).
    pub stalls: u32,
    /// Attempts allowed before a retryable failure makes the item dead (G5).
    pub max_attempts: u32,
    /// Stalls allowed before recovery makes the item dead (G6).
    pub max_stalls: u32,
    /// Renewals allowed within one attempt (G4).
    pub max_renewals: u32,
    /// The last failure's message, kept through retries and death.
    pub last_error: Option<String>,
    /// When it was enqueued.
    pub created_at: Timestamp,
    /// When its state last changed.
    pub updated_at: Timestamp,
    /// The last progress a holder reported with an accepted renewal, with the attempt
    /// that reported it (kept until the next report; compare its attempt with
    /// `attempt` to tell the current attempt's progress from an earlier one's). Read
    /// by [`Store::item_get`](crate::Store::item_get) and listings; the item of a
    /// claim's [`Lease`] may leave it out (`None`), as the new attempt reported none.
    pub progress: Option<Progress>,
}

impl Item {
    /// The fencing token of the item's current attempt.
    pub fn token(&self) -> LeaseToken {
        LeaseToken {
            id: self.id,
            attempt: self.attempt,
            lease: self.lease,
        }
    }

    /// The payload parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.payload).map_err(|e| Error::invalid("payload", e.to_string()))
    }
}

/// When a new item becomes claimable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Schedule {
    /// At once (at the store's `now` when it is enqueued).
    #[default]
    Now,
    /// At this instant.
    At(Timestamp),
    /// This long after the store's `now` when it is enqueued.
    After(Duration),
}

impl Schedule {
    /// The run time this schedule gives at `now`.
    pub fn run_at(self, now: Timestamp) -> Timestamp {
        match self {
            Schedule::Now => now,
            Schedule::At(t) => t,
            Schedule::After(d) => now + d,
        }
    }
}

/// An item to enqueue, built with [`NewItem::new`] and its builder methods.
///
/// Fields are public to read (stores read them) but the struct can only be built
/// through core, so new fields can be added without breaking a store.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewItem {
    /// Its id, assigned at construction so a producer knows it before the write.
    pub id: ItemId,
    /// The queue.
    pub queue: QueueName,
    /// Opaque bytes for the handler.
    pub payload: Vec<u8>,
    /// Stream key (G9).
    pub stream: Option<StreamKey>,
    /// Scope key (G10).
    pub scope: Option<ScopeKey>,
    /// Dedup key (G11).
    pub dedup_key: Option<DedupKey>,
    /// How long the dedup key is remembered.
    pub dedup_window: Duration,
    /// Smaller runs first.
    pub priority: i16,
    /// When it becomes claimable.
    pub schedule: Schedule,
    /// Attempts allowed (1..=10 000).
    pub max_attempts: u32,
    /// Stalls allowed (1..=10 000).
    pub max_stalls: u32,
    /// Renewals allowed per attempt.
    pub max_renewals: u32,
    /// The key the queue's per-key concurrency and rate limits count it under (G16,
    /// G17). `None`: only the queue-wide limits apply.
    pub limit_key: Option<LimitKey>,
    /// The tenant whose fair share it is served from (G18). `None`: the queue's
    /// unnamed tenant, one tenant like any other.
    pub fairness_key: Option<FairnessKey>,
    /// Its tenant's weight as the producer declares it (1..=[`MAX_WEIGHT`], default
    /// 1); a weight the queue configures for the key
    /// ([`QueueLimits::weight`](crate::QueueLimits::weight)) wins over it (G18).
    pub weight: u32,
}

impl NewItem {
    /// A ready item for `queue` with the given payload and every default.
    pub fn new(queue: QueueName, payload: impl Into<Vec<u8>>) -> Self {
        NewItem {
            id: ItemId::new(),
            queue,
            payload: payload.into(),
            stream: None,
            scope: None,
            dedup_key: None,
            dedup_window: DEFAULT_DEDUP_WINDOW,
            priority: 0,
            schedule: Schedule::Now,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_stalls: DEFAULT_MAX_STALLS,
            max_renewals: DEFAULT_MAX_RENEWALS,
            limit_key: None,
            fairness_key: None,
            weight: 1,
        }
    }

    /// An item whose payload is `value` serialized as JSON.
    pub fn json<T: serde::Serialize + ?Sized>(queue: QueueName, value: &T) -> Result<Self> {
        let payload =
            serde_json::to_vec(value).map_err(|e| Error::invalid("payload", e.to_string()))?;
        Ok(NewItem::new(queue, payload))
    }

    /// Puts the item in a stream (G9).
    pub fn stream(mut self, stream: StreamKey) -> Self {
        self.stream = Some(stream);
        self
    }

    /// Gives the item a scope (G10).
    pub fn scope(mut self, scope: ScopeKey) -> Self {
        self.scope = Some(scope);
        self
    }

    /// Gives the item a dedup key (G11), remembered for the default 30 days.
    pub fn dedup_key(mut self, key: DedupKey) -> Self {
        self.dedup_key = Some(key);
        self
    }

    /// How long the dedup key is remembered (1 s ..= 366 days).
    pub fn dedup_window(mut self, window: Duration) -> Self {
        self.dedup_window = window;
        self
    }

    /// Sets the priority; smaller runs first.
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
    }

    /// Makes the item claimable at `at` and not before (G7).
    pub fn run_at(mut self, at: Timestamp) -> Self {
        self.schedule = Schedule::At(at);
        self
    }

    /// Makes the item claimable `delay` after it is enqueued (G7).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.schedule = Schedule::After(delay);
        self
    }

    /// Sets the attempts allowed.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Sets the stalls allowed.
    pub fn max_stalls(mut self, n: u32) -> Self {
        self.max_stalls = n;
        self
    }

    /// Sets the renewals allowed per attempt.
    pub fn max_renewals(mut self, n: u32) -> Self {
        self.max_renewals = n;
        self
    }

    /// Counts the item under `key` in its queue's per-key limits (G16, G17).
    pub fn limit_key(mut self, key: LimitKey) -> Self {
        self.limit_key = Some(key);
        self
    }

    /// Serves the item from the fair share of tenant `key` (G18).
    pub fn fairness_key(mut self, key: FairnessKey) -> Self {
        self.fairness_key = Some(key);
        self
    }

    /// Declares its tenant's weight (1..=[`MAX_WEIGHT`]; G18).
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// Uses `id` instead of the generated one (for callers that mint ids themselves).
    pub fn with_id(mut self, id: ItemId) -> Self {
        self.id = id;
        self
    }
}
