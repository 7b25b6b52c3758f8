//! The data model: items, their states, leases and the answers stores give.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use uuid::Uuid;

use crate::error::{Error, Result};
use crate::keys::{DedupKey, FairnessKey, LimitKey, OwnerId, QueueName, ScopeKey, StreamKey};
use crate::time::Timestamp;

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

/// An item's identifier: a UUID v7, so ids sort roughly by creation time.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemId(Uuid);

impl ItemId {
    /// A fresh UUID v7 id.
    pub fn new() -> Self {
        ItemId(Uuid::now_v7())
    }

    /// Wraps an existing UUID (as read back from a store).
    pub const fn from_uuid(uuid: Uuid) -> Self {
        ItemId(uuid)
    }

    /// The UUID.
    pub const fn as_uuid(&self) -> &Uuid {
        &self.0
    }

    /// The 16 bytes of the UUID, for stores that keep it as a blob.
    pub fn as_bytes(&self) -> &[u8; 16] {
        self.0.as_bytes()
    }
}

impl Default for ItemId {
    fn default() -> Self {
        ItemId::new()
    }
}

impl fmt::Debug for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Display for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for ItemId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Uuid::parse_str(s)
            .map(ItemId)
            .map_err(|e| Error::invalid("id", e.to_string()))
    }
}

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

/// The id a claim mints for the leases it grants: a random 64-bit value, so that a
/// token names one lease and not only an attempt number (G3).
///
/// The attempt number alone fences only while the store remembers every claim. A
/// replicated database that fails over can lose a claim it acknowledged (asynchronous
/// replication ships it after the answer); the new primary then hands the same attempt
/// number out again, and a token of `(id, attempt)` alone would validate both owners.
/// The lease id is not derived from anything the store keeps, so the second claim's id
/// differs from the lost one's (the chance of two claims of one item drawing the same
/// id is 2⁻⁶⁴), and the superseded owner's writes are refused.
///
/// One claim call may give all the leases it grants the same id: the id only has to
/// differ between the leases of one item. [`LeaseId::NONE`] (zero) is never minted; it
/// marks an item that has not been claimed, and the running items a store upgraded from
/// a layout without lease ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LeaseId(u64);

impl LeaseId {
    /// No lease: an item never claimed, or one claimed before its store kept lease ids.
    pub const NONE: LeaseId = LeaseId(0);

    /// A new random lease id, never [`LeaseId::NONE`].
    ///
    /// Draws from a per-thread generator seeded once from the operating system's random
    /// source (through `uuid`'s v4), then stepped with SplitMix64: one call costs a few
    /// nanoseconds, cheap enough for every claim, and two threads or processes never
    /// share a sequence.
    pub fn mint() -> LeaseId {
        use std::cell::Cell;
        thread_local! {
            static STATE: Cell<u64> = Cell::new(uuid::Uuid::new_v4().as_u64_pair().0);
        }
        STATE.with(|state| loop {
            // SplitMix64 (Steele, Lea and Flood): a bijective mix of a Weyl sequence.
            let s = state.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
            state.set(s);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            if z != 0 {
                return LeaseId(z);
            }
        })
    }

    /// The id from its stored form (a store's column or field).
    pub const fn from_u64(v: u64) -> LeaseId {
        LeaseId(v)
    }

    /// The id from a signed 64-bit column (PostgreSQL's `bigint`, SQLite's `INTEGER`),
    /// the bit pattern of [`LeaseId::to_i64`].
    pub const fn from_i64(v: i64) -> LeaseId {
        LeaseId(v as u64)
    }

    /// The id as stored in a store's field.
    pub const fn to_u64(self) -> u64 {
        self.0
    }

    /// The id as a signed 64-bit value with the same bits, for `bigint` columns.
    pub const fn to_i64(self) -> i64 {
        self.0 as i64
    }
}

impl fmt::Display for LeaseId {
    /// Sixteen lowercase hex digits, the form [`LeaseId::from_str`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl std::str::FromStr for LeaseId {
    type Err = Error;

    /// Reads the hex form [`LeaseId`]'s `Display` writes (1 to 16 hex digits).
    fn from_str(s: &str) -> Result<Self> {
        if s.is_empty() || s.len() > 16 {
            return Err(Error::invalid(
                "lease",
                format!("{s:?} is not 1 to 16 hex digits"),
            ));
        }
        u64::from_str_radix(s, 16)
            .map(LeaseId)
            .map_err(|_| Error::invalid("lease", format!("{s:?} is not 1 to 16 hex digits")))
    }
}

/// The fencing token of one lease: every write on a running item names it (G3).
///
/// A token is current while the item is running on the attempt **and** the lease it
/// names: `attempt` orders the attempts (it never goes down, so an older attempt is
/// always refused), and `lease` tells two leases of one attempt number apart when a
/// failover lost the first claim and the number was handed out again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseToken {
    /// The item.
    pub id: ItemId,
    /// The attempt the lease was granted for.
    pub attempt: u32,
    /// The lease's id, minted by the claim that granted it.
    pub lease: LeaseId,
}

impl LeaseToken {
    /// A token for `id` at `attempt`, on the lease `lease`.
    pub const fn new(id: ItemId, attempt: u32, lease: LeaseId) -> Self {
        LeaseToken { id, attempt, lease }
    }

    /// The same lease at another attempt number: a token no store granted, for tests
    /// of the fence.
    pub const fn with_attempt(self, attempt: u32) -> Self {
        LeaseToken { attempt, ..self }
    }

    /// The item and attempt this token names, whatever its lease: what a caller
    /// can predict of a claim's token (the lease id is random).
    pub const fn item_attempt(&self) -> (ItemId, u32) {
        (self.id, self.attempt)
    }
}

impl fmt::Display for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}/{}", self.id, self.attempt, self.lease)
    }
}

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
