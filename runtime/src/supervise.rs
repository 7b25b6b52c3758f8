//! One attempt from claim to outcome: runs the handler on the attempt's task, fires
//! the self-stop on a timer of its own, and turns the handler's answer into an outcome.
//!
//! State: reads `inflight` (the last renewal, for the self-stop) and `slots` (the
//! abort of shutdown); writes the attempt's control (its stop and phase), `inflight`
//! (forgets an attempt whose outcome is discarded), `room` (the handler's run time,
//! for the prefetch) and `outbox` (the outcome).

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::time::{sleep_until, Instant};
use tracing::instrument::Instrumented;
use tracing::Instrument;

use tenure_core::{Failure, LeaseToken};

use crate::attempt::{Control, StopReason};
use crate::handler::{Job, JobError};
use crate::metrics::add;
use crate::outbox::Outcome;
use crate::panic::CatchPanic;
use crate::shared::Shared;
use crate::slots::Sent;

/// The span of one attempt: a real `tenure.job` span only when a subscriber wants
/// spans at this level, so a worker with no subscriber (or one that takes only events)
/// pays nothing per attempt for it. Events still fire either way.
fn job_span(lease: &tenure_core::Lease) -> tracing::Span {
    if tracing::span_enabled!(tracing::Level::INFO) {
        tracing::info_span!(
            "tenure.job",
            item = %lease.token.id,
            attempt = lease.token.attempt,
            queue = %lease.item.queue,
        )
    } else {
        tracing::Span::none()
    }
}

/// The handler's future for one attempt, with its span, catching a panic.
type HandlerFuture<'a> =
    Instrumented<CatchPanic<Pin<Box<dyn Future<Output = Result<(), JobError>> + Send + 'a>>>>;

/// An attempt whose handler has been called and is about to be polled for the first
/// time: counted in the in-flight gauge, its pickup recorded.
pub(crate) struct Begun<'a> {
    running: Running<'a>,
    fut: HandlerFuture<'a>,
    span: tracing::Span,
    sent: Instant,
}

/// Starts the attempt of `job`, leased by a claim sent at `sent`: records its pickup,
/// counts it in flight and calls the handler (which runs nothing until polled). Done
/// where the job is taken from the queue, so the job moves once, into the handler.
#[inline]
pub(crate) fn begin(shared: &Shared, job: Job, sent: Sent) -> Begun<'_> {
    let token = job.lease.token;
    let span = job_span(&job.lease);
    let queue = shared.export.index(&job.lease.item.queue);
    let control = Arc::clone(job.control());
    // Counts the handler in the in-flight gauge, and marks it ended, however this
    // attempt ends (its task dropped included).
    let running = Running::new(shared, token, queue, control);
    // The wall clock at the start, from the claim's reading and the one tokio clock
    // reading the start takes anyway.
    let now = sent.wall + running.started.saturating_duration_since(sent.at);
    shared.export.at(queue).picked_up(&job.lease.item, now);
    // Dropping the future is how the handler is aborted; a panic in it is caught and
    // becomes the attempt's failure.
    let fut = CatchPanic(shared.handler.handle(job)).instrument(span.clone());
    Begun {
        running,
        fut,
        span,
        sent: sent.at,
    }
}

/// An attempt after its handler's first poll.
pub(crate) enum Started<'a> {
    /// The handler finished on its first poll and its outcome is sent: true when it is
    /// a complete.
    Concluded(bool),
    /// The handler did not finish: this future supervises it to its end (see
    /// [`supervise`]) and answers as `Concluded` would.
    Watching(Pin<Box<dyn Future<Output = bool> + Send + 'a>>),
}

impl Started<'_> {
    /// The attempt's end: true when its outcome is a complete.
    pub(crate) async fn ended(self) -> bool {
        match self {
            Started::Concluded(completed) => completed,
            Started::Watching(watching) => watching.await,
        }
    }
}

