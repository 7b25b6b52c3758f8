//! One attempt's life in the worker, in one place: the [`Control`] that its [`Job`](crate::Job)
//! and the worker's record of it share, the [`Phase`] it is in, and the
//! [`StopReason`] it was told to stop for. Every layer that moves an attempt on does
//! it through a method here, under the control's one lock, so a stop, a start, a
//! give-back and the handler's end cannot miss each other.
//!
//! ```text
//!  claimed --start--> started --finish--> handler done: its outcome goes to the
//!   (queued)            |                 finalizer (a timed-out one's failure too)
//!     |                 |
//!  give_back       stop(reason) --finish--> ended: outcome discarded (lease lost,
//!     |            (not once done)          self-stop: nothing written; shutdown:
//!     v                                     the lease is released)
//!  given back: never started (released, or forgotten with the rest of its stream run)
//! ```
//!
//! | transition | method | driven by |
//! | --- | --- | --- |
//! | claimed to started | [`Control::start`] | dispatch (a slot takes it) |
//! | claimed to given back | [`Control::give_back`] | renew (due before it started), dispatch (rest of a stream run), shutdown |
//! | told to stop | [`Control::stop_unless_done`], [`Control::stop_running`] | renew (lease lost), supervise (self-stop, timeout), shutdown |
//! | handler returned | [`Control::finish`] | supervise |
//! | handler gone without an outcome | [`Control::mark_ended`] | supervise (dropped, finalized by the handler) |
//! | finalize taken over | [`Control::take_over`] | the handler ([`Job::take_finalize`](crate::Job::take_finalize)) |
//!
//! The worker's other records of an attempt hold no phase of their own: the in-flight
//! entry (`inflight.rs`) its renewal schedule, the queued job (`slots.rs`) its place in
//! the ready queue, and the room (`room.rs`) only counts.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use tenure_core::Progress;
use tokio_util::sync::CancellationToken;

/// Why a running attempt was told to stop ([`Job::stop_reason`](crate::Job::stop_reason); [`Job::cancelled`](crate::Job::cancelled) resolves).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// A renewal was answered "lease lost": another attempt owns the item, or it was
    /// recovered or evicted (G3, G12). The outcome is discarded.
    LeaseLost,
    /// Half a lease passed since the last successful renewal (the self-stop). The
    /// attempt writes nothing; recovery re-queues the item and counts a stall.
    SelfStop,
    /// The worker is shutting down and the grace period ended; the lease is released so
    /// a peer takes the item at once. The outcome is discarded.
    Shutdown,
    /// The handler ran longer than the worker's
    /// [`handler_timeout`](crate::WorkerBuilder::handler_timeout). Whatever it returns
    /// afterwards, the attempt is recorded as a retryable failure (G5), so the item's
    /// `max_attempts` bounds how often it can time out.
    Timeout,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopReason::LeaseLost => "lease lost",
            StopReason::SelfStop => "self-stop",
            StopReason::Shutdown => "shutdown",
            StopReason::Timeout => "timeout",
        })
    }
}

/// How one attempt is told to stop, shared by its [`Job`](crate::Job) (and the job's clones) and the
/// worker's record of the attempt: one allocation per attempt.
///
/// The cancellation token is made only when someone waits on it
/// ([`Job::cancelled`](crate::Job::cancelled), [`Job::cancel_token`](crate::Job::cancel_token), or the runtime supervising a handler
/// that did not finish on its first poll): a handler that returns at once never
/// allocates one. The stop reason and the token live under one lock, so a stop and a
/// token made at the same moment cannot miss each other: a token made after the stop
/// is made cancelled.
#[derive(Debug, Default)]
pub(crate) struct Control {
    state: Mutex<ControlState>,
    /// Set by [`Job::take_finalize`](crate::Job::take_finalize).
    taken: AtomicBool,
}

#[derive(Debug, Default)]
struct ControlState {
    stop: Option<StopReason>,
    token: Option<CancellationToken>,
    /// Where the attempt is in its life (see [`Phase`]), kept under the same lock as
    /// the stop reason, so a stop and the handler's end cannot miss each other.
    phase: Phase,
    /// Progress the handler reported that no renewal has carried yet
    /// ([`Job::report_progress`](crate::Job::report_progress)); the latest wins.
    progress: Option<Progress>,
}

/// An attempt's life in the worker, from its claim to its handler's end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Phase {
    /// A slot took the attempt from the ready queue and runs (or ran) its handler.
    pub(crate) started: bool,
    /// Given back (or forgotten) while it waited for a slot: never to be started.
    pub(crate) given_back: bool,
    /// The handler has returned and its outcome is sent (or about to be) to the
    /// finalizer.
    pub(crate) handler_done: bool,
    /// The handler is gone: returned, or dropped (an abort included). Shutdown gives
    /// back only leases whose handler can no longer run.
    pub(crate) ended: bool,
}

