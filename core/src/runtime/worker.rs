//! The running [`Worker`]: its shared state, start and graceful shutdown.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
/// discarded. Where its handler is (started, done, ended) lives in its
/// [`Control`](super::handler::Control), which the slot reaches without this map.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The attempt's stop reason, phase and cancellation token, shared with its job.
    pub(crate) control: Arc<Control>,
    /// When the last successful renewal (or the claim) was sent.
    pub(crate) renewed_at: Instant,
    /// The store refused further renewals (G4).
    pub(crate) capped: bool,
    /// A "lease lost" answer has been counted for this attempt.
    pub(crate) lost_counted: bool,
    /// A finalize call for this attempt failed without an answer; it may have
    /// committed (see the finalizer's `settle`).
    pub(crate) unanswered: bool,
    /// The renewal group the lease is scheduled in ([`GroupRef::NONE`] while it is
    /// out for renewal or not scheduled).
    pub(crate) group: GroupRef,
    /// The index of the item's queue among the worker's metric handles.
    pub(crate) queue: u32,
}

/// Which renewal group a lease belongs to: a slot in [`InFlight`]'s group table and
/// the sequence number of the group that held that slot when the lease joined it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupRef {
    slot: u32,
    seq: u64,
}

impl GroupRef {
    /// In no group.
    pub(crate) const NONE: GroupRef = GroupRef { slot: 0, seq: 0 };
}

/// Leases due for renewal at the same instant: those one claim answered (they share
/// the claim's send time), or those one renewal call renewed.
#[derive(Debug)]
struct Group {
    /// 0 while the slot is free.
    seq: u64,
    at: Instant,
    /// The leases that joined; those that left since (finished, or rescheduled) are
    /// skipped when the group comes due.
    tokens: Vec<LeaseToken>,
    /// How many of `tokens` still belong to the group.
    live: usize,
}

/// The attempts this worker holds, and when each lease is to be renewed.
///
/// Leases are scheduled in *groups* that share a due instant: one per claim answer,
/// one per renewal call, so the schedule costs one heap push per claim, not per
/// lease. The schedule is a min-heap of groups with lazy deletion: a group whose
/// leases have all left (finished, or renewed since) is freed at once, and its heap
/// entry dropped when it surfaces; a lease that left a group still live is skipped
/// when the group comes due. So the renewal loop only ever reads the groups that are
/// due, never the whole set of attempts. The heap is rebuilt from the live groups
/// when stale entries outnumber them, which keeps it within twice the live groups.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    pub(crate) entries: HashMap<LeaseToken, Entry, foldhash::fast::RandomState>,
    /// (due instant, group seq, group slot).
    due: BinaryHeap<Reverse<(Instant, u64, u32)>>,
    groups: Vec<Group>,
    free_groups: Vec<u32>,
    last_seq: u64,
    /// The instant the renewal loop sleeps until, as it last told; `None` when it
    /// sleeps with nothing due.
    pub(crate) armed: Option<Instant>,
}

impl InFlight {
    /// Records an attempt that is not yet scheduled for renewal.
    #[cfg(test)]
    pub(crate) fn insert(&mut self, token: LeaseToken, entry: Entry) {
        if let Some(old) = self.entries.insert(token, entry) {
            self.leave_group(old.group);
        }
    }

    /// Forgets `token`'s attempt (and its place in the renewal schedule).
    pub(crate) fn forget(&mut self, token: &LeaseToken) -> Option<Entry> {
        let e = self.entries.remove(token)?;
        self.leave_group(e.group);
        Some(e)
    }

    fn live_group(&mut self, g: GroupRef) -> Option<&mut Group> {
        if g.seq == 0 {
            return None;
        }
        let slot = usize::try_from(g.slot).ok()?;
        self.groups.get_mut(slot).filter(|group| group.seq == g.seq)
    }

    /// One lease left group `g`; the group is freed when none is left.
    fn leave_group(&mut self, g: GroupRef) {
        let Some(group) = self.live_group(g) else {
            return;
        };
        group.live -= 1;
        if group.live == 0 {
            group.seq = 0;
            group.tokens.clear();
            self.free_groups.push(g.slot);
        }
    }

