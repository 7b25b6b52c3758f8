//! The wake-up signal a store hands to workers, and the health of its cross-process
//! source.

use std::fmt;
use std::sync::Arc;

use tokio::sync::{watch, Notify};

/// Whether a store's wake-ups from other processes are being delivered, as its
/// [`WakeSignal`] reports it. The worker's claim loop reads it to choose its poll
/// interval (see `tenure_runtime::PollPolicy`).
///
/// What each store reports:
///
/// | store | health |
/// | --- | --- |
/// | memory | `Local` always: one process, every enqueue through any handle fires the signal, and nothing can go down |
/// | SQLite | `Local` always: enqueues through this process's handles fire the signal; other processes writing the same file are found by polling |
/// | PostgreSQL, `listen` on | `Down` until the LISTEN connection is up, `Healthy` while it is, `Down` from the moment it is lost until it is re-established (the listener reconnects on its own) |
/// | Redis, `listen` on | the same for its pub/sub subscription |
/// | PostgreSQL or Redis, `listen` off | `Local` |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WakeHealth {
    /// No cross-process wake-ups: the signal fires for enqueues through this
    /// process's handles only, and never goes down. The worker polls from its tight
    /// base with the ordinary backoff.
    Local,
    /// Cross-process wake-ups are being delivered (the listener is connected): the
    /// worker relaxes its polling, or polls not at all in NOTIFY-only mode.
    Healthy,
    /// The cross-process listener is not connected (not yet, or lost and
    /// reconnecting): enqueues elsewhere are not signalled, so the worker polls at its
    /// tight base, without backoff, until it is back.
    Down,
}

impl fmt::Display for WakeHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WakeHealth::Local => "local",
            WakeHealth::Healthy => "healthy",
            WakeHealth::Down => "down",
        })
    }
}

struct Inner {
    notify: Notify,
    health: watch::Sender<WakeHealth>,
}

/// A latency hint that new work may be claimable: a worker waiting out its poll
/// backoff polls at once when it fires. Never needed for correctness.
///
/// It also carries the [`WakeHealth`] of the store's cross-process wake-ups: a new
/// signal is [`WakeHealth::Local`]; a store with a listener sets it with
/// [`WakeSignal::set_health`] as its connection comes and goes. Clones share one
/// signal and one health.
#[derive(Clone)]
pub struct WakeSignal(Arc<Inner>);

impl Default for WakeSignal {
    fn default() -> Self {
        WakeSignal(Arc::new(Inner {
            notify: Notify::new(),
            health: watch::Sender::new(WakeHealth::Local),
        }))
    }
}

impl fmt::Debug for WakeSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WakeSignal")
            .field("health", &self.health())
            .finish_non_exhaustive()
    }
}

impl WakeSignal {
    /// A new, unfired signal with [`WakeHealth::Local`].
    pub fn new() -> Self {
        WakeSignal::default()
    }

    /// Wakes every current waiter, and leaves one wake-up stored so the next wait
    /// returns at once too (a waiter about to wait must not miss it). A consumer that
    /// is about to look for work anyway drops that stored wake-up first, as the
    /// runtime's claim loop does before each claim.
    pub fn notify(&self) {
        self.0.notify.notify_waiters();
        self.0.notify.notify_one();
    }

    /// Waits until the signal fires.
    pub async fn notified(&self) {
        self.0.notify.notified().await;
    }

    /// The health of the cross-process wake-ups now.
    pub fn health(&self) -> WakeHealth {
        *self.0.health.borrow()
    }

    /// Records the health of the store's cross-process wake-ups; true when it changed.
    ///
    /// # Behavior
    /// - A change also fires the signal ([`WakeSignal::notify`]), so a waiting worker
    ///   polls at once and picks its next wait by the new health: after a loss,
    ///   because wake-ups may have been missed; after a reconnect, because
    ///   notifications sent meanwhile are gone.
    /// - Setting the health it already has does nothing.
    pub fn set_health(&self, health: WakeHealth) -> bool {
        let changed = self.0.health.send_if_modified(|current| {
            if *current == health {
                return false;
            }
            *current = health;
            true
        });
        if changed {
            tracing::debug!(%health, "wake-up health changed");
            self.notify();
        }
        changed
    }

    /// A receiver that sees every change of [`WakeSignal::health`].
    pub fn health_changes(&self) -> watch::Receiver<WakeHealth> {
        self.0.health.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_signal_is_local_and_a_health_change_is_seen_by_every_clone_and_fires_the_signal() {
        let a = WakeSignal::new();
        let b = a.clone();
        assert_eq!(b.health(), WakeHealth::Local);
        let changes = b.health_changes();
        assert!(a.set_health(WakeHealth::Down));
        assert!(!a.set_health(WakeHealth::Down), "no change, no report");
        assert_eq!(b.health(), WakeHealth::Down);
        assert!(changes.has_changed().unwrap_or(false));
        // The change left a wake-up stored for the next waiter.
        let notified = std::pin::pin!(b.notified());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(std::future::Future::poll(notified, &mut cx).is_ready());
    }
}