impl Control {
    /// The control of a job made for testing a handler on its own: cancelling
    /// `cancel` cancels the attempt.
    pub(crate) fn with_token(cancel: CancellationToken) -> Self {
        Control {
            state: Mutex::new(ControlState {
                stop: None,
                token: Some(cancel),
                phase: Phase::default(),
                progress: None,
            }),
            taken: AtomicBool::new(false),
        }
    }

    fn state(&self) -> MutexGuard<'_, ControlState> {
        // Every update is a single field write: poisoning cannot leave it inconsistent.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Tells the attempt to stop for `reason` (the caller holds its lock), unless it
    /// was told before; true when this call stopped it.
    fn stop_locked(state: &mut ControlState, reason: StopReason) -> bool {
        if state.stop.is_some() {
            return false;
        }
        state.stop = Some(reason);
        if let Some(token) = &state.token {
            token.cancel();
        }
        true
    }

    /// Tells the attempt to stop for `reason` unless its handler already returned or
    /// it was told before; true when this call stopped it.
    pub(crate) fn stop_unless_done(&self, reason: StopReason) -> bool {
        let mut state = self.state();
        if state.phase.handler_done {
            return false;
        }
        Self::stop_locked(&mut state, reason)
    }

    /// Tells a started attempt whose handler has not returned to stop for `reason`
    /// (shutdown), unless it was told before; true when this call stopped it.
    pub(crate) fn stop_running(&self, reason: StopReason) -> bool {
        let mut state = self.state();
        if !state.phase.started || state.phase.handler_done {
            return false;
        }
        Self::stop_locked(&mut state, reason)
    }

    /// The attempt's phase now.
    pub(crate) fn phase(&self) -> Phase {
        self.state().phase
    }

    /// A slot takes the attempt to run it; false when it was given back first.
    pub(crate) fn start(&self) -> bool {
        let mut state = self.state();
        if state.phase.given_back {
            return false;
        }
        state.phase.started = true;
        true
    }

    /// Gives back an attempt still waiting for its slot, so no slot starts it; false
    /// when a slot started it first.
    pub(crate) fn give_back(&self) -> bool {
        let mut state = self.state();
        if state.phase.started {
            return false;
        }
        state.phase.given_back = true;
        true
    }

    /// Marks the handler gone (returned or dropped).
    pub(crate) fn mark_ended(&self) {
        self.state().phase.ended = true;
    }

    /// The handler has returned: marks it gone and, unless the attempt was told to
    /// stop for a reason that discards its outcome, done (its outcome goes to the
    /// finalizer). Returns the stop reason, if any, read under the same lock.
    pub(crate) fn finish(&self) -> Option<StopReason> {
        let mut state = self.state();
        state.phase.ended = true;
        match state.stop {
            // A timed-out attempt's failure is sent, like any handler's outcome.
            Some(StopReason::Timeout) | None => state.phase.handler_done = true,
            Some(_) => {}
        }
        state.stop
    }

    /// Why the attempt was told to stop, once it has been.
    pub(crate) fn stop_reason(&self) -> Option<StopReason> {
        self.state().stop
    }

    /// The attempt's cancellation token, made now if nobody asked for it before
    /// (cancelled already if the attempt was told to stop).
    pub(crate) fn token(&self) -> CancellationToken {
        let mut state = self.state();
        let stopped = state.stop.is_some();
        state
            .token
            .get_or_insert_with(|| {
                let token = CancellationToken::new();
                if stopped {
                    token.cancel();
                }
                token
            })
            .clone()
    }

    /// True once the attempt was told to stop, or its token was cancelled.
    pub(crate) fn is_cancelled(&self) -> bool {
        let state = self.state();
        state.stop.is_some() || state.token.as_ref().is_some_and(|t| t.is_cancelled())
    }

    /// Makes a control no job shares any more as good as new, to be used again.
    pub(crate) fn reset(&mut self) {
        *self
            .state
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = ControlState::default();
        *self.taken.get_mut() = false;
    }

    /// Keeps `progress` for the attempt's next renewal, replacing any not yet sent.
    pub(crate) fn report(&self, progress: Progress) {
        self.state().progress = Some(progress);
    }

    /// The progress to send with the next renewal, if the handler reported any since
    /// the last one.
    pub(crate) fn take_progress(&self) -> Option<Progress> {
        self.state().progress.take()
    }

    /// Puts back progress a renewal that failed did not carry, unless the handler
    /// reported newer progress meanwhile.
    pub(crate) fn restore_progress(&self, progress: Progress) {
        self.state().progress.get_or_insert(progress);
    }

    /// The handler takes the finalize over ([`Job::take_finalize`](crate::Job::take_finalize)).
    pub(crate) fn take_over(&self) {
        self.taken.store(true, Ordering::Release);
    }

    /// True once [`Job::take_finalize`](crate::Job::take_finalize) has been called.
    pub(crate) fn taken(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }
}
