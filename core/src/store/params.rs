//! One params struct per [`Store`](super::Store) operation.
//!
//! Each is built by a core constructor and only read by stores; all are
//! `#[non_exhaustive]`, so fields can be added without breaking a custom store. Each
//! has a `validate` method that every store MUST call before it writes anything (G15).

use std::collections::HashSet;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::{LeaderName, OwnerId, QueueName};
use crate::model::{ItemId, LeaseToken, NewItem, Schedule, MAX_ATTEMPTS_LIMIT};
use crate::partition::Partitioning;
use crate::time::Timestamp;

/// Default [`Limits::schedule_window`]: 100 years of 365.25 days.
pub const DEFAULT_SCHEDULE_WINDOW: Duration = Duration::from_secs(36_525 * 24 * 60 * 60);

/// Default [`Limits::max_claim_queues`].
pub const DEFAULT_MAX_CLAIM_QUEUES: usize = 64;

use super::operate::DeadFilter;

/// The bounds a store enforces on its input (G15). Stores hold one, usually the
/// default, and pass it to every `validate` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest payload in bytes. Default 1 MiB.
    pub max_payload_bytes: usize,
    /// Most items in one enqueue call. Default 10 000.
    pub max_enqueue_batch: usize,
    /// Most items in one claim and most tokens in one renew, complete, fail or
    /// release call. Default 1 000.
    pub max_batch: usize,
    /// Shortest lease. Default 100 ms.
    pub min_lease: Duration,
    /// Longest lease. Default 24 h.
    pub max_lease: Duration,
    /// How far from the store's `now` an item's run time may lie, either side: an
    /// enqueue delay at most this long, a `run_at` no further than this before or after
    /// `now`. Default [`DEFAULT_SCHEDULE_WINDOW`] (100 years), which also keeps every
    /// run time exact in stores that keep times as 53-bit floats.
    pub schedule_window: Duration,
    /// Most queues one claim may name. Default [`DEFAULT_MAX_CLAIM_QUEUES`] (64): a
    /// claim looks at each queue's ready work, so its cost grows with the list.
    pub max_claim_queues: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_payload_bytes: 1024 * 1024,
            max_enqueue_batch: 10_000,
            max_batch: 1_000,
            min_lease: Duration::from_millis(100),
            max_lease: Duration::from_secs(24 * 60 * 60),
            schedule_window: DEFAULT_SCHEDULE_WINDOW,
            max_claim_queues: DEFAULT_MAX_CLAIM_QUEUES,
        }
    }
}

impl Limits {
    /// Sets the largest payload in bytes.
    pub fn with_max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    fn check_lease(&self, field: &'static str, d: Duration) -> Result<()> {
        if d < self.min_lease || d > self.max_lease {
            return Err(Error::invalid(
                field,
                format!(
                    "{d:?} is outside {:?}..={:?}",
                    self.min_lease, self.max_lease
                ),
            ));
        }
        Ok(())
    }

    fn check_batch(&self, field: &'static str, len: usize, max: usize) -> Result<()> {
        if len == 0 {
            return Err(Error::invalid(field, "must hold at least one entry"));
        }
        if len > max {
            return Err(Error::invalid(
                field,
                format!("holds {len} entries; the limit is {max}"),
            ));
        }
        Ok(())
    }

    fn check_tokens(&self, tokens: &[LeaseToken]) -> Result<()> {
        self.check_batch("tokens", tokens.len(), self.max_batch)?;
        // A short batch (one token, the common case) is checked pairwise, without
        // building a hash set.
        let dup = if tokens.len() <= 16 {
            tokens
                .iter()
                .enumerate()
                .find(|(i, t)| tokens[..*i].iter().any(|u| u.id == t.id))
                .map(|(_, t)| t)
        } else {
            let mut ids: Vec<_> = tokens.iter().map(|t| t.id).collect();
            ids.sort_unstable();
            ids.windows(2)
                .find(|w| w[0] == w[1])
                .and_then(|w| tokens.iter().find(|t| t.id == w[0]))
        };
        if let Some(t) = dup {
            return Err(Error::invalid(
                "tokens",
                format!("item {} appears more than once", t.id),
            ));
        }
        Ok(())
    }
}

