//! The runtime's metrics through the [`metrics`] facade, so any exporter works.
//!
//! Handles are registered once per queue when the worker starts and reused for every
//! job: the hot path never formats a label or looks a name up. Install the exporter's
//! recorder before spawning workers; handles registered before it are no-ops.
//!
//! The names, kinds and labels are documented in one table, in the module docs of
//! [`tenure_runtime`](crate).

use std::time::Duration;

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
    Gauge, Histogram, Unit,
};

use tenure_core::{Item, QueueCounts, QueueName, Store, Timestamp};

use crate::metrics::{add, Metrics};

// Every metric name the runtime records.
pub(crate) const CLAIMED: &str = "tenure_claimed_total";
pub(crate) const COMPLETED: &str = "tenure_completed_total";
pub(crate) const FAILED: &str = "tenure_failed_total";
pub(crate) const LOST: &str = "tenure_lost_total";
pub(crate) const RENEWED: &str = "tenure_renewed_total";
pub(crate) const SELF_STOPPED: &str = "tenure_self_stopped_total";
pub(crate) const TIMED_OUT: &str = "tenure_timed_out_total";
pub(crate) const HANDLER_FINALIZED: &str = "tenure_handler_finalized_total";
pub(crate) const CLAIM_SECONDS: &str = "tenure_claim_seconds";
pub(crate) const PICKUP_SECONDS: &str = "tenure_pickup_seconds";
pub(crate) const HANDLER_SECONDS: &str = "tenure_handler_seconds";
pub(crate) const FINALIZE_BATCH: &str = "tenure_finalize_batch_size";
pub(crate) const IN_FLIGHT: &str = "tenure_in_flight";
pub(crate) const QUEUE_DEPTH: &str = "tenure_queue_depth";
pub(crate) const OLDEST_READY: &str = "tenure_queue_oldest_ready_age_seconds";
pub(crate) const LIMIT_SATURATED: &str = "tenure_limit_saturated_total";
pub(crate) const LIMIT_RATE_WAITS: &str = "tenure_limit_rate_waits_total";
pub(crate) const LIMIT_RATE_WAIT_SECONDS: &str = "tenure_limit_rate_wait_seconds";

/// Describes every metric the runtime records (help text and unit) to the recorder
/// installed now, for exporters that show them (Prometheus `# HELP`). Optional: the
/// metrics are recorded either way.
pub fn describe_metrics() {
    describe_counter!(CLAIMED, Unit::Count, "Leases claimed.");
    describe_counter!(COMPLETED, Unit::Count, "Completions the store accepted.");
    describe_counter!(
        FAILED,
        Unit::Count,
        "Failures the store accepted (retrying or dead)."
    );
    describe_counter!(LOST, Unit::Count, "Attempts whose lease was lost.");
    describe_counter!(RENEWED, Unit::Count, "Successful lease renewals.");
    describe_counter!(
        SELF_STOPPED,
        Unit::Count,
        "Attempts cancelled by the self-stop."
    );
    describe_counter!(
        TIMED_OUT,
        Unit::Count,
        "Attempts stopped by the handler timeout."
    );
    describe_counter!(
        HANDLER_FINALIZED,
        Unit::Count,
        "Attempts their own handler finalized (Job::take_finalize); not in completed or failed."
    );
    describe_histogram!(
        CLAIM_SECONDS,
        Unit::Seconds,
        "One claim call, sent to answered."
    );
    describe_histogram!(
        PICKUP_SECONDS,
        Unit::Seconds,
        "From an item's run_at (or enqueue) to its handler's start."
    );
    describe_histogram!(HANDLER_SECONDS, Unit::Seconds, "Handler run time.");
    describe_histogram!(
        FINALIZE_BATCH,
        Unit::Count,
        "Outcomes written by one finalize flush."
    );
    describe_gauge!(IN_FLIGHT, Unit::Count, "Handlers running now.");
    describe_gauge!(
        OLDEST_READY,
        Unit::Seconds,
        "How long the longest-waiting due item has been claimable (0: none), sampled by the maintenance leader."
    );
    describe_gauge!(
        QUEUE_DEPTH,
        Unit::Count,
        "Items by state, sampled by the maintenance leader."
    );
    describe_counter!(
        LIMIT_SATURATED,
        Unit::Count,
        "Empty polls that found the queue's due items all waiting for a slot (a limit key or the queue at its concurrency limit)."
    );
    describe_counter!(
        LIMIT_RATE_WAITS,
        Unit::Count,
        "Empty polls that found the queue's next start held back by a rate or a deferral."
    );
    describe_histogram!(
        LIMIT_RATE_WAIT_SECONDS,
        Unit::Seconds,
        "How long the queue's next start was held back by a rate or a deferral, at each rate wait."
    );
}

/// The handles of one queue.
#[derive(Debug)]
pub(crate) struct QueueHandles {
    pub(crate) claimed: Counter,
    pub(crate) completed: Counter,
    pub(crate) failed: Counter,
    pub(crate) lost: Counter,
    pub(crate) renewed: Counter,
    pub(crate) self_stopped: Counter,
    pub(crate) timed_out: Counter,
    pub(crate) handler_finalized: Counter,
    pub(crate) pickup: Histogram,
    pub(crate) handler: Histogram,
    pub(crate) in_flight: Gauge,
    depth: [Gauge; 4],
    oldest_ready: Gauge,
    pub(crate) limit_saturated: Counter,
    pub(crate) limit_rate_waits: Counter,
    pub(crate) limit_rate_wait: Histogram,
}

