//! The finalizer's outbox: the outcomes finished handlers leave for it, and how many
//! flushes it keeps out at once.
//!
//! The slots post (one short lock each, and a wake-up only for the first outcome after
//! the finalizer last emptied it); the finalizer takes everything there under one lock.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::Notify;

use tenure_core::{Failure, LeaseToken};

/// What a finished handler asks the store to record.
#[derive(Debug)]
pub(crate) enum Outcome {
    Complete(LeaseToken),
    Fail {
        failure: Failure,
    },
    /// The failure of an attempt whose handler took the finalize over
    /// (`Job::take_finalize`) and then returned an error: a "lease lost" answer may
    /// mean the handler's own finalize committed (see the finalizer's `settle_taken`).
    FailTaken {
        failure: Failure,
    },
}

impl Outcome {
    /// The failure `failure`, marked as an attempt the handler took over if `taken`.
    pub(crate) fn fail(failure: Failure, taken: bool) -> Outcome {
        if taken {
            Outcome::FailTaken { failure }
        } else {
            Outcome::Fail { failure }
        }
    }
}

/// How many flushes may be out at once: the next batch is written while the last one's
/// answer is on its way back.
pub(crate) const FLUSHES_IN_FLIGHT: usize = 2;

/// Outcomes waiting for the finalizer, and what tells it the first one is there.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    outcomes: Mutex<Vec<Outcome>>,
    pub(crate) posted: Notify,
}

impl Outbox {
    /// Leaves an outcome for the finalizer; wakes it when the outbox was empty (it
    /// takes everything there at once, so later outcomes need no wake-up of their own).
    pub(crate) fn post(&self, outcome: Outcome) {
        let first = {
            let mut outbox = self
                .outcomes
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            outbox.push(outcome);
            outbox.len() == 1
        };
        if first {
            self.posted.notify_one();
        }
    }

    /// Moves every outcome waiting in the outbox to the end of `batch`; true when
    /// there was any.
    pub(crate) fn take(&self, batch: &mut VecDeque<Outcome>) -> bool {
        let mut outbox = self
            .outcomes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if outbox.is_empty() {
            return false;
        }
        batch.extend(outbox.drain(..));
        true
    }
}
