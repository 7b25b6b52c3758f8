//! The running [`Worker`]: its shared state, start and graceful shutdown.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::keys::OwnerId;
use crate::model::{Lease, LeaseToken, TokenOutcome};
use crate::store::{DeregisterParams, ReleaseParams, Store};

use super::config::{Settings, WorkerBuilder};
use super::dispatch::Queued;
use super::export::{Exported, QueueHandles};
use super::finalize::Outcome;
use super::handler::{Control, Handler, StopReason};
use super::metrics::{add, Metrics, MetricsSnapshot};

/// How long shutdown waits for cancelled handlers to return before it drops them, and
/// again for dropped ones to end, before it releases their leases.
const STOP_WAIT: Duration = Duration::from_secs(1);
/// Most controls of finished attempts a worker keeps for its next claims.
const SPARE_CONTROLS: usize = 4096;
/// How long shutdown waits for the last finalize flush and the lease release.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// The worker's standing in maintenance (G13).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// No acquisition has answered yet (or maintenance is off).
    Starting,
    /// This worker holds the leader lease and runs maintenance.
    Leader {
        /// The lease's fencing term.
        term: u64,
    },
    /// Another instance holds the leader lease.
    Follower {
        /// The holder.
        holder: OwnerId,
    },
    /// The store could not answer the acquisition: unknown, never taken as Follower.
    Faulted {
        /// The store's error.
        error: String,
    },
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Starting => f.write_str("starting"),
            Role::Leader { term } => write!(f, "leader (term {term})"),
            Role::Follower { holder } => write!(f, "follower of {holder}"),
            Role::Faulted { error } => write!(f, "faulted: {error}"),
        }
    }
}

/// What a graceful shutdown did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// True when every handler finished within the grace period.
    pub drained: bool,
    /// Leases given back unfinished, so peers take the items at once.
    pub released: u64,
    /// Attempts neither finished nor released: a handler that would not stop, or
    /// outcomes and releases the store did not take. Their leases expire and are
    /// recovered.
    pub abandoned: u64,
    /// True when the instance left the registry at once. It stays, to be evicted as
    /// stale, when an attempt was abandoned: its lease must run out rather than be
    /// released under a handler that may still be running.
    pub deregistered: bool,
    /// The counters at the end.
    pub metrics: MetricsSnapshot,
}

/// One attempt this worker holds: from its claim until its outcome is written or
/// discarded.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The attempt's stop reason and cancellation token, shared with its job.
    pub(crate) control: Arc<Control>,
    /// When the last successful renewal (or the claim) was sent.
    pub(crate) renewed_at: Instant,
    /// The store refused further renewals (G4).
    pub(crate) capped: bool,
    /// A slot took the attempt from the ready queue and runs (or ran) its handler.
    pub(crate) started: bool,
    /// The handler has returned and its outcome waits for the finalizer.
    pub(crate) handler_done: bool,
    /// The handler is gone: returned, or dropped (an abort included). Shutdown gives
    /// back only leases whose handler can no longer run.
    pub(crate) ended: bool,
    /// A "lease lost" answer has been counted for this attempt.
    pub(crate) lost_counted: bool,
    /// A finalize call for this attempt failed without an answer; it may have
    /// committed (see the finalizer's `settle`).
    pub(crate) unanswered: bool,
    /// When the renewal loop is to renew this lease next: the schedule entry in
    /// [`InFlight::due`] that carries this instant is the live one.
    pub(crate) renew_due: Instant,
    /// The index of the item's queue among the worker's metric handles.
    pub(crate) queue: u32,
}

/// One lease's place in the renewal schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Due {
    pub(crate) at: Instant,
    pub(crate) token: LeaseToken,
}

/// The attempts this worker holds, and when each lease is to be renewed.
///
/// The schedule is a min-heap with lazy deletion: a finished attempt, or one renewed
/// since, leaves its old entry behind, and the renewal loop drops such entries when
/// they surface (an entry is live when its instant is the attempt's `renew_due`). So
/// starting, finishing and renewing an attempt each cost O(log n), and the renewal loop
/// never scans the attempts. The heap is rebuilt from the live entries when stale ones
/// outnumber them, which keeps it within twice the attempts held.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    pub(crate) entries: HashMap<LeaseToken, Entry, foldhash::fast::RandomState>,
    due: BinaryHeap<Reverse<Due>>,
    /// The instant the renewal loop sleeps until, as it last told; `None` when it
    /// sleeps with nothing due.
    pub(crate) armed: Option<Instant>,
}

