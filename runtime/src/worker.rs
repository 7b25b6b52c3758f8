//! The running [`Worker`]: the handle that starts the loops, switches the heartbeat,
//! reports the role and metrics, and shuts down gracefully.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use tenure_core::{DeregisterParams, LeaseToken, OwnerId, Store};

use crate::attempt::StopReason;
use crate::handler::Handler;
use crate::metrics::MetricsSnapshot;
use crate::release::{release, FLUSH_WAIT};
use crate::settings::Settings;
use crate::shared::Shared;
use crate::standing::Role;
use crate::{claim, finalize, history_flush, instance, renew};

/// How long shutdown waits for cancelled handlers to return before it drops them, and
/// again for dropped ones to end, before it releases their leases.
const STOP_WAIT: Duration = Duration::from_secs(1);

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
    history: Option<JoinHandle<()>>,
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
        let shared = Arc::new(Shared::new(
            store,
            handler,
            settings,
            span.clone(),
            max_runners,
            role_tx,
        ));
        let stop_background = CancellationToken::new();
        let drain_finalizer = CancellationToken::new();
        let spawn = |f: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>| {
            Some(tokio::spawn(f.instrument(span.clone())))
        };
        let heartbeat = spawn(Box::pin(instance::heartbeat_loop(
            Arc::clone(&shared),
            stop_background.clone(),
        )));
        let maintenance = if shared.settings.maintenance {
            spawn(Box::pin(instance::maintenance_loop(
                Arc::clone(&shared),
                stop_background.clone(),
            )))
        } else {
            None
        };
        let renew = spawn(Box::pin(renew::renew_loop(
            Arc::clone(&shared),
            stop_background.clone(),
        )));
        let finalize = spawn(Box::pin(finalize::finalize_loop(
            Arc::clone(&shared),
            drain_finalizer.clone(),
        )));
        let claim = spawn(Box::pin(claim::claim_loop(Arc::clone(&shared))));
        let history = spawn(Box::pin(history_flush::history_loop(
            Arc::clone(&shared),
            stop_background.clone(),
        )));
        tracing::info!(parent: &span, queues = ?shared.settings.queues, concurrency = shared.settings.concurrency, lease = ?shared.settings.lease, "worker started");
        Worker {
            shared,
            claim,
            renew,
            finalize,
            heartbeat,
            maintenance,
            history,
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
        let changed = self.shared.standing.heartbeat_on.send_if_modified(|on| {
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
        *self.shared.standing.heartbeat_on.borrow()
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
            shared.slots.tracker.close();
            let drained = tokio::time::timeout_at(deadline, shared.slots.tracker.wait())
                .await
                .is_ok();
            let mut to_release = Vec::new();
            let mut abandoned = 0u64;
            if !drained {
                let stopped: Vec<LeaseToken> = {
                    let map = shared.inflight.lock();
                    map.entries.iter()
                        .filter(|(_, e)| e.control.stop_running(StopReason::Shutdown))
                        .map(|(t, _)| *t)
                        .collect()
                };
                tracing::info!(running = stopped.len(), "shutdown: grace over, cancelling handlers");
                if tokio::time::timeout(STOP_WAIT, shared.slots.tracker.wait()).await.is_err() {
                    shared.slots.abort_all();
                    let _ = tokio::time::timeout(STOP_WAIT, shared.slots.tracker.wait()).await;
                }
                let map = shared.inflight.lock();
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
                .inflight
                .lock()
                .entries
                .values()
                .filter(|e| e.control.phase().handler_done)
                .count() as u64;
            let (released, unanswered) = release(&shared, &to_release).await;
            abandoned += unanswered;
            self.stop_background.cancel();
            for task in [
                self.renew.take(),
                self.heartbeat.take(),
                self.maintenance.take(),
                self.history.take(),
            ]
            .into_iter()
            .flatten()
            {
                let mut task = task;
                if tokio::time::timeout(FLUSH_WAIT, &mut task).await.is_err() {
                    task.abort();
                }
            }
            // The counts of the last finishes, added to the store's history.
            history_flush::flush(&shared).await;
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
            self.history.take(),
        ]
        .into_iter()
        .flatten()
        {
            task.abort();
        }
        self.shared.slots.abort_all();
    }
}
