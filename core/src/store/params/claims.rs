//! Params of the [`Claims`](crate::contract::Claims) group: enqueue and claim.

use std::collections::HashSet;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::{OwnerId, QueueName};
use crate::model::{NewItem, Schedule, MAX_ATTEMPTS_LIMIT};
use crate::partition::Partitioning;
use crate::time::Timestamp;

use super::Limits;

/// Parameters of [`Store::enqueue`](crate::Store::enqueue).
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
            crate::store::limits::check_weight(item.weight)?;
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

/// Parameters of [`Store::claim`](crate::Store::claim).
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