impl InFlight {
    /// Schedules `token`'s next renewal at `at`; true when that is earlier than the
    /// renewal loop is armed for, so it must be woken to re-arm.
    pub(crate) fn schedule(&mut self, token: LeaseToken, at: Instant) -> bool {
        if let Some(e) = self.entries.get_mut(&token) {
            e.renew_due = at;
        }
        self.push_due(token, at)
    }

    /// [`InFlight::schedule`] for an entry whose `renew_due` is already `at` (one just
    /// inserted).
    pub(crate) fn push_due(&mut self, token: LeaseToken, at: Instant) -> bool {
        if self.due.len() > 2 * self.entries.len() + 1024 {
            self.due = self
                .entries
                .iter()
                .map(|(t, e)| {
                    Reverse(Due {
                        at: e.renew_due,
                        token: *t,
                    })
                })
                .collect();
        } else {
            self.due.push(Reverse(Due { at, token }));
        }
        let earlier = self.armed.is_none_or(|armed| at < armed);
        if earlier {
            self.armed = Some(at);
        }
        earlier
    }

    /// The earliest live schedule entry whose attempt passes `keep`, dropping stale
    /// entries and those `keep` refuses on the way.
    pub(crate) fn next_due(&mut self, keep: impl Fn(&Entry) -> bool) -> Option<Instant> {
        while let Some(Reverse(top)) = self.due.peek().copied() {
            match self.entries.get(&top.token) {
                Some(e) if e.renew_due == top.at && keep(e) => return Some(top.at),
                _ => {
                    self.due.pop();
                }
            }
        }
        None
    }

    /// Takes the live entries due by `by` whose attempt passes `keep`, earliest first,
    /// at most `max`. They leave the schedule until the caller schedules them again.
    pub(crate) fn take_due(
        &mut self,
        by: Instant,
        max: usize,
        keep: impl Fn(&Entry) -> bool,
    ) -> Vec<LeaseToken> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(at) = self.next_due(&keep) else {
                break;
            };
            if at > by {
                break;
            }
            if let Some(Reverse(top)) = self.due.pop() {
                out.push(top.token);
            }
        }
        out
    }
}

pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) settings: Settings,
    pub(crate) metrics: Metrics,
    /// The handles of the `metrics` facade, registered once per queue.
    pub(crate) export: Exported,
    pub(crate) inflight: Mutex<InFlight>,
    pub(crate) renew_wake: Notify,
    /// Claimed attempts waiting for a slot, in claim order, with when their claim was
    /// sent.
    pub(crate) ready: Mutex<VecDeque<Queued>>,
    /// Leases asked for by claims out, queued, or being worked on (see
    /// [`Shared::room`]).
    pub(crate) held: AtomicUsize,
    /// Runs started and not over: at most the concurrency (see the dispatch module).
    pub(crate) running: AtomicUsize,
    /// Runner tasks alive, at most `max_runners`.
    pub(crate) runners: AtomicUsize,
    pub(crate) max_runners: usize,
    /// Runners waiting for work, and what wakes them (claimed leases queued, or the end
    /// of claiming).
    pub(crate) idle_runners: AtomicUsize,
    pub(crate) work: Notify,
    /// Fires when shutdown stops waiting for handlers that ignore their cancellation:
    /// every handler still running is dropped at once.
    pub(crate) abort: CancellationToken,
    /// Notified when held leases are let go, so a claim loop waiting for room claims.
    pub(crate) room_freed: Notify,
    /// The moving average of handler run times, in microseconds (or
    /// [`UNKNOWN`](super::dispatch::UNKNOWN)).
    pub(crate) handler_micros: AtomicU64,
    pub(crate) tracker: TaskTracker,
    /// Controls of finished attempts, reset, for the next claims (at most
    /// [`SPARE_CONTROLS`]): a busy worker allocates none per attempt.
    pub(crate) spare_controls: Mutex<Vec<Arc<Control>>>,
    /// Outcomes waiting for the finalizer, and what tells it the first one is there.
    pub(crate) outbox: Mutex<Vec<Outcome>>,
    pub(crate) outbox_posted: Notify,
    pub(crate) stop_claiming: CancellationToken,
    /// Fires when the worker is dropped without a shutdown: every task ends at once.
    pub(crate) killed: CancellationToken,
    pub(crate) first_heartbeat: CancellationToken,
    /// The heartbeat off-switch ([`Worker::set_heartbeat`]): true while it beats.
    pub(crate) heartbeat_on: watch::Sender<bool>,
    pub(crate) role: watch::Sender<Role>,
    pub(crate) span: tracing::Span,
}