/// Parameters of [`Store::enqueue`](super::Store::enqueue).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EnqueueParams {
    /// The items, in enqueue order.
    pub items: Vec<NewItem>,
    /// Pin the items' streams to this registered instance at enqueue (G14; see
    /// [`EnqueueParams::pin_streams_to`]); `None` (the default) leaves pinning to the
    /// first partitioned claim.
    pub pin_to: Option<OwnerId>,
}

impl EnqueueParams {
    /// Enqueue `items` in this order.
    pub fn new(items: Vec<NewItem>) -> Self {
        EnqueueParams {
            items,
            pin_to: None,
        }
    }

    /// Enqueue one item.
    pub fn one(item: NewItem) -> Self {
        EnqueueParams::new(vec![item])
    }

    /// Pins the stream of every inserted item that is pinned to nobody yet to
    /// `instance`, the instance that enqueues it (G14, first write wins): partitioned
    /// claims of other instances then pass the stream over, whatever its partition,
    /// until `instance` leaves the registry. A stream already pinned keeps its pin; a
    /// duplicate (G11) inserts nothing and pins nothing. `instance` MUST be registered,
    /// else the enqueue answers [`Error::NotFound`] with `what = "instance"` and writes
    /// nothing. Only on stores that declare
    /// [`Capabilities::partitioned_claiming`](crate::Capabilities::partitioned_claiming);
    /// others answer [`Error::Unsupported`].
    pub fn pin_streams_to(mut self, instance: OwnerId) -> Self {
        self.pin_to = Some(instance);
        self
    }

    /// Checks every bound of G15 that does not need the store's clock; a delay longer
    /// than [`Limits::schedule_window`] is refused naming `delay`. Stores then call
    /// [`EnqueueParams::validate_schedule`] with the `now` they read.
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        limits.check_batch("items", self.items.len(), limits.max_enqueue_batch)?;
        let mut ids = HashSet::with_capacity(self.items.len());
        for item in &self.items {
            if let Schedule::After(d) = item.schedule {
                if d > limits.schedule_window {
                    return Err(Error::invalid(
                        "delay",
                        format!(
                            "{d:?} is over the schedule window of {:?}",
                            limits.schedule_window
                        ),
                    ));
                }
            }
            if item.payload.len() > limits.max_payload_bytes {
                return Err(Error::invalid(
                    "payload",
                    format!(
                        "is {} bytes; the limit is {}",
                        item.payload.len(),
                        limits.max_payload_bytes
                    ),
                ));
            }
            if item.max_attempts == 0 || item.max_attempts > MAX_ATTEMPTS_LIMIT {
                return Err(Error::invalid(
                    "max_attempts",
                    format!("{} is outside 1..={MAX_ATTEMPTS_LIMIT}", item.max_attempts),
                ));
            }
            if item.max_stalls == 0 || item.max_stalls > MAX_ATTEMPTS_LIMIT {
                return Err(Error::invalid(
                    "max_stalls",
                    format!("{} is outside 1..={MAX_ATTEMPTS_LIMIT}", item.max_stalls),
                ));
            }
            if item.max_renewals > MAX_ATTEMPTS_LIMIT {
                return Err(Error::invalid(
                    "max_renewals",
                    format!("{} is over {MAX_ATTEMPTS_LIMIT}", item.max_renewals),
                ));
            }
            let max_window = Duration::from_secs(366 * 24 * 60 * 60);
            if item.dedup_window < Duration::from_secs(1) || item.dedup_window > max_window {
                return Err(Error::invalid(
                    "dedup_window",
                    format!("{:?} is outside 1s..={max_window:?}", item.dedup_window),
                ));
            }
            super::limits::check_weight(item.weight)?;
            if !ids.insert(item.id) {
                return Err(Error::invalid(
                    "id",
                    format!("{} appears more than once", item.id),
                ));
            }
        }
        Ok(())
    }
}