    /// Records the attempts of one claim answer, all due for renewal at `at`, as one
    /// group; true when that is earlier than the renewal loop is armed for.
    pub(crate) fn insert_claimed(
        &mut self,
        claimed: impl IntoIterator<Item = (LeaseToken, Entry)>,
        at: Instant,
    ) -> bool {
        let (me, index) = self.new_group();
        let mut taken = std::mem::take(&mut self.groups[index].tokens);
        for (t, mut e) in claimed {
            e.group = me;
            if let Some(old) = self.entries.insert(t, e) {
                self.leave_group(old.group);
            }
            taken.push(t);
        }
        self.fill_group(me, index, taken, at)
    }

    /// A free group slot, and a new sequence number for the group to go in it.
    fn new_group(&mut self) -> (GroupRef, usize) {
        let slot = match self.free_groups.pop() {
            Some(slot) => slot,
            None => {
                self.groups.push(Group {
                    seq: 0,
                    // Set when the group is filled.
                    at: Instant::now(),
                    tokens: Vec::new(),
                    live: 0,
                });
                u32::try_from(self.groups.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.last_seq += 1;
        let index = usize::try_from(slot).unwrap_or(usize::MAX);
        (
            GroupRef {
                slot,
                seq: self.last_seq,
            },
            index,
        )
    }

    /// Puts `tokens` (each a lease that joined `me`) in the group's slot and
    /// schedules it at `at`; an empty group is freed at once.
    fn fill_group(
        &mut self,
        me: GroupRef,
        index: usize,
        tokens: Vec<LeaseToken>,
        at: Instant,
    ) -> bool {
        let live = tokens.len();
        let group = &mut self.groups[index];
        group.tokens = tokens;
        if live == 0 {
            self.free_groups.push(me.slot);
            return false;
        }
        group.seq = me.seq;
        group.at = at;
        group.live = live;
        self.push_due(at, me.seq, me.slot)
    }

    /// Schedules `token`'s next renewal at `at`, alone; true when that is earlier
    /// than the renewal loop is armed for, so it must be woken to re-arm.
    #[cfg(test)]
    pub(crate) fn schedule(&mut self, token: LeaseToken, at: Instant) -> bool {
        self.schedule_all([token], at)
    }

    /// Schedules the next renewal of every held attempt of `tokens` at `at`, as one
    /// group (each leaves the group it was in); true when that is earlier than the
    /// renewal loop is armed for, so it must be woken to re-arm.
    pub(crate) fn schedule_all(
        &mut self,
        tokens: impl IntoIterator<Item = LeaseToken>,
        at: Instant,
    ) -> bool {
        let (me, index) = self.new_group();
        let mut taken = std::mem::take(&mut self.groups[index].tokens);
        for t in tokens {
            let Some(e) = self.entries.get_mut(&t) else {
                continue;
            };
            if e.group == me {
                continue;
            }
            let old = std::mem::replace(&mut e.group, me);
            self.leave_group(old);
            taken.push(t);
        }
        self.fill_group(me, index, taken, at)
    }

    fn push_due(&mut self, at: Instant, seq: u64, slot: u32) -> bool {
        let live_groups = self.groups.len() - self.free_groups.len();
        if self.due.len() > 2 * live_groups + 1024 {
            self.due = self
                .groups
                .iter()
                .enumerate()
                .filter(|(_, g)| g.seq != 0)
                .map(|(i, g)| Reverse((g.at, g.seq, u32::try_from(i).unwrap_or(u32::MAX))))
                .collect();
        } else {
            self.due.push(Reverse((at, seq, slot)));
        }
        let earlier = self.armed.is_none_or(|armed| at < armed);
        if earlier {
            self.armed = Some(at);
        }
        earlier
    }

    /// The due instant of the earliest live group, dropping stale heap entries on the
    /// way. (A live group whose leases have all stopped being renewable comes due
    /// all the same; [`InFlight::take_due`] then finds nothing in it.)
    pub(crate) fn next_due(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, seq, slot))) = self.due.peek().copied() {
            if self.live_group(GroupRef { slot, seq }).is_some() {
                return Some(at);
            }
            self.due.pop();
        }
        None
    }