impl Shared {
    pub(crate) fn inflight(&self) -> MutexGuard<'_, InFlight> {
        // A panic while the lock is held cannot leave the map inconsistent (every
        // update is a single insert, remove or field write), so poisoning is ignored.
        self.inflight
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn ready(&self) -> MutexGuard<'_, VecDeque<Queued>> {
        // Each update is a single push or pop: poisoning cannot leave it inconsistent.
        self.ready
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Drops every handler still running, at its next `.await`.
    pub(crate) fn abort_slots(&self) {
        self.abort.cancel();
    }

    /// Stops claiming, and wakes the runners waiting for work so they end.
    pub(crate) fn end_claiming(&self) {
        self.stop_claiming.cancel();
        self.work.notify_waiters();
    }

    /// Tells the attempt to stop for `reason`, unless its handler already returned or
    /// it was told before. True when this call stopped it.
    pub(crate) fn stop_attempt(&self, token: &LeaseToken, reason: StopReason) -> bool {
        let map = self.inflight();
        match map.entries.get(token) {
            Some(e) if !e.handler_done => e.control.stop(reason),
            _ => false,
        }
    }

    /// True while `token`'s attempt is in flight and its outcome has not been sent to
    /// the finalizer (its handler runs, or it waits for a slot).
    pub(crate) fn outcome_pending(&self, token: &LeaseToken) -> bool {
        self.inflight()
            .entries
            .get(token)
            .is_some_and(|e| !e.handler_done)
    }

    /// Counts a "lease lost" answer once per attempt.
    pub(crate) fn count_lost(&self, token: &LeaseToken) {
        let (first, queue) = match self.inflight().entries.get_mut(token) {
            Some(e) if !e.lost_counted => {
                e.lost_counted = true;
                (true, e.queue)
            }
            Some(_) => (false, 0),
            None => (true, 0),
        };
        if first {
            add(&self.metrics.lost, 1);
            self.export.at(queue).lost.increment(1);
        }
    }

    /// The metric handles of `token`'s queue (no lock when the worker serves one
    /// queue).
    pub(crate) fn queue_of(&self, token: &LeaseToken) -> &QueueHandles {
        if self.export.single() {
            return self.export.at(0);
        }
        let queue = self.inflight().entries.get(token).map_or(0, |e| e.queue);
        self.export.at(queue)
    }

