//! The running [`Worker`]: its shared state, start and graceful shutdown.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::keys::OwnerId;
use crate::model::{Lease, LeaseToken, TokenOutcome};
use crate::store::{DeregisterParams, ReleaseParams, Store};

use super::config::{Settings, WorkerBuilder};
use super::finalize::Outcome;
use super::handler::{Handler, StopReason};
use super::metrics::{add, Metrics, MetricsSnapshot};

/// How long shutdown waits for cancelled handlers to return before it drops them, and
/// again for dropped ones to end, before it releases their leases.
const STOP_WAIT: Duration = Duration::from_secs(1);
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
    pub(crate) cancel: CancellationToken,
    pub(crate) stop: Arc<OnceLock<StopReason>>,
    /// When the last successful renewal (or the claim) was sent.
    pub(crate) renewed_at: Instant,
    /// The store refused further renewals (G4).
    pub(crate) capped: bool,
    /// The handler has returned and its outcome waits for the finalizer.
    pub(crate) handler_done: bool,
    /// A "lease lost" answer has been counted for this attempt.
    pub(crate) lost_counted: bool,
    pub(crate) task: Option<AbortHandle>,
}

pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) settings: Settings,
    pub(crate) metrics: Metrics,
    pub(crate) inflight: Mutex<HashMap<LeaseToken, Entry>>,
    pub(crate) renew_wake: Notify,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) tracker: TaskTracker,
    pub(crate) finalize_tx: mpsc::UnboundedSender<Outcome>,
    pub(crate) stop_claiming: CancellationToken,
    /// Fires when the worker is dropped without a shutdown: every task ends at once.
    pub(crate) killed: CancellationToken,
    pub(crate) first_heartbeat: CancellationToken,
    pub(crate) role: watch::Sender<Role>,
    pub(crate) span: tracing::Span,
}

impl Shared {
    pub(crate) fn inflight(&self) -> MutexGuard<'_, HashMap<LeaseToken, Entry>> {
        // A panic while the lock is held cannot leave the map inconsistent (every
        // update is a single insert, remove or field write), so poisoning is ignored.
        self.inflight
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts the attempt `lease`, claimed by a call sent at `sent`.
    pub(crate) fn start_job(
        self: &Arc<Self>,
        lease: Lease,
        permit: OwnedSemaphorePermit,
        sent: Instant,
    ) {
        let cancel = CancellationToken::new();
        let stop = Arc::new(OnceLock::new());
        self.inflight().insert(
            lease.token,
            Entry {
                cancel: cancel.clone(),
                stop: stop.clone(),
                renewed_at: sent,
                capped: false,
                handler_done: false,
                lost_counted: false,
                task: None,
            },
        );
        self.renew_wake.notify_one();
        self.metrics.handler_started();
        let shared = Arc::clone(self);
        self.tracker.spawn(
            super::supervise::supervise(shared, lease, cancel, stop, permit, sent)
                .instrument(self.span.clone()),
        );
    }

    /// Tells the attempt to stop for `reason`, unless its handler already returned or
    /// it was told before. True when this call stopped it.
    pub(crate) fn stop_attempt(&self, token: &LeaseToken, reason: StopReason) -> bool {
        let map = self.inflight();
        match map.get(token) {
            Some(e) if !e.handler_done && e.stop.set(reason).is_ok() => {
                e.cancel.cancel();
                true
            }
            _ => false,
        }
    }

    /// Counts a "lease lost" answer once per attempt.
    pub(crate) fn count_lost(&self, token: &LeaseToken) {
        let first = match self.inflight().get_mut(token) {
            Some(e) if !e.lost_counted => {
                e.lost_counted = true;
                true
            }
            Some(_) => false,
            None => true,
        };
        if first {
            add(&self.metrics.lost, 1);
        }
    }

    pub(crate) fn remove(&self, token: &LeaseToken) {
        self.inflight().remove(token);
    }

    pub(crate) fn send_outcome(&self, outcome: Outcome) {
        if self.finalize_tx.send(outcome).is_err() {
            tracing::error!("the finalizer has stopped; an outcome was dropped");
        }
    }
}

/// A running worker on tokio: claims from its queues up to its free slots, runs the
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
        let span = tracing::info_span!(
            "tenure.worker",
            instance = %settings.instance,
            store = store.name(),
        );
        let (finalize_tx, finalize_rx) = mpsc::unbounded_channel();
        let (role_tx, role) = watch::channel(Role::Starting);
        let shared = Arc::new(Shared {
            store,
            handler,
            slots: Arc::new(Semaphore::new(settings.concurrency)),
            settings,
            metrics: Metrics::default(),
            inflight: Mutex::new(HashMap::new()),
            renew_wake: Notify::new(),
            tracker: TaskTracker::new(),
            finalize_tx,
            stop_claiming: CancellationToken::new(),
            killed: CancellationToken::new(),
            first_heartbeat: CancellationToken::new(),
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
            finalize_rx,
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
            shared.stop_claiming.cancel();
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
                    map.iter()
                        .filter(|(_, e)| !e.handler_done && e.stop.set(StopReason::Shutdown).is_ok())
                        .map(|(t, e)| {
                            e.cancel.cancel();
                            *t
                        })
                        .collect()
                };
                tracing::info!(running = stopped.len(), "shutdown: grace over, cancelling handlers");
                if tokio::time::timeout(STOP_WAIT, shared.tracker.wait()).await.is_err() {
                    for e in shared.inflight().values() {
                        if let Some(task) = &e.task {
                            task.abort();
                        }
                    }
                    let _ = tokio::time::timeout(STOP_WAIT, shared.tracker.wait()).await;
                }
                let map = shared.inflight();
                for t in stopped {
                    let ended = map
                        .get(&t)
                        .is_some_and(|e| e.task.as_ref().is_none_or(|h| h.is_finished()));
                    if ended {
                        to_release.push(t);
                    } else {
                        tracing::warn!(item = %t.id, attempt = t.attempt, "a handler would not stop; its lease is left to expire");
                        abandoned += 1;
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
async fn release(shared: &Shared, tokens: &[LeaseToken]) -> (u64, u64) {
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
    for t in tokens {
        shared.remove(t);
    }
    add(&shared.metrics.released, accepted);
    (accepted, unanswered)
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shared.killed.cancel();
        self.shared.stop_claiming.cancel();
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
        for e in self.shared.inflight().values() {
            if let Some(task) = &e.task {
                task.abort();
            }
        }
    }
}

/// Releases leases claimed after shutdown began (the claim call was already out).
pub(crate) async fn release_unstarted(shared: &Shared, leases: Vec<Lease>) {
    let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
    release(shared, &tokens).await;
}
