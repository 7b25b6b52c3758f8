//! One attempt from claim to outcome: runs the handler on its own task, fires the
//! self-stop on a timer of its own, and turns the handler's answer into an outcome.

use std::any::Any;
use std::sync::{Arc, OnceLock};

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::model::Lease;
use crate::store::Failure;

use super::finalize::Outcome;
use super::handler::{Job, StopReason};
use super::metrics::add;
use super::worker::Shared;

/// Runs one attempt. `sent` is when the claim call that leased it was sent: the store
/// set the expiry no earlier than that, so the self-stop counts from there.
pub(crate) async fn supervise(
    shared: Arc<Shared>,
    lease: Lease,
    cancel: CancellationToken,
    stop: Arc<OnceLock<StopReason>>,
    permit: OwnedSemaphorePermit,
    sent: Instant,
) {
    let token = lease.token;
    let span = tracing::info_span!(
        "tenure.job",
        item = %token.id,
        attempt = token.attempt,
        queue = %lease.item.queue,
    );
    let settings = &shared.settings;
    let handler = Arc::clone(&shared.handler);
    let job = Job::with_stop(lease, cancel.clone(), stop);
    let mut task = tokio::spawn(async move { handler.handle(job).await }.instrument(span.clone()));
    if let Some(e) = shared.inflight().get_mut(&token) {
        e.task = Some(task.abort_handle());
    }

    let mut deadline = sent + settings.self_stop_after;
    let mut abort_at: Option<Instant> = None;
    let mut aborted = false;
    let mut time_out_at = settings.handler_timeout.map(|t| Instant::now() + t);
    let result = loop {
        tokio::select! {
            biased;
            r = &mut task => break Some(r),
            _ = shared.killed.cancelled() => {
                task.abort();
                break None;
            }
            _ = sleep_until(time_out_at.unwrap_or(deadline)), if time_out_at.is_some() && abort_at.is_none() => {
                time_out_at = None;
                if shared.stop_attempt(&token, StopReason::Timeout) {
                    add(&shared.metrics.timed_out, 1);
                    tracing::warn!(
                        parent: &span,
                        event = "timeout",
                        timeout = ?settings.handler_timeout,
                        "the handler ran past its timeout; stopping it, the attempt fails",
                    );
                }
            }
            _ = cancel.cancelled(), if abort_at.is_none() => {
                abort_at = Some(Instant::now() + settings.abort_after);
            }
            _ = sleep_until(abort_at.unwrap_or(deadline)), if abort_at.is_some() && !aborted => {
                tracing::warn!(parent: &span, "the handler ignored its cancellation; dropping it");
                task.abort();
                aborted = true;
            }
            _ = sleep_until(deadline), if abort_at.is_none() => {
                let renewed = shared.inflight().get(&token).map(|e| e.renewed_at);
                match renewed.map(|at| at + settings.self_stop_after) {
                    Some(later) if later > Instant::now() => deadline = later,
                    _ => {
                        if shared.stop_attempt(&token, StopReason::SelfStop) {
                            add(&shared.metrics.self_stopped, 1);
                            tracing::warn!(
                                parent: &span,
                                event = "self-stop",
                                since_renewal = ?settings.self_stop_after,
                                "half a lease passed without a successful renewal; stopping the handler, nothing will be written",
                            );
                        }
                    }
                }
            }
        }
    };
    shared.metrics.handler_ended();
    drop(permit);
    let Some(result) = result else {
        return;
    };

    let stopped = {
        let mut map = shared.inflight();
        match map.get_mut(&token) {
            Some(e) => match e.stop.get() {
                Some(StopReason::Timeout) => {
                    // Its failure is about to be sent, like any handler's outcome.
                    e.handler_done = true;
                    Some(StopReason::Timeout)
                }
                Some(reason) => Some(*reason),
                None => {
                    e.handler_done = true;
                    None
                }
            },
            None => Some(StopReason::LeaseLost),
        }
    };
    match stopped {
        Some(StopReason::Shutdown) => {
            tracing::debug!(parent: &span, "stopped by shutdown; the lease will be released");
        }
        Some(StopReason::Timeout) => {
            // The lease is still this attempt's: record the failure (G5).
            let timeout = settings.handler_timeout.unwrap_or_default();
            shared.send_outcome(Outcome::Fail {
                failure: Failure::retry_after(
                    token,
                    settings.retry.delay(&token),
                    format!("handler timed out after {timeout:?}"),
                ),
            });
        }
        Some(reason) => {
            shared.remove(&token);
            tracing::info!(parent: &span, %reason, "the attempt stopped; its outcome is discarded");
        }
        None => {
            let outcome = match result {
                Ok(Ok(())) => Outcome::Complete(token),
                Ok(Err(e)) if e.is_permanent() => Outcome::Fail {
                    failure: Failure::permanent(token, e.message()),
                },
                Ok(Err(e)) => {
                    let delay = e
                        .retry_delay()
                        .unwrap_or_else(|| settings.retry.delay(&token));
                    Outcome::Fail {
                        failure: Failure::retry_after(token, delay, e.message()),
                    }
                }
                Err(join) if join.is_panic() => {
                    let message = panic_message(&*join.into_panic());
                    add(&shared.metrics.panicked, 1);
                    tracing::warn!(parent: &span, event = "panic", %message, "the handler panicked; retrying");
                    Outcome::Fail {
                        failure: Failure::retry_after(
                            token,
                            settings.retry.delay(&token),
                            format!("handler panicked: {message}"),
                        ),
                    }
                }
                Err(_) => {
                    // Cancelled without a stop reason: only a dropped worker does that.
                    shared.remove(&token);
                    return;
                }
            };
            shared.send_outcome(outcome);
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}
