//! Everything a running worker reads, checked once by the builder, and the rule that
//! sizes its claims from the options it was given.

use std::sync::Arc;
use std::time::Duration;

use tenure_core::{
    Error, LeaderName, Limits, OwnerId, Partitioning, QueueName, Result, RetryPolicy, SharedClock,
};

use crate::periodic::Periodics;
use crate::poll::PollPolicy;

/// Default number of claim calls a busy worker keeps out at once, below
/// [`WIDE_FROM`] slots.
pub const DEFAULT_CLAIMS_IN_FLIGHT: usize = 2;
/// From this many slots up, a worker's defaults keep more leases coming: up to
/// [`WIDE_CLAIMS_IN_FLIGHT`] claims out at once and a prefetch of
/// [`WIDE_PREFETCH_BATCHES`] claim batches (at most [`WIDE_PREFETCH_MAX`] leases).
/// With many slots and short handlers one claim's round trip is what the slots wait
/// on, so more leases must be on their way while the slots work; with few slots the
/// extra claims only contend with each other.
pub const WIDE_FROM: usize = 32;
/// Default claim calls out at once from [`WIDE_FROM`] slots up.
pub const WIDE_CLAIMS_IN_FLIGHT: usize = 4;
/// Default prefetch in claim batches from [`WIDE_FROM`] slots up (below: one batch).
pub const WIDE_PREFETCH_BATCHES: usize = 3;
/// The most leases the default prefetch holds.
pub const WIDE_PREFETCH_MAX: usize = 256;

/// Everything a running worker reads; checked once by
/// [`WorkerBuilder::spawn`](crate::WorkerBuilder::spawn).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) queues: Vec<QueueName>,
    pub(crate) instance: OwnerId,
    pub(crate) concurrency: usize,
    pub(crate) claim_batch: usize,
    /// How many claim calls may be out at once while the queue has work.
    pub(crate) claims_in_flight: usize,
    /// Leases held beyond the slots while handlers are short.
    pub(crate) prefetch: usize,
    /// Partitioned claiming (G14), when asked for.
    pub(crate) partitioning: Option<Partitioning>,
    pub(crate) lease: Duration,
    pub(crate) poll: PollPolicy,
    pub(crate) retry: RetryPolicy,
    /// A lease is renewed once this long has passed since its last successful renewal.
    pub(crate) renew_after: Duration,
    /// Leases due within this window of the earliest one go in the same call.
    pub(crate) renew_coalesce: Duration,
    /// Each renewal call gives up after this long; a failed one is retried this long
    /// after it was sent.
    pub(crate) renew_timeout: Duration,
    /// The self-stop fires this long after the last successful renewal: half a lease.
    pub(crate) self_stop_after: Duration,
    /// A handler that ignores its cancellation is dropped this long after it.
    pub(crate) abort_after: Duration,
    /// A handler still running this long after it started is stopped (Timeout).
    pub(crate) handler_timeout: Option<Duration>,
    pub(crate) finalize_batch: usize,
    pub(crate) finalize_window: Duration,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) stale_after: Duration,
    /// Whether the heartbeat starts on (see
    /// [`Worker::set_heartbeat`](crate::Worker::set_heartbeat)).
    pub(crate) heartbeat_enabled: bool,
    pub(crate) maintenance: bool,
    pub(crate) maintenance_interval: Duration,
    pub(crate) leader_name: LeaderName,
    pub(crate) leader_lease: Duration,
    pub(crate) keep_done_for: Duration,
    pub(crate) limits: Limits,
    /// Most items of one stream a claim leases as a run (1: heads only).
    pub(crate) stream_run: u32,
    /// The periodic jobs the leader enqueues, and how far it has.
    pub(crate) periodics: Arc<Periodics>,
    /// The wall clock periodic schedules are read on.
    pub(crate) clock: SharedClock,
}

/// How a worker sizes its claims: the leases one claim asks for, the claim calls out
/// at once while the queue has work, and the leases held beyond the slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClaimSizes {
    pub(crate) claim_batch: usize,
    pub(crate) claims_in_flight: usize,
    pub(crate) prefetch: usize,
}

impl ClaimSizes {
    /// The sizes for `concurrency` slots (already checked) from the options
    /// `[claim_batch, claims_in_flight, prefetch]` (None: the default) and the
    /// store's largest batch.
    ///
    /// # Errors
    /// `Error::InvalidInput` naming the option out of range.
    pub(crate) fn check(
        concurrency: usize,
        [claim_batch, claims_in_flight, prefetch]: [Option<usize>; 3],
        max_batch: usize,
    ) -> Result<Self> {
        let claim_batch = claim_batch
            .unwrap_or(concurrency)
            .min(concurrency)
            .min(max_batch);
        if claim_batch == 0 {
            return Err(Error::invalid("claim_batch", "must be at least 1"));
        }
        let wide = concurrency >= WIDE_FROM;
        let prefetch = prefetch.unwrap_or(if wide {
            (claim_batch * WIDE_PREFETCH_BATCHES).min(WIDE_PREFETCH_MAX)
        } else {
            claim_batch
        });
        let claims_in_flight = claims_in_flight.unwrap_or(if wide {
            WIDE_CLAIMS_IN_FLIGHT
        } else {
            DEFAULT_CLAIMS_IN_FLIGHT
        });
        if prefetch > concurrency.saturating_mul(10) {
            return Err(Error::invalid(
                "prefetch",
                format!("{prefetch} is above 10 times the concurrency ({concurrency})"),
            ));
        }
        if claims_in_flight == 0 || claims_in_flight > 16 {
            return Err(Error::invalid(
                "claims_in_flight",
                format!("{claims_in_flight} is outside 1..=16"),
            ));
        }
        Ok(ClaimSizes {
            claim_batch,
            claims_in_flight,
            prefetch,
        })
    }
}