/// Polls the handler of one begun attempt once, on the calling task's context `cx`.
/// One that finishes then needs no timer, no cancellation token and no wake-up: its
/// outcome is sent at once. One that does not is handed back to be watched to its end
/// on the calling task ([`Started::Watching`]); what that means for the task is the
/// caller's concern.
///
/// A plain function, so that an attempt that finishes at once is never moved into
/// a future's state: only a pending one is (boxed, with its watch).
pub(crate) fn first_poll<'a>(
    shared: &'a Arc<Shared>,
    begun: Begun<'a>,
    cx: &mut Context<'_>,
) -> Started<'a> {
    let Begun {
        running,
        mut fut,
        span,
        sent,
    } = begun;
    match Pin::new(&mut fut).poll(cx) {
        Poll::Ready(r) => {
            drop(fut);
            Started::Concluded(conclude(shared, running, &span, Some(Ran::Returned(r))))
        }
        Poll::Pending => Started::Watching(Box::pin(async move {
            let result = watch(shared, &running, fut, &span, sent).await;
            conclude(shared, running, &span, result)
        })),
    }
}

/// Watches a handler that did not finish on its first poll to its end: the self-stop,
/// the handler timeout, cancellation and shutdown's abort. None when the worker was
/// dropped.
async fn watch(
    shared: &Shared,
    _running: &Running<'_>,
    fut: HandlerFuture<'_>,
    span: &tracing::Span,
    sent: Instant,
) -> Option<Ran> {
    let token = _running.token;
    let settings = &shared.settings;
    let handles = shared.export.at(_running.queue);
    let mut running = Some(fut);
    let cancel = _running.control.token();
    let mut deadline = sent + settings.self_stop_after;
    let mut abort_at: Option<Instant> = None;
    let mut time_out_at = settings.handler_timeout.map(|t| _running.started + t);
    let result = loop {
        let Some(fut) = running.as_mut() else {
            // Aborted: it ignored its cancellation and was dropped.
            break Some(Ran::Dropped);
        };
        tokio::select! {
            biased;
            r = fut => break Some(Ran::Returned(r)),
            _ = shared.killed.cancelled() => break None,
            _ = shared.slots.abort.cancelled() => {
                // Shutdown gave up waiting for it: dropped now.
                running = None;
            }
            _ = sleep_until(time_out_at.unwrap_or(deadline)), if time_out_at.is_some() && abort_at.is_none() => {
                time_out_at = None;
                if shared.inflight.stop_attempt(&token, StopReason::Timeout) {
                    add(&shared.metrics.timed_out, 1);
                    handles.timed_out.increment(1);
                    tracing::warn!(
                        parent: span,
                        event = "timeout",
                        timeout = ?settings.handler_timeout,
                        "the handler ran past its timeout; stopping it, the attempt fails",
                    );
                }
            }
            _ = cancel.cancelled(), if abort_at.is_none() => {
                abort_at = Some(Instant::now() + settings.abort_after);
            }
            _ = sleep_until(abort_at.unwrap_or(deadline)), if abort_at.is_some() => {
                tracing::warn!(parent: span, "the handler ignored its cancellation; dropping it");
                running = None;
            }
            _ = sleep_until(deadline), if abort_at.is_none() => {
                let renewed = shared.inflight.lock().entries.get(&token).map(|e| e.renewed_at);
                match renewed.map(|at| at + settings.self_stop_after) {
                    Some(later) if later > Instant::now() => deadline = later,
                    _ => {
                        if shared.inflight.stop_attempt(&token, StopReason::SelfStop) {
                            add(&shared.metrics.self_stopped, 1);
                            handles.self_stopped.increment(1);
                            tracing::warn!(
                                parent: span,
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
    drop(running);
    result
}

/// Turns the handler's answer into the attempt's outcome (sent to the finalizer), or
/// discards it when the attempt was told to stop; true when the outcome is a
/// complete. `result` is None when the worker was dropped.
fn conclude(
    shared: &Shared,
    mut _running: Running<'_>,
    span: &tracing::Span,
    result: Option<Ran>,
) -> bool {
    let token = _running.token;
    let settings = &shared.settings;
    let Some(result) = result else {
        return false;
    };

    // The handler took the finalize over (`Job::take_finalize`) and says it is done:
    // the runtime writes nothing for this attempt and forgets it, which also ends its
    // renewals, whatever stopped it meanwhile.
    let taken = _running.control.taken();
    if taken && matches!(result, Ran::Returned(Ok(Ok(())))) {
        _running.ended();
        shared.inflight.remove(&token);
        add(&shared.metrics.handler_finalized, 1);
        shared
            .export
            .at(_running.queue)
            .handler_finalized
            .increment(1);
        tracing::debug!(parent: span, event = "handler-finalized", "the handler finalized the attempt itself");
        // It says it succeeded: the next item of a stream run may start.
        return true;
    }
    // The handler is gone; unless it was told to stop for a reason that discards its
    // outcome, it is done and its outcome goes to the finalizer (a timed-out one's
    // failure included). Read and marked under the control's lock, which a stop
    // takes too.
    let stopped = _running.finish();
    match stopped {
        Some(StopReason::Shutdown) => {
            tracing::debug!(parent: span, "stopped by shutdown; the lease will be released");
        }
        Some(StopReason::Timeout) => {
            // The lease is still this attempt's: record the failure (G5).
            let timeout = settings.handler_timeout.unwrap_or_default();
            shared.send_outcome(Outcome::fail(
                Failure::retry_after(
                    token,
                    settings.retry.delay(&token),
                    format!("handler timed out after {timeout:?}"),
                ),
                taken,
            ));
        }
        Some(reason) => {
            shared.inflight.remove(&token);
            tracing::info!(parent: span, %reason, "the attempt stopped; its outcome is discarded");
        }
        None => {
            let outcome = match result {
                Ran::Returned(Ok(Ok(()))) => Outcome::Complete(token),
                Ran::Returned(Ok(Err(e))) if e.is_permanent() => Outcome::Fail {
                    failure: Failure::permanent(token, e.message()),
                },
                Ran::Returned(Ok(Err(e))) => {
                    let delay = e
                        .retry_delay()
                        .unwrap_or_else(|| settings.retry.delay(&token));
                    Outcome::Fail {
                        failure: Failure::retry_after(token, delay, e.message()),
                    }
                }
                Ran::Returned(Err(panic)) => {
                    let message = panic_message(&*panic);
                    add(&shared.metrics.panicked, 1);
                    tracing::warn!(parent: span, event = "panic", %message, "the handler panicked; retrying");
                    Outcome::Fail {
                        failure: Failure::retry_after(
                            token,
                            settings.retry.delay(&token),
                            format!("handler panicked: {message}"),
                        ),
                    }
                }
                Ran::Dropped => {
                    // Dropped without a stop reason: only a dropped worker does that.
                    shared.inflight.remove(&token);
                    return false;
                }
            };
            let outcome = match outcome {
                Outcome::Fail { failure } if taken => Outcome::fail(failure, true),
                other => other,
            };
            let completed = matches!(outcome, Outcome::Complete(_));
            shared.send_outcome(outcome);
            return completed;
        }
    }
    false
}

/// How the handler's run ended.
enum Ran {
    /// It returned (`Err` holds a panic's payload).
    Returned(std::result::Result<std::result::Result<(), JobError>, Box<dyn Any + Send>>),
    /// It was dropped at an `.await` after ignoring its cancellation.
    Dropped,
}

/// A handler being run: in the in-flight gauge from creation to drop, and marked
/// ended in its entry when dropped.
struct Running<'a> {
    shared: &'a Shared,
    token: LeaseToken,
    /// The attempt's control, where its phase is marked.
    control: Arc<Control>,
    /// Still to be marked ended.
    pending: bool,
    /// The item's queue among the metric handles, and when the handler started.
    queue: u32,
    started: Instant,
}

impl<'a> Running<'a> {
    fn new(shared: &'a Shared, token: LeaseToken, queue: u32, control: Arc<Control>) -> Self {
        shared.metrics.handler_started();
        shared.export.at(queue).in_flight.increment(1.0);
        Running {
            shared,
            token,
            control,
            pending: true,
            queue,
            started: Instant::now(),
        }
    }

    /// Takes the handler out of the exported gauge and records its run time, in the
    /// handler histogram and in the prefetch's moving average, from one clock reading.
    fn exported_end(&self) {
        let took = self.started.elapsed();
        let handles = self.shared.export.at(self.queue);
        handles.in_flight.decrement(1.0);
        handles.handler.record(took.as_secs_f64());
        self.shared.room.record_run(took);
    }

    /// Marks the handler ended.
    fn ended(&mut self) {
        if self.pending {
            self.pending = false;
            self.shared.metrics.handler_ended();
            self.exported_end();
            self.control.mark_ended();
        }
    }

    /// Marks the handler ended and, unless told to stop for a reason that discards
    /// its outcome, done; returns the stop reason (see [`Control::finish`]).
    fn finish(&mut self) -> Option<StopReason> {
        if self.pending {
            self.pending = false;
            self.shared.metrics.handler_ended();
            self.exported_end();
        }
        self.control.finish()
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.pending {
            self.pending = false;
            self.shared.metrics.handler_ended();
            self.exported_end();
            self.control.mark_ended();
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
