//! The dispatch state: the ready queue of claimed attempts, the count of runs that
//! hold a slot, and the runner tasks that work the queue (see the dispatch module for
//! how they run).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use tenure_core::Timestamp;

use crate::handler::Job;

/// A claimed attempt waiting in the ready queue: its job, and when the claim that
/// leased it was sent.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) job: Job,
    pub(crate) sent: Sent,
}

/// When a claim call was sent: on tokio's clock (the self-stop counts from it), and
/// on the wall clock, derived once per claim answer, so an attempt's pickup latency
/// needs no wall clock reading of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sent {
    pub(crate) at: Instant,
    pub(crate) wall: Timestamp,
}

/// The ready queue and the slots and runners that work it.
#[derive(Debug)]
pub(crate) struct Slots {
    /// Claimed attempts waiting for a slot, in claim order, with when their claim was
    /// sent.
    ready: Mutex<VecDeque<Queued>>,
    /// Runs started and not over: at most the concurrency (see the dispatch module).
    running: AtomicUsize,
    concurrency: usize,
    /// Runner tasks alive, at most `max_runners`.
    runners: AtomicUsize,
    max_runners: usize,
    /// Runners waiting for work, and what wakes them (claimed leases queued, or the end
    /// of claiming).
    pub(crate) idle_runners: AtomicUsize,
    pub(crate) work: Notify,
    /// Fires when shutdown stops waiting for handlers that ignore their cancellation:
    /// every handler still running is dropped at once.
    pub(crate) abort: CancellationToken,
    /// Every runner and slot task, for shutdown to wait on.
    pub(crate) tracker: TaskTracker,
}

impl Slots {
    /// An empty queue, `concurrency` free slots and no runner yet (at most
    /// `max_runners`).
    pub(crate) fn new(concurrency: usize, max_runners: usize) -> Self {
        Slots {
            ready: Mutex::new(VecDeque::new()),
            running: AtomicUsize::new(0),
            concurrency,
            runners: AtomicUsize::new(0),
            max_runners,
            idle_runners: AtomicUsize::new(0),
            work: Notify::new(),
            abort: CancellationToken::new(),
            tracker: TaskTracker::new(),
        }
    }

    /// The ready queue, locked.
    pub(crate) fn ready(&self) -> MutexGuard<'_, VecDeque<Queued>> {
        // Each update is a single push or pop: poisoning cannot leave it inconsistent.
        self.ready
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Drops every handler still running, at its next `.await`.
    pub(crate) fn abort_all(&self) {
        self.abort.cancel();
    }

    /// Counts one more runner, unless as many run as the worker may have; true when
    /// the caller is to start it.
    pub(crate) fn add_runner(&self) -> bool {
        let mut runners = self.runners.load(Ordering::Acquire);
        while runners < self.max_runners {
            match self.runners.compare_exchange(
                runners,
                runners + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => runners = now,
            }
        }
        false
    }

    /// A runner ended.
    pub(crate) fn runner_ended(&self) {
        self.runners.fetch_sub(1, Ordering::AcqRel);
    }

    /// Takes one of the `concurrency` slots; false when every slot is taken.
    pub(crate) fn take_slot(&self) -> bool {
        let concurrency = self.concurrency;
        self.running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < concurrency).then_some(n + 1)
            })
            .is_ok()
    }

    /// Gives a slot back.
    pub(crate) fn free_slot(&self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }

    /// True when a run could be taken now: something is queued and a slot is free.
    pub(crate) fn can_take(&self) -> bool {
        self.running.load(Ordering::Acquire) < self.concurrency && !self.ready().is_empty()
    }
}
