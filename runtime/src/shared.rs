//! What every loop of a worker shares: the store, the handler, the settings, the
//! metrics, the stop signals, and one field per loop's own state, so a loop's code
//! shows what it reads and writes by the field it names:
//!
//! | field | state | written by |
//! | --- | --- | --- |
//! | `inflight` | [`Attempts`]: the attempts held and their renewal schedule | dispatch, supervise, renew, finalize, release |
//! | `room` | [`Room`]: how many leases the claim loop may hold and ask for | claim, dispatch, supervise, finalize, renew |
//! | `slots` | [`Slots`]: the ready queue, the slots and the runners | dispatch, shutdown |
//! | `outbox` | [`Outbox`]: outcomes waiting for the finalizer | supervise (posts), finalize (takes) |
//! | `standing` | [`Standing`]: heartbeat switch, first registration, role | instance, the [`Worker`](crate::Worker) handle |
//!
//! The composite actions here touch more than one of them: counting a lost lease or an
//! outcome by its queue (in-flight table and metric handles), posting an outcome (room
//! and outbox), and ending the claims (stop signals and runners).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use tenure_core::{LeaseToken, Store};

use crate::export::{Exported, QueueHandles};
use crate::handler::Handler;
use crate::inflight::Attempts;
use crate::metrics::{add, Metrics};
use crate::outbox::{Outbox, Outcome};
use crate::room::Room;
use crate::settings::Settings;
use crate::slots::Slots;
use crate::standing::{Role, Standing};

/// The state of one worker, shared by its loops and its handle.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) settings: Settings,
    pub(crate) metrics: Metrics,
    /// The handles of the `metrics` facade, registered once per queue.
    pub(crate) export: Exported,
    pub(crate) span: tracing::Span,
    pub(crate) stop_claiming: CancellationToken,
    /// Set as `stop_claiming` fires: read on every attempt, where a token's
    /// `is_cancelled` would take its lock.
    stopped_claiming: AtomicBool,
    /// Fires when the worker is dropped without a shutdown: every task ends at once.
    pub(crate) killed: CancellationToken,
    /// The attempts held, and their renewal schedule.
    pub(crate) inflight: Attempts,
    /// The claim loop's room counters.
    pub(crate) room: Room,
    /// The dispatch queue, slots and runners.
    pub(crate) slots: Slots,
    /// The finalizer's outbox.
    pub(crate) outbox: Outbox,
    /// The heartbeat switch and the maintenance role.
    pub(crate) standing: Standing,
    /// Finishes counted for the store's work history, not yet flushed.
    pub(crate) history: crate::history::Tallies,
}

impl Shared {
    /// The state of a worker about to start, with at most `max_runners` runners; its
    /// role is told through `role`.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        handler: Arc<dyn Handler>,
        settings: Settings,
        span: tracing::Span,
        max_runners: usize,
        role: watch::Sender<Role>,
    ) -> Self {
        let export = Exported::new(&settings.queues);
        let history = crate::history::Tallies::new(export.queues().map(|(q, _)| q));
        Shared {
            store,
            handler,
            export,
            history,
            metrics: Metrics::default(),
            span,
            stop_claiming: CancellationToken::new(),
            stopped_claiming: AtomicBool::new(false),
            killed: CancellationToken::new(),
            inflight: Attempts::default(),
            room: Room::new(&settings),
            slots: Slots::new(settings.concurrency, max_runners),
            outbox: Outbox::default(),
            standing: Standing::new(settings.heartbeat_enabled, role),
            settings,
        }
    }

    /// True once claiming has stopped (shutdown began, or the worker was dropped).
    pub(crate) fn claiming_stopped(&self) -> bool {
        self.stopped_claiming.load(Ordering::Acquire)
    }

    /// Stops claiming, and wakes the runners waiting for work so they end.
    pub(crate) fn end_claiming(&self) {
        self.stopped_claiming.store(true, Ordering::Release);
        self.stop_claiming.cancel();
        self.slots.work.notify_waiters();
    }

    /// Counts a "lease lost" answer once per attempt.
    pub(crate) fn count_lost(&self, token: &LeaseToken) {
        if let Some(queue) = self.inflight.first_lost(token) {
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
        self.export.at(self.inflight.queue(token))
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
        let map = self.inflight.lock();
        for t in tokens {
            let queue = map.entries.get(t).map_or(0, |e| e.queue);
            which(self.export.at(queue)).increment(1);
        }
    }

    /// Leaves an outcome for the finalizer (see [`Outbox::post`]), counted in the room
    /// until the store answers it.
    pub(crate) fn send_outcome(&self, outcome: Outcome) {
        self.room.posted();
        self.outbox.post(outcome);
    }
}