impl EnqueueParams {
    /// Checks that every item's `run_at` ([`Schedule::At`]) lies within
    /// [`Limits::schedule_window`] of `now`, before or after it, refusing one that does
    /// not naming `run_at` (G15). A store MUST call it with the `now` it reads for the
    /// enqueue, before it writes anything.
    pub fn validate_schedule(&self, limits: &Limits, now: Timestamp) -> Result<()> {
        let (earliest, latest) = (
            now.saturating_sub(limits.schedule_window),
            now.saturating_add(limits.schedule_window),
        );
        for item in &self.items {
            if let Schedule::At(t) = item.schedule {
                if t < earliest || t > latest {
                    return Err(Error::invalid(
                        "run_at",
                        format!(
                            "{t} is more than {:?} from now ({now})",
                            limits.schedule_window
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Parameters of [`Store::claim`](super::Store::claim).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClaimParams {
    /// Queues to claim from (at least one).
    pub queues: Vec<QueueName>,
    /// Who will hold the leases.
    pub owner: OwnerId,
    /// Most items to claim.
    pub limit: u32,
    /// How long each lease lasts unless renewed.
    pub lease_for: Duration,
    /// Partitioned claiming (G14), for stores that declare it; `None` (the default)
    /// claims from all of the queues' work.
    pub partitioning: Option<Partitioning>,
    /// Most items of one stream one claim leases as a run: the stream's head and the
    /// consecutive ready items behind it (G9; see [`ClaimParams::stream_runs`]). 1 (the
    /// default) claims heads only.
    pub stream_run: u32,
}

/// Most items one stream run may hold ([`ClaimParams::stream_runs`]).
pub const MAX_STREAM_RUN: u32 = 1_000;

impl ClaimParams {
    /// Claim up to `limit` items of `queue` for `owner`, each leased for `lease_for`.
    pub fn new(queue: QueueName, owner: OwnerId, limit: u32, lease_for: Duration) -> Self {
        ClaimParams {
            queues: vec![queue],
            owner,
            limit,
            lease_for,
            partitioning: None,
            stream_run: 1,
        }
    }

    /// Leases runs of up to `k` items per stream (1..=[`MAX_STREAM_RUN`]; 1 turns runs
    /// off): with a stream's head, the claim also takes the items right behind it in
    /// enqueue order while each is `ready`, due, in one of the claim's queues and free
    /// of a busy scope, up to `k` in all. The run's leases are adjacent in the answer,
    /// in stream order, each with its own token, and count towards `limit` like any
    /// lease. Handle them in that order: a failure, release, expiry or eviction of one
    /// puts every later running item of its stream back untouched (see
    /// [`Store::claim`](crate::Store::claim)). Stores without
    /// [`Capabilities::stream_runs`](crate::Capabilities::stream_runs) claim heads only,
    /// which is a run of one.
    pub fn stream_runs(mut self, k: u32) -> Self {
        self.stream_run = k;
        self
    }

    /// Claims from these queues instead (priority order still holds across them).
    pub fn queues(mut self, queues: Vec<QueueName>) -> Self {
        self.queues = queues;
        self
    }

    /// Claims only this instance's share of the work, as
    /// [`partition`](crate::partition) describes (G14). `owner` must be a registered
    /// instance. Stores without
    /// [`Capabilities::partitioned_claiming`](crate::Capabilities::partitioned_claiming)
    /// answer [`Error::Unsupported`](crate::Error::Unsupported).
    pub fn partitioned(mut self, partitioning: Partitioning) -> Self {
        self.partitioning = Some(partitioning);
        self
    }

    /// Checks the batch limit, the lease duration, the queue list (one to
    /// [`Limits::max_claim_queues`] names) and the number of partitions (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        if self.queues.is_empty() {
            return Err(Error::invalid("queues", "must name at least one queue"));
        }
        if self.queues.len() > limits.max_claim_queues {
            return Err(Error::invalid(
                "queues",
                format!(
                    "names {} queues; the limit is {}",
                    self.queues.len(),
                    limits.max_claim_queues
                ),
            ));
        }
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
        limits.check_batch("limit", limit, limits.max_batch)?;
        limits.check_lease("lease_for", self.lease_for)?;
        if self.stream_run == 0 || self.stream_run > MAX_STREAM_RUN {
            return Err(Error::invalid(
                "stream_run",
                format!("{} is outside 1..={MAX_STREAM_RUN}", self.stream_run),
            ));
        }
        match &self.partitioning {
            Some(p) => p.validate(),
            None => Ok(()),
        }
    }
}

/// Parameters of [`Store::renew`](super::Store::renew).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RenewParams {
    /// The leases to extend.
    pub tokens: Vec<LeaseToken>,
    /// The new lease length, counted from the store's `now`.
    pub lease_for: Duration,
}

impl RenewParams {
    /// Renew `tokens` for `lease_for` from now.
    pub fn new(tokens: Vec<LeaseToken>, lease_for: Duration) -> Self {
        RenewParams { tokens, lease_for }
    }

    /// Checks the batch bounds and the lease duration (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        limits.check_tokens(&self.tokens)?;
        limits.check_lease("lease_for", self.lease_for)
    }
}

/// Parameters of [`Store::complete`](super::Store::complete).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CompleteParams {
    /// The attempts that finished successfully.
    pub tokens: Vec<LeaseToken>,
}

impl CompleteParams {
    /// Complete these attempts.
    pub fn new(tokens: Vec<LeaseToken>) -> Self {
        CompleteParams { tokens }
    }

    /// Checks the batch bounds (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        limits.check_tokens(&self.tokens)
    }
}

/// Parameters of [`Store::release`](super::Store::release).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ReleaseParams {
    /// The attempts given back unfinished.
    pub tokens: Vec<LeaseToken>,
}

impl ReleaseParams {
    /// Release these attempts.
    pub fn new(tokens: Vec<LeaseToken>) -> Self {
        ReleaseParams { tokens }
    }

