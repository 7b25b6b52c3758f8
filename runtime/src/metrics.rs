//! Counters a running worker keeps, read as a [`MetricsSnapshot`].

use std::sync::atomic::{AtomicU64, Ordering};

/// A worker's counters at one instant. Counters only grow; `in_flight` is a gauge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// Claim calls answered by the store, empty or not (failed calls are in
    /// `store_errors`). Polls that find nothing mean an idle queue.
    pub polls: u64,
    /// Leases claimed.
    pub claimed: u64,
    /// Completions the store accepted.
    pub completed: u64,
    /// Failures the store accepted (retrying or dead), panics included.
    pub failed: u64,
    /// Of `failed`, those that made the item dead.
    pub dead: u64,
    /// Of `failed`, handler panics.
    pub panicked: u64,
    /// Attempts whose lease was lost: a renewal or a finalize answered "lease lost"
    /// (a retried finalize whose first call took effect is not counted here; see
    /// `unconfirmed`).
    pub lost: u64,
    /// Successful lease renewals (one per lease per renewal).
    pub renewed: u64,
    /// Finalizes retried after a call that got no answer and then refused as stale,
    /// with the item gone (or unreadable): the first call most likely took effect,
    /// but nothing proves it. Counted apart from `lost`; a retried finalize whose first
    /// call is seen to have taken effect counts as completed or failed.
    pub unconfirmed: u64,
    /// Renewals refused because the attempt reached its cap (G4).
    pub renewal_capped: u64,
    /// Attempts cancelled by the self-stop.
    pub self_stopped: u64,
    /// Attempts stopped by the handler timeout (each also counted in `failed` once the
    /// store accepts the failure).
    pub timed_out: u64,
    /// Leases given back unfinished (shutdown).
    pub released: u64,
    /// Store calls that failed (claim, renew, finalize, heartbeat, maintenance).
    pub store_errors: u64,
    /// Attempts finalized by their own handler
    /// ([`Job::take_finalize`](crate::Job::take_finalize)): it returned `Ok`, or it
    /// returned an error and the runtime's fenced failure was refused with the item
    /// found finished at that attempt (or gone). Not in `completed` or `failed`, which
    /// count the runtime's own writes.
    pub handler_finalized: u64,
    /// Polls that found nothing while queue limits held items back on time (G16,
    /// G17): a rate's next start, a deferral, a running lease's expiry; the loop then
    /// polled again at that time ([`Store::limits_wait`](tenure_core::Store::limits_wait)).
    /// Growing while queues have work means they wait on their limits.
    pub limit_waits: u64,
    /// Of the queues such a poll found held back, those whose due items all waited
    /// for a slot: every limit key they name, or the queue, at its concurrency limit
    /// (G16). Counted once per queue per empty poll.
    pub limit_saturated: u64,
    /// Of the queues such a poll found held back, those whose next start waited for a
    /// rate or a deferral (G17). Counted once per queue per empty poll.
    pub limit_rate_waits: u64,
    /// The waits of `limit_rate_waits` added up: how long each such queue's next start
    /// was held back, as the store answered at that poll.
    pub limit_rate_wait: std::time::Duration,
    /// Handlers running now.
    pub in_flight: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Metrics {
    pub(crate) polls: AtomicU64,
    pub(crate) claimed: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dead: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) renewed: AtomicU64,
    pub(crate) unconfirmed: AtomicU64,
    pub(crate) renewal_capped: AtomicU64,
    pub(crate) self_stopped: AtomicU64,
    pub(crate) timed_out: AtomicU64,
    pub(crate) released: AtomicU64,
    pub(crate) store_errors: AtomicU64,
    pub(crate) handler_finalized: AtomicU64,
    pub(crate) limit_waits: AtomicU64,
    pub(crate) limit_saturated: AtomicU64,
    pub(crate) limit_rate_waits: AtomicU64,
    pub(crate) limit_rate_wait_micros: AtomicU64,
    pub(crate) in_flight: AtomicU64,
}

pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Metrics {
    pub(crate) fn snapshot(&self) -> MetricsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsSnapshot {
            polls: get(&self.polls),
            claimed: get(&self.claimed),
            completed: get(&self.completed),
            failed: get(&self.failed),
            dead: get(&self.dead),
            panicked: get(&self.panicked),
            lost: get(&self.lost),
            renewed: get(&self.renewed),
            unconfirmed: get(&self.unconfirmed),
            renewal_capped: get(&self.renewal_capped),
            self_stopped: get(&self.self_stopped),
            timed_out: get(&self.timed_out),
            released: get(&self.released),
            store_errors: get(&self.store_errors),
            handler_finalized: get(&self.handler_finalized),
            limit_waits: get(&self.limit_waits),
            limit_saturated: get(&self.limit_saturated),
            limit_rate_waits: get(&self.limit_rate_waits),
            limit_rate_wait: std::time::Duration::from_micros(get(&self.limit_rate_wait_micros)),
            in_flight: get(&self.in_flight),
        }
    }

    pub(crate) fn handler_started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn handler_ended(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}