    /// Adds one to `which` counter of each token's queue: one increment in all when the
    /// worker serves one queue, else one lock for every token.
    pub(crate) fn tally<'a>(
        &self,
        tokens: impl IntoIterator<Item = &'a LeaseToken>,
        which: fn(&QueueHandles) -> &metrics::Counter,
    ) {
        if self.export.single() {
            let n = tokens.into_iter().count() as u64;
            if n > 0 {
                which(self.export.at(0)).increment(n);
            }
            return;
        }
        let map = self.inflight();
        for t in tokens {
            let queue = map.entries.get(t).map_or(0, |e| e.queue);
            which(self.export.at(queue)).increment(1);
        }
    }

    /// Marks `tokens` as sent in a finalize call that got no answer.
    pub(crate) fn mark_unanswered(&self, tokens: &[LeaseToken]) {
        let mut map = self.inflight();
        for t in tokens {
            if let Some(e) = map.entries.get_mut(t) {
                e.unanswered = true;
            }
        }
    }

    /// True when an earlier finalize call for `token` got no answer.
    pub(crate) fn was_unanswered(&self, token: &LeaseToken) -> bool {
        self.inflight()
            .entries
            .get(token)
            .is_some_and(|e| e.unanswered)
    }

    pub(crate) fn remove(&self, token: &LeaseToken) {
        self.inflight().entries.remove(token);
    }

    /// Forgets every attempt of `tokens` under one lock; their controls that no job
    /// shares any more are kept for the next claims.
    pub(crate) fn remove_all<'a>(&self, tokens: impl IntoIterator<Item = &'a LeaseToken>) {
        let mut spare = Vec::new();
        {
            let mut map = self.inflight();
            for t in tokens {
                if let Some(e) = map.entries.remove(t) {
                    spare.push(e.control);
                }
            }
        }
        self.recycle_controls(spare);
    }

    /// Keeps the controls of `spare` that nothing else holds (up to
    /// [`SPARE_CONTROLS`]), reset, for [`Shared::controls`] to hand out again.
    fn recycle_controls(&self, spare: Vec<Arc<Control>>) {
        let mut reset: Vec<Arc<Control>> = spare
            .into_iter()
            .filter_map(|mut c| {
                let unshared = Arc::get_mut(&mut c)?;
                unshared.reset();
                Some(c)
            })
            .collect();
        if reset.is_empty() {
            return;
        }
        let mut pool = self
            .spare_controls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let room = SPARE_CONTROLS.saturating_sub(pool.len());
        reset.truncate(room);
        pool.append(&mut reset);
    }

    /// `n` fresh controls for newly claimed attempts: kept ones first, under one lock,
    /// then new ones.
    pub(crate) fn controls(&self, n: usize) -> Vec<Arc<Control>> {
        let mut controls = {
            let mut pool = self
                .spare_controls
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let keep = pool.len().saturating_sub(n);
            pool.split_off(keep)
        };
        controls.reserve(n - controls.len());
        while controls.len() < n {
            controls.push(Arc::new(Control::default()));
        }
        controls
    }

    /// Leaves an outcome for the finalizer; wakes it when the outbox was empty (it
    /// takes everything there at once, so later outcomes need no wake-up of their own).
    pub(crate) fn send_outcome(&self, outcome: Outcome) {
        let first = {
            let mut outbox = self
                .outbox
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            outbox.push(outcome);
            outbox.len() == 1
        };
        if first {
            self.outbox_posted.notify_one();
        }
    }

    /// Moves every outcome waiting in the outbox to the end of `batch`; true when
    /// there was any.
    pub(crate) fn take_outcomes(&self, batch: &mut VecDeque<Outcome>) -> bool {
        let mut outbox = self
            .outbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if outbox.is_empty() {
            return false;
        }
        batch.extend(outbox.drain(..));
        true
    }
}

/// A running worker on tokio: claims from its queues for its free slots, runs the
/// handler on each item, renews leases, writes outcomes in fenced batches, heartbeats,
/// and (as leader) runs maintenance.
///
/// Build one with [`Worker::builder`]. Stop it with [`Worker::shutdown`]; dropping a
/// worker without shutting it down stops every task at once, as a crash would: its
/// leases expire and are recovered by peers.
pub struct Worker {
    shared: Arc<Shared>,
    claim: Option<JoinHandle<()>>,
    renew: Option<JoinHandle<()>>,
    finalize: Option<JoinHandle<()>>,
    heartbeat: Option<JoinHandle<()>>,
    maintenance: Option<JoinHandle<()>>,
    stop_background: CancellationToken,
    drain_finalizer: CancellationToken,
    role: watch::Receiver<Role>,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("instance", &self.shared.settings.instance)
            .field("store", &self.shared.store.name())
            .field("queues", &self.shared.settings.queues)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// Starts building a worker on `store`: any [`Store`], including an
    /// `Arc<dyn Store>` chosen at run time.
    pub fn builder(store: impl Store) -> WorkerBuilder {
        WorkerBuilder::new(Arc::new(store))
    }