    /// Checks the batch bounds (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        limits.check_tokens(&self.tokens)
    }
}

/// Whether a failed attempt may be tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Retry this long after the store's `now`, unless attempts are exhausted.
    After(Duration),
    /// A permanent failure: the item goes dead at once.
    Never,
}

/// Most bytes of an error message a store keeps; longer messages are cut.
pub const MAX_ERROR_BYTES: usize = 8 * 1024;

/// One failed attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Failure {
    /// The attempt.
    pub token: LeaseToken,
    /// Why it failed; kept as the item's `last_error` (at most [`MAX_ERROR_BYTES`]).
    pub error: String,
    /// Whether and when to retry.
    pub retry: Retry,
}

impl Failure {
    /// A retryable failure: back to ready after `delay`, or dead if attempts are exhausted.
    pub fn retry_after(token: LeaseToken, delay: Duration, error: impl Into<String>) -> Self {
        Failure {
            token,
            error: truncate(error.into()),
            retry: Retry::After(delay),
        }
    }

    /// A permanent failure: dead at once.
    pub fn permanent(token: LeaseToken, error: impl Into<String>) -> Self {
        Failure {
            token,
            error: truncate(error.into()),
            retry: Retry::Never,
        }
    }
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_ERROR_BYTES {
        let mut cut = MAX_ERROR_BYTES;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// Parameters of [`Store::fail`](super::Store::fail).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FailParams {
    /// The failed attempts.
    pub failures: Vec<Failure>,
}

impl FailParams {
    /// Fail these attempts.
    pub fn new(failures: Vec<Failure>) -> Self {
        FailParams { failures }
    }

    /// Fail one attempt.
    pub fn one(failure: Failure) -> Self {
        FailParams {
            failures: vec![failure],
        }
    }

    /// Checks the batch bounds (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        let tokens: Vec<LeaseToken> = self.failures.iter().map(|f| f.token).collect();
        limits.check_tokens(&tokens)?;
        for f in &self.failures {
            if let Retry::After(d) = f.retry {
                if d > Duration::from_secs(366 * 24 * 60 * 60) {
                    return Err(Error::invalid("retry", format!("{d:?} is over a year")));
                }
            }
        }
        Ok(())
    }
}

/// Parameters of [`Store::recover_expired`](super::Store::recover_expired).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RecoverParams {
    /// Most expired items to handle in one pass.
    pub limit: u32,
}

impl RecoverParams {
    /// Recover up to `limit` expired leases.
    pub fn new(limit: u32) -> Self {
        RecoverParams { limit }
    }

    /// Checks the batch bounds (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
        limits.check_batch("limit", limit, limits.max_enqueue_batch)
    }
}

impl Default for RecoverParams {
    fn default() -> Self {
        RecoverParams::new(1_000)
    }
}

