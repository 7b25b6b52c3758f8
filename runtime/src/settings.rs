//! Everything a running worker reads, checked once by the builder.

use std::sync::Arc;
use std::time::Duration;

use tenure_core::{LeaderName, Limits, OwnerId, Partitioning, QueueName, RetryPolicy, SharedClock};

use crate::periodic::Periodics;
use crate::poll::PollPolicy;

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