    pub(crate) fn start(
        store: Arc<dyn Store>,
        handler: Arc<dyn Handler>,
        settings: Settings,
    ) -> Worker {
        // No span at all when no subscriber wants it: every task of the worker enters
        // it on each poll.
        let span = if tracing::span_enabled!(tracing::Level::INFO) {
            tracing::info_span!(
                "tenure.worker",
                instance = %settings.instance,
                store = store.name(),
            )
        } else {
            tracing::Span::none()
        };
        // One runner per thread of the runtime at most: more could not run at once.
        let threads = tokio::runtime::Handle::try_current()
            .map_or(1, |h| h.metrics().num_workers())
            .max(1);
        let max_runners = threads.min(settings.concurrency);
        let (role_tx, role) = watch::channel(Role::Starting);
        let settings_heartbeat = settings.heartbeat_enabled;
        let export = Exported::new(&settings.queues);
        let shared = Arc::new(Shared {
            store,
            handler,
            ready: Mutex::new(VecDeque::new()),
            held: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            runners: AtomicUsize::new(0),
            max_runners,
            idle_runners: AtomicUsize::new(0),
            work: Notify::new(),
            abort: CancellationToken::new(),
            room_freed: Notify::new(),
            handler_micros: AtomicU64::new(super::dispatch::UNKNOWN),
            settings,
            metrics: Metrics::default(),
            export,
            inflight: Mutex::new(InFlight::default()),
            renew_wake: Notify::new(),
            tracker: TaskTracker::new(),
            spare_controls: Mutex::new(Vec::new()),
            outbox: Mutex::new(Vec::new()),
            outbox_posted: Notify::new(),
            stop_claiming: CancellationToken::new(),
            killed: CancellationToken::new(),
            first_heartbeat: CancellationToken::new(),
            heartbeat_on: watch::Sender::new(settings_heartbeat),
            role: role_tx,
            span: span.clone(),
        });
        let stop_background = CancellationToken::new();
        let drain_finalizer = CancellationToken::new();
        let spawn = |f: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>| {
            Some(tokio::spawn(f.instrument(span.clone())))
        };
        let heartbeat = spawn(Box::pin(super::instance::heartbeat_loop(
            Arc::clone(&shared),
            stop_background.clone(),
        )));
        let maintenance = if shared.settings.maintenance {
            spawn(Box::pin(super::instance::maintenance_loop(
                Arc::clone(&shared),
                stop_background.clone(),
            )))
        } else {
            None
        };
        let renew = spawn(Box::pin(super::renew::renew_loop(
            Arc::clone(&shared),
            stop_background.clone(),
        )));
        let finalize = spawn(Box::pin(super::finalize::finalize_loop(
            Arc::clone(&shared),
            drain_finalizer.clone(),
        )));
        let claim = spawn(Box::pin(super::claim::claim_loop(Arc::clone(&shared))));
        tracing::info!(parent: &span, queues = ?shared.settings.queues, concurrency = shared.settings.concurrency, lease = ?shared.settings.lease, "worker started");
        Worker {
            shared,
            claim,
            renew,
            finalize,
            heartbeat,
            maintenance,
            stop_background,
            drain_finalizer,
            role,
        }
    }

    /// This worker's instance id: the owner of its leases.
    pub fn instance(&self) -> &OwnerId {
        &self.shared.settings.instance
    }