/// Parameters of [`Store::purge`](super::Store::purge).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PurgeParams {
    /// Finished items older than this (by their last change) are deleted.
    pub keep_done_for: Duration,
    /// Most rows of each kind to delete in one pass.
    pub limit: u32,
}

impl PurgeParams {
    /// Delete finished items older than `keep_done_for` and expired dedup keys.
    pub fn new(keep_done_for: Duration, limit: u32) -> Self {
        PurgeParams {
            keep_done_for,
            limit,
        }
    }

    /// Checks the batch bounds (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
        limits.check_batch("limit", limit, limits.max_enqueue_batch)
    }
}

/// Parameters of [`Store::dead_requeue`](super::Store::dead_requeue).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RequeueParams {
    /// Dead items to put back to ready. Ids that are not dead are left alone.
    pub ids: Vec<ItemId>,
    /// Attempts granted on top of those already made: `max_attempts` becomes at least
    /// `attempt + additional_attempts`. Default 1. `attempt` itself never goes down.
    pub additional_attempts: u32,
    /// Requeue the dead items this filter matches instead of `ids` (which is then
    /// empty), at most `filter.limit` of them in this call.
    pub filter: Option<DeadFilter>,
}

impl RequeueParams {
    /// Requeue these dead items with one more attempt each.
    pub fn new(ids: Vec<ItemId>) -> Self {
        RequeueParams {
            ids,
            additional_attempts: 1,
            filter: None,
        }
    }

    /// Requeue the dead items `filter` matches (at most `filter.limit` per call), with
    /// one more attempt each.
    pub fn matching(filter: DeadFilter) -> Self {
        RequeueParams {
            ids: Vec::new(),
            additional_attempts: 1,
            filter: Some(filter),
        }
    }

    /// Grants `n` more attempts instead of one.
    pub fn additional_attempts(mut self, n: u32) -> Self {
        self.additional_attempts = n;
        self
    }

    /// Checks the batch bounds, or the filter (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        match &self.filter {
            Some(f) => f.validate(limits)?,
            None => limits.check_batch("ids", self.ids.len(), limits.max_enqueue_batch)?,
        }
        if self.additional_attempts == 0 || self.additional_attempts > MAX_ATTEMPTS_LIMIT {
            return Err(Error::invalid(
                "additional_attempts",
                format!(
                    "{} is outside 1..={MAX_ATTEMPTS_LIMIT}",
                    self.additional_attempts
                ),
            ));
        }
        Ok(())
    }
}

/// Parameters of [`Store::dead_discard`](super::Store::dead_discard).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DiscardParams {
    /// Dead items to delete. Ids that are not dead are left alone.
    pub ids: Vec<ItemId>,
    /// Discard the dead items this filter matches instead of `ids` (which is then
    /// empty), at most `filter.limit` of them in this call.
    pub filter: Option<DeadFilter>,
}

impl DiscardParams {
    /// Discard these dead items.
    pub fn new(ids: Vec<ItemId>) -> Self {
        DiscardParams { ids, filter: None }
    }

    /// Discard the dead items `filter` matches (at most `filter.limit` per call).
    pub fn matching(filter: DeadFilter) -> Self {
        DiscardParams {
            ids: Vec::new(),
            filter: Some(filter),
        }
    }

    /// Checks the batch bounds, or the filter (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        match &self.filter {
            Some(f) => f.validate(limits),
            None => limits.check_batch("ids", self.ids.len(), limits.max_enqueue_batch),
        }
    }
}

/// Parameters of [`Store::instance_heartbeat`](super::Store::instance_heartbeat).
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

/// Parameters of [`Store::instance_deregister`](super::Store::instance_deregister).
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

/// Parameters of [`Store::instance_evict_stale`](super::Store::instance_evict_stale).
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