impl QueueHandles {
    fn new(queue: &QueueName) -> Self {
        let q = queue.as_str().to_owned();
        let depth = ["ready", "scheduled", "running", "dead"]
            .map(|state| gauge!(QUEUE_DEPTH, "queue" => q.clone(), "state" => state));
        QueueHandles {
            claimed: counter!(CLAIMED, "queue" => q.clone()),
            completed: counter!(COMPLETED, "queue" => q.clone()),
            failed: counter!(FAILED, "queue" => q.clone()),
            lost: counter!(LOST, "queue" => q.clone()),
            renewed: counter!(RENEWED, "queue" => q.clone()),
            self_stopped: counter!(SELF_STOPPED, "queue" => q.clone()),
            timed_out: counter!(TIMED_OUT, "queue" => q.clone()),
            handler_finalized: counter!(HANDLER_FINALIZED, "queue" => q.clone()),
            pickup: histogram!(PICKUP_SECONDS, "queue" => q.clone()),
            handler: histogram!(HANDLER_SECONDS, "queue" => q.clone()),
            in_flight: gauge!(IN_FLIGHT, "queue" => q.clone()),
            limit_saturated: counter!(LIMIT_SATURATED, "queue" => q.clone()),
            limit_rate_waits: counter!(LIMIT_RATE_WAITS, "queue" => q.clone()),
            limit_rate_wait: histogram!(LIMIT_RATE_WAIT_SECONDS, "queue" => q.clone()),
            oldest_ready: gauge!(OLDEST_READY, "queue" => q),
            depth,
        }
    }

    /// Records the pickup latency of `item`, whose handler starts at `now` (wall clock).
    pub(crate) fn picked_up(&self, item: &Item, now: Timestamp) {
        let due = item.run_at.max(item.created_at);
        self.pickup.record(now.duration_since(due).as_secs_f64());
    }

    /// Sets the depth gauges from a sample of the queue's counts.
    pub(crate) fn sampled(&self, counts: &QueueCounts) {
        let [ready, scheduled, running, dead] = &self.depth;
        ready.set(counts.ready as f64);
        scheduled.set(counts.scheduled as f64);
        running.set(counts.running as f64);
        dead.set(counts.dead as f64);
        self.oldest_ready
            .set(counts.oldest_ready_age.map_or(0.0, |a| a.as_secs_f64()));
    }
}

/// A worker's registered handles: one set per queue it serves, plus the per-call ones
/// labelled with all its queues.
#[derive(Debug)]
pub(crate) struct Exported {
    queues: Vec<(QueueName, QueueHandles)>,
    pub(crate) claim: Histogram,
    pub(crate) finalize_batch: Histogram,
}

impl Exported {
    /// Registers the handles of `queues` (at least one) with the recorder installed now.
    pub(crate) fn new(queues: &[QueueName]) -> Self {
        let mut seen: Vec<(QueueName, QueueHandles)> = Vec::with_capacity(queues.len());
        for q in queues {
            if !seen.iter().any(|(n, _)| n == q) {
                seen.push((q.clone(), QueueHandles::new(q)));
            }
        }
        let all = queues
            .iter()
            .map(QueueName::as_str)
            .collect::<Vec<_>>()
            .join(",");
        Exported {
            queues: seen,
            claim: histogram!(CLAIM_SECONDS, "queue" => all.clone()),
            finalize_batch: histogram!(FINALIZE_BATCH, "queue" => all),
        }
    }

    /// True when the worker serves one queue: every attempt is of queue 0.
    pub(crate) fn single(&self) -> bool {
        self.queues.len() <= 1
    }

    /// The index of `queue` among the worker's queues (0 for one it does not serve,
    /// which a correct store never answers).
    pub(crate) fn index(&self, queue: &QueueName) -> u32 {
        if self.single() {
            return 0;
        }
        self.queues
            .iter()
            .position(|(n, _)| n == queue)
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(0)
    }

    /// The handles of the queue at `index`.
    pub(crate) fn at(&self, index: u32) -> &QueueHandles {
        let i = usize::try_from(index).unwrap_or(0);
        match self.queues.get(i) {
            Some((_, h)) => h,
            None => &self.queues[0].1,
        }
    }

    /// The queues and their handles.
    pub(crate) fn queues(&self) -> impl Iterator<Item = (&QueueName, &QueueHandles)> {
        self.queues.iter().map(|(q, h)| (q, h))
    }
}

/// The leader's sample of every served queue's counts into the depth gauges, each
/// call limited to `call_timeout`. A queue whose counts the store cannot answer keeps
/// its last sample.
pub(crate) async fn sample_queues(
    export: &Exported,
    store: &dyn Store,
    metrics: &Metrics,
    call_timeout: Duration,
) {
    for (queue, handles) in export.queues() {
        match tokio::time::timeout(call_timeout, store.queue_counts(queue)).await {
            Ok(Ok(counts)) => handles.sampled(&counts),
            Ok(Err(e)) => {
                add(&metrics.store_errors, 1);
                tracing::warn!(event = "sample", %queue, error = %e, "queue counts failed");
            }
            Err(_) => {
                add(&metrics.store_errors, 1);
                tracing::warn!(event = "sample", %queue, "queue counts timed out");
            }
        }
    }
}