    /// The counters now.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.shared.metrics.snapshot()
    }

    /// Turns the instance heartbeat off (`false`) or back on (`true`) while the worker
    /// runs: the seed's off-switch for a graceful drain.
    ///
    /// # Behavior
    /// - Off: no heartbeat is sent from now on (one already out completes). Once the
    ///   instance has been silent for `stale_after`, any peer's maintenance may evict
    ///   it and release all its leases at once (G12), so peers take its items; its own
    ///   handlers then learn "lease lost" at their next renewal and their outcomes are
    ///   discarded (G3). Claiming goes on unless the worker is partitioned (an evicted
    ///   instance is refused partitioned claims, and does not register again while
    ///   the heartbeat is off) or shut down.
    /// - On: heartbeats at once, registering again if it was evicted, then on its
    ///   interval.
    /// - Setting the state it already has does nothing.
    pub fn set_heartbeat(&self, enabled: bool) {
        let changed = self.shared.heartbeat_on.send_if_modified(|on| {
            let changed = *on != enabled;
            *on = enabled;
            changed
        });
        if changed {
            tracing::info!(parent: &self.shared.span, event = "heartbeat", enabled, "instance heartbeat switched");
        }
    }

    /// Whether the instance heartbeat is on (see [`Worker::set_heartbeat`]).
    pub fn heartbeat_enabled(&self) -> bool {
        *self.shared.heartbeat_on.borrow()
    }

    /// Leader, Follower, Faulted (the store did not answer) or Starting.
    pub fn role(&self) -> Role {
        self.role.borrow().clone()
    }

    /// A receiver that sees every change of [`Worker::role`].
    pub fn role_changes(&self) -> watch::Receiver<Role> {
        self.role.clone()
    }

    /// Stops gracefully: stops claiming, waits up to `grace` for running handlers,
    /// writes their outcomes, then cancels the handlers still running and releases
    /// their leases so peers take the items at once. Resigns the leader lease if held.
    pub async fn shutdown(mut self, grace: Duration) -> ShutdownReport {
        let shared = Arc::clone(&self.shared);
        let span = shared.span.clone();
        async move {
            tracing::info!(?grace, "shutdown: claiming stops");
            let deadline = Instant::now() + grace;
            shared.end_claiming();
            if let Some(mut claim) = self.claim.take() {
                if tokio::time::timeout_at(deadline, &mut claim).await.is_err() {
                    claim.abort();
                }
            }
            shared.tracker.close();
            let drained = tokio::time::timeout_at(deadline, shared.tracker.wait())
                .await
                .is_ok();
            let mut to_release = Vec::new();
            let mut abandoned = 0u64;
            if !drained {
                let stopped: Vec<LeaseToken> = {
                    let map = shared.inflight();
                    map.entries.iter()
                        .filter(|(_, e)| e.started && !e.handler_done && e.control.stop(StopReason::Shutdown))
                        .map(|(t, _)| *t)
                        .collect()
                };
                tracing::info!(running = stopped.len(), "shutdown: grace over, cancelling handlers");
                if tokio::time::timeout(STOP_WAIT, shared.tracker.wait()).await.is_err() {
                    shared.abort_slots();
                    let _ = tokio::time::timeout(STOP_WAIT, shared.tracker.wait()).await;
                }
                let map = shared.inflight();
                for t in stopped {
                    match map.entries.get(&t) {
                        Some(e) if e.ended => to_release.push(t),
                        Some(_) => {
                            tracing::warn!(item = %t.id, attempt = t.attempt, "a handler would not stop; its lease is left to expire");
                            abandoned += 1;
                        }
                        // Its handler took the finalize over and returned Ok: nothing
                        // to give back.
                        None => {}
                    }
                }
            }
            self.drain_finalizer.cancel();
            if let Some(mut finalize) = self.finalize.take() {
                if tokio::time::timeout(FLUSH_WAIT, &mut finalize).await.is_err() {
                    finalize.abort();
                }
            }
            abandoned += shared
                .inflight()
                .entries
                .values()
                .filter(|e| e.handler_done)
                .count() as u64;
            let (released, unanswered) = release(&shared, &to_release).await;
            abandoned += unanswered;
            self.stop_background.cancel();
            for task in [self.renew.take(), self.heartbeat.take(), self.maintenance.take()]
                .into_iter()
                .flatten()
            {
                let mut task = task;
                if tokio::time::timeout(FLUSH_WAIT, &mut task).await.is_err() {
                    task.abort();
                }
            }
            let deregistered = abandoned == 0 && deregister(&shared).await;
            let report = ShutdownReport {
                drained,
                released,
                abandoned,
                deregistered,
                metrics: shared.metrics.snapshot(),
            };
            tracing::info!(drained, released, abandoned, "shutdown complete");
            report
        }
        .instrument(span)
        .await
    }
}

/// Removes this instance from the registry (its heartbeat has stopped); true when the
/// store took it.
async fn deregister(shared: &Shared) -> bool {
    let call = shared
        .store
        .instance_deregister(DeregisterParams::new(shared.settings.instance.clone()));
    match tokio::time::timeout(FLUSH_WAIT, call).await {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "deregistration failed; the instance will be evicted as stale");
            false
        }
        Err(_) => {
            tracing::warn!("deregistration timed out; the instance will be evicted as stale");
            false
        }
    }
}

/// Gives `tokens` back in as few calls as the store's batch limit allows; returns how
/// many the store accepted and how many calls went unanswered.
pub(crate) async fn release(shared: &Shared, tokens: &[LeaseToken]) -> (u64, u64) {
    let mut accepted = 0u64;
    let mut unanswered = 0u64;
    for chunk in tokens.chunks(shared.settings.limits.max_batch.max(1)) {
        let call = shared.store.release(ReleaseParams::new(chunk.to_vec()));
        match tokio::time::timeout(FLUSH_WAIT, call).await {
            Ok(Ok(outcomes)) => {
                for (t, o) in chunk.iter().zip(outcomes) {
                    match o {
                        TokenOutcome::Accepted => {
                            accepted += 1;
                            tracing::info!(event = "release", item = %t.id, attempt = t.attempt, "lease released");
                        }
                        TokenOutcome::LeaseLost => {
                            shared.count_lost(t);
                            tracing::warn!(event = "lost", item = %t.id, attempt = t.attempt, "lease lost before release");
                        }
                    }
                }
            }
            Ok(Err(e)) => {
                add(&shared.metrics.store_errors, 1);
                unanswered += chunk.len() as u64;
                tracing::warn!(error = %e, count = chunk.len(), "release failed; the leases will expire");
            }
            Err(_) => {
                add(&shared.metrics.store_errors, 1);
                unanswered += chunk.len() as u64;
                tracing::warn!(
                    count = chunk.len(),
                    "release timed out; the leases will expire"
                );
            }
        }
    }
    shared.remove_all(tokens);
    add(&shared.metrics.released, accepted);
    (accepted, unanswered)
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shared.killed.cancel();
        self.shared.end_claiming();
        self.stop_background.cancel();
        self.drain_finalizer.cancel();
        for task in [
            self.claim.take(),
            self.renew.take(),
            self.finalize.take(),
            self.heartbeat.take(),
            self.maintenance.take(),
        ]
        .into_iter()
        .flatten()
        {
            task.abort();
        }
        self.shared.abort_slots();
    }
}