    /// Takes the held leases due by `by` whose attempt passes `keep`, earliest group
    /// first, at most `max`. They leave the schedule until the caller schedules them
    /// again; so do the due ones `keep` refuses.
    pub(crate) fn take_due(
        &mut self,
        by: Instant,
        max: usize,
        keep: impl Fn(&Entry) -> bool,
    ) -> Vec<LeaseToken> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(at) = self.next_due() else {
                break;
            };
            if at > by {
                break;
            }
            let Some(Reverse((_, seq, slot))) = self.due.peek().copied() else {
                break;
            };
            let me = GroupRef { slot, seq };
            let index = usize::try_from(slot).unwrap_or(usize::MAX);
            while out.len() < max {
                let Some(t) = self.groups[index].tokens.pop() else {
                    break;
                };
                let Some(e) = self.entries.get_mut(&t) else {
                    continue;
                };
                if e.group != me {
                    continue;
                }
                e.group = GroupRef::NONE;
                let wanted = keep(e);
                let group = &mut self.groups[index];
                group.live -= 1;
                if wanted {
                    out.push(t);
                }
                if group.live == 0 {
                    break;
                }
            }
            let group = &mut self.groups[index];
            if group.live == 0 || group.tokens.is_empty() {
                group.seq = 0;
                group.live = 0;
                group.tokens.clear();
                self.free_groups.push(slot);
                self.due.pop();
            }
        }
        out
    }

    /// How many heap entries the schedule keeps (for tests of its bound).
    #[cfg(test)]
    fn schedule_len(&self) -> usize {
        self.due.len()
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
    /// Outcomes left for the finalizer that the store has not answered yet: their
    /// leases are still held in the store (see [`Shared::room`]).
    pub(crate) unflushed: AtomicUsize,
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
    /// Notified when held leases are let go down to `wake_at_held`, so a claim loop
    /// waiting for room claims.
    pub(crate) room_freed: Notify,
    /// The held count at or below which letting leases go wakes the claim loop (set
    /// by the loop before it waits: see [`Shared::wake_at_room`]).
    pub(crate) wake_at_held: AtomicUsize,
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
    /// Set as `stop_claiming` fires: read on every attempt, where a token's
    /// `is_cancelled` would take its lock.
    stopped_claiming: AtomicBool,
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

    /// True once claiming has stopped (shutdown began, or the worker was dropped).
    pub(crate) fn claiming_stopped(&self) -> bool {
        self.stopped_claiming.load(Ordering::Acquire)
    }

    /// Stops claiming, and wakes the runners waiting for work so they end.
    pub(crate) fn end_claiming(&self) {
        self.stopped_claiming.store(true, Ordering::Release);
        self.stop_claiming.cancel();
        self.work.notify_waiters();
    }

    /// Tells the attempt to stop for `reason`, unless its handler already returned or
    /// it was told before. True when this call stopped it.
    pub(crate) fn stop_attempt(&self, token: &LeaseToken, reason: StopReason) -> bool {
        let map = self.inflight();
        match map.entries.get(token) {
            Some(e) => e.control.stop_unless_done(reason),
            None => false,
        }
    }

    /// True while `token`'s attempt is in flight and its outcome has not been sent to
    /// the finalizer (its handler runs, or it waits for a slot).
    pub(crate) fn outcome_pending(&self, token: &LeaseToken) -> bool {
        self.inflight()
            .entries
            .get(token)
            .is_some_and(|e| !e.control.phase().handler_done)
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
        self.inflight().forget(token);
    }

    /// Forgets every attempt of `tokens` under one lock; their controls that no job
    /// shares any more are kept for the next claims.
    pub(crate) fn remove_all<'a>(&self, tokens: impl IntoIterator<Item = &'a LeaseToken>) {
        let mut spare = Vec::new();
        {
            let mut map = self.inflight();
            for t in tokens {
                if let Some(e) = map.forget(t) {
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
        self.unflushed.fetch_add(1, Ordering::SeqCst);
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
            unflushed: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            runners: AtomicUsize::new(0),
            max_runners,
            idle_runners: AtomicUsize::new(0),
            work: Notify::new(),
            abort: CancellationToken::new(),
            room_freed: Notify::new(),
            wake_at_held: AtomicUsize::new(usize::MAX),
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
            stopped_claiming: AtomicBool::new(false),
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
                        .filter(|(_, e)| e.control.stop_running(StopReason::Shutdown))
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
                        Some(e) if e.control.phase().ended => to_release.push(t),
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
                .filter(|e| e.control.phase().handler_done)
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
                        TokenOutcome::LeaseLost | TokenOutcome::OutOfOrder => {
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
        let control = Arc::new(Control::default());
        control.start();
        Entry {
            control,
            renewed_at: due,
            capped: false,
            lost_counted: false,
            unanswered: false,
            group: GroupRef::NONE,
            queue: 0,
        }
    }

    fn token() -> LeaseToken {
        LeaseToken::new(ItemId::new(), 1, crate::LeaseId::mint())
    }

    #[test]
    fn the_schedule_hands_out_due_leases_earliest_first_and_skips_finished_and_renewed_ones() {
        let base = Instant::now();
        let at = |ms: u64| base + Duration::from_millis(ms);
        let mut map = InFlight::default();
        let tokens: Vec<LeaseToken> = (0..5).map(|_| token()).collect();
        for (i, t) in tokens.iter().enumerate() {
            let due = at(100 * (5 - i as u64));
            map.insert(*t, entry(due));
            map.schedule(*t, due);
        }
        // tokens[4] is due first (100 ms), tokens[0] last (500 ms).
        map.forget(&tokens[4]); // finished
        map.schedule(tokens[3], at(1_000)); // renewed: its 200 ms entry is stale
        assert_eq!(map.next_due(), Some(at(300)));
        let due = map.take_due(at(450), 10, |_| true);
        assert_eq!(due, vec![tokens[2], tokens[1]]);
        assert_eq!(map.take_due(at(2_000), 1, |_| true), vec![tokens[0]]);
        assert_eq!(map.take_due(at(2_000), 10, |_| true), vec![tokens[3]]);
        assert_eq!(map.next_due(), None);
    }

    #[test]
    fn the_schedule_stays_within_twice_the_leases_held_however_many_come_and_go() {
        let base = Instant::now();
        let mut map = InFlight::default();
        let held: Vec<LeaseToken> = (0..10).map(|_| token()).collect();
        for t in &held {
            map.insert(*t, entry(base));
            map.schedule(*t, base);
        }
        for i in 0..100_000u64 {
            let t = token();
            let due = base + Duration::from_micros(i);
            map.insert(t, entry(due));
            map.schedule(t, due);
            assert!(map.schedule_len() <= 2 * map.entries.len() + 1025);
            map.forget(&t);
        }
        let mut due = map.take_due(base + Duration::from_secs(1), 100, |_| true);
        due.sort();
        let mut expected = held;
        expected.sort();
        assert_eq!(due, expected, "only the leases still held come out");
    }

    #[test]
    fn the_leases_of_one_claim_share_one_schedule_entry_and_come_due_in_calls_of_the_limit() {
        let base = Instant::now();
        let mut map = InFlight::default();
        let tokens: Vec<LeaseToken> = (0..10).map(|_| token()).collect();
        for t in &tokens {
            map.insert(*t, entry(base));
        }
        map.schedule_all(tokens.iter().copied(), base);
        assert_eq!(map.schedule_len(), 1, "one entry for the whole claim");
        map.forget(&tokens[0]); // finished before its renewal
        let mut due = map.take_due(base, 4, |_| true);
        assert_eq!(due.len(), 4, "no more than the limit in one call");
        due.extend(map.take_due(base, 100, |_| true));
        due.sort();
        let mut expected = tokens[1..].to_vec();
        expected.sort();
        assert_eq!(
            due, expected,
            "each held lease once, the finished one skipped"
        );
        assert_eq!(map.next_due(), None);
    }

    #[test]
    fn a_lease_scheduled_earlier_than_the_loop_is_armed_for_asks_for_a_wake() {
        let base = Instant::now();
        let mut map = InFlight::default();
        let (a, b, c) = (token(), token(), token());
        for t in [a, b, c] {
            map.insert(t, entry(base));
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