/// Parameters of [`Store::leader_acquire`](super::Store::leader_acquire) and
/// [`Store::leader_resign`](super::Store::leader_resign).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn q() -> QueueName {
        QueueName::new("q").unwrap()
    }
    fn owner() -> OwnerId {
        OwnerId::new("w").unwrap()
    }

    /// A token named twice is refused in a short batch (checked pairwise) and in a
    /// long one (checked sorted), wherever the two copies sit; distinct tokens pass.
    #[test]
    fn a_token_twice_is_refused_in_short_and_long_batches() {
        let l = Limits::default();
        for len in [2usize, 16, 17, 200] {
            let tokens: Vec<LeaseToken> = (0..len)
                .map(|_| LeaseToken::new(crate::ItemId::new(), 1, crate::LeaseId::mint()))
                .collect();
            assert!(CompleteParams::new(tokens.clone()).validate(&l).is_ok());
            for (a, b) in [(0, len - 1), (len / 2, len / 2 - 1)] {
                let mut dup = tokens.clone();
                dup[a] = dup[b];
                let e = CompleteParams::new(dup).validate(&l).unwrap_err();
                assert_eq!(e.invalid_field(), Some("tokens"), "len {len}");
            }
        }
    }

    #[test]
    fn claim_limits_of_zero_and_over_the_maximum_name_limit() {
        let l = Limits::default();
        let s = Duration::from_secs(30);
        assert!(ClaimParams::new(q(), owner(), 1, s).validate(&l).is_ok());
        for bad in [0, 1_001] {
            let e = ClaimParams::new(q(), owner(), bad, s)
                .validate(&l)
                .unwrap_err();
            assert_eq!(e.invalid_field(), Some("limit"));
        }
    }

    #[test]
    fn zero_and_absurd_leases_name_lease_for() {
        let l = Limits::default();
        for bad in [Duration::ZERO, Duration::from_secs(90_000)] {
            let e = ClaimParams::new(q(), owner(), 1, bad)
                .validate(&l)
                .unwrap_err();
            assert_eq!(e.invalid_field(), Some("lease_for"));
        }
    }

    #[test]
    fn oversized_payload_names_payload() {
        let l = Limits::default().with_max_payload_bytes(4);
        let e = EnqueueParams::one(NewItem::new(q(), vec![0; 5]))
            .validate(&l)
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("payload"));
    }

    #[test]
    fn repeated_tokens_are_refused() {
        let t = LeaseToken::new(ItemId::new(), 1, crate::LeaseId::mint());
        let e = CompleteParams::new(vec![t, t])
            .validate(&Limits::default())
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("tokens"));
    }

    #[test]
    fn a_claim_over_the_queue_limit_names_queues() {
        let l = Limits::default();
        let s = Duration::from_secs(30);
        let names = |n: usize| -> Vec<QueueName> {
            (0..n)
                .map(|i| QueueName::new(format!("q{i}")).unwrap())
                .collect()
        };
        let at_max = ClaimParams::new(q(), owner(), 1, s).queues(names(l.max_claim_queues));
        assert!(at_max.validate(&l).is_ok());
        let over = ClaimParams::new(q(), owner(), 1, s).queues(names(l.max_claim_queues + 1));
        assert_eq!(
            over.validate(&l).unwrap_err().invalid_field(),
            Some("queues")
        );
    }

    #[test]
    fn run_times_outside_the_schedule_window_name_run_at_or_delay() {
        let l = Limits::default();
        let now = Timestamp::from_micros(1_700_000_000_000_000);
        let w = l.schedule_window;
        for ok in [now + w, now - w, now] {
            let p = EnqueueParams::one(NewItem::new(q(), vec![]).run_at(ok));
            assert!(p.validate(&l).is_ok() && p.validate_schedule(&l, now).is_ok());
        }
        for bad in [
            now + w + Duration::from_micros(1),
            now - w - Duration::from_micros(1),
        ] {
            let p = EnqueueParams::one(NewItem::new(q(), vec![]).run_at(bad));
            let e = p.validate_schedule(&l, now).unwrap_err();
            assert_eq!(e.invalid_field(), Some("run_at"));
        }
        assert!(EnqueueParams::one(NewItem::new(q(), vec![]).delay(w))
            .validate(&l)
            .is_ok());
        let e = EnqueueParams::one(NewItem::new(q(), vec![]).delay(w + Duration::from_secs(1)))
            .validate(&l)
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("delay"));
    }

    #[test]
    fn long_error_messages_are_cut_on_a_char_boundary() {
        let f = Failure::permanent(
            LeaseToken::new(ItemId::new(), 1, crate::LeaseId::mint()),
            "é".repeat(MAX_ERROR_BYTES),
        );
        assert!(f.error.len() <= MAX_ERROR_BYTES);
    }
}