/// Releases leases claimed after shutdown began (the claim call was already out).
pub(crate) async fn release_unstarted(shared: &Shared, leases: Vec<Lease>) {
    let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
    release(shared, &tokens).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ItemId;

    fn entry(due: Instant) -> Entry {
        Entry {
            control: Arc::new(Control::default()),
            renewed_at: due,
            capped: false,
            started: true,
            handler_done: false,
            ended: false,
            lost_counted: false,
            unanswered: false,
            renew_due: due,
            queue: 0,
        }
    }

    fn token() -> LeaseToken {
        LeaseToken {
            id: ItemId::new(),
            attempt: 1,
        }
    }

    #[test]
    fn the_schedule_hands_out_due_leases_earliest_first_and_skips_finished_and_renewed_ones() {
        let base = Instant::now();
        let at = |ms: u64| base + Duration::from_millis(ms);
        let mut map = InFlight::default();
        let tokens: Vec<LeaseToken> = (0..5).map(|_| token()).collect();
        for (i, t) in tokens.iter().enumerate() {
            let due = at(100 * (5 - i as u64));
            map.entries.insert(*t, entry(due));
            map.schedule(*t, due);
        }
        // tokens[4] is due first (100 ms), tokens[0] last (500 ms).
        map.entries.remove(&tokens[4]); // finished
        map.schedule(tokens[3], at(1_000)); // renewed: its 200 ms entry is stale
        assert_eq!(map.next_due(|_| true), Some(at(300)));
        let due = map.take_due(at(450), 10, |_| true);
        assert_eq!(due, vec![tokens[2], tokens[1]]);
        assert_eq!(map.take_due(at(2_000), 1, |_| true), vec![tokens[0]]);
        assert_eq!(map.take_due(at(2_000), 10, |_| true), vec![tokens[3]]);
        assert_eq!(map.next_due(|_| true), None);
    }

    #[test]
    fn the_schedule_stays_within_twice_the_leases_held_however_many_come_and_go() {
        let base = Instant::now();
        let mut map = InFlight::default();
        let held: Vec<LeaseToken> = (0..10).map(|_| token()).collect();
        for t in &held {
            map.entries.insert(*t, entry(base));
            map.schedule(*t, base);
        }
        for i in 0..100_000u64 {
            let t = token();
            let due = base + Duration::from_micros(i);
            map.entries.insert(t, entry(due));
            map.schedule(t, due);
            assert!(map.due.len() <= 2 * map.entries.len() + 1025);
            map.entries.remove(&t);
        }
        let mut due = map.take_due(base + Duration::from_secs(1), 100, |_| true);
        due.sort();
        let mut expected = held;
        expected.sort();
        assert_eq!(due, expected, "only the leases still held come out");
    }

    #[test]
    fn a_lease_scheduled_earlier_than_the_loop_is_armed_for_asks_for_a_wake() {
        let base = Instant::now();
        let mut map = InFlight::default();
        let (a, b, c) = (token(), token(), token());
        for t in [a, b, c] {
            map.entries.insert(t, entry(base));
        }
        assert!(
            map.schedule(a, base + Duration::from_secs(10)),
            "nothing armed yet"
        );
        assert!(
            !map.schedule(b, base + Duration::from_secs(20)),
            "later than armed"
        );
        assert!(
            map.schedule(c, base + Duration::from_secs(5)),
            "earlier than armed"
        );
    }
}
