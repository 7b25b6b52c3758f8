//! Batched, fenced finalize: outcomes are coalesced and written with at most one
//! `complete` and one `fail` call per flush.
//!
//! State: takes from `outbox` ([`Outbox`](crate::outbox::Outbox)); writes `inflight`
//! (forgets each answered attempt, marks those of a call that got no answer) and
//! `room` (counts the answered outcomes out, [`Room::flushed`]).
//!
//! [`Room::flushed`]: crate::room::Room::flushed

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::{JoinError, JoinSet};
use tokio::time::{sleep, sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use tenure_core::{CompleteParams, FailOutcome, FailParams, ItemState, LeaseToken, TokenOutcome};

use crate::history::Kind;
use crate::metrics::add;
use crate::outbox::{Outcome, FLUSHES_IN_FLIGHT};
use crate::panic::CatchPanic;
use crate::shared::Shared;

const RETRY_FIRST: Duration = Duration::from_millis(50);
/// A flush the store could not take is retried within this long, so finalizes go on
/// within half a second of the store's return (the claim loop's
/// [`FAILED_CLAIM_RETRY_CAP`](crate::poll::FAILED_CLAIM_RETRY_CAP) likewise).
const RETRY_MAX: Duration = Duration::from_millis(500);

/// Collects outcomes until `finalize_batch` wait or `finalize_window` has passed since
/// the first, then flushes, with up to [`FLUSHES_IN_FLIGHT`] flushes out at once.
/// Outcomes of a flush the store could not take (unavailable) are kept and retried
/// with backoff. On `drain` it flushes what is left, waits for the flushes out, and
/// returns.
///
/// Handlers leave their outcomes in the worker's outbox ([`Shared::send_outcome`]):
/// one short lock each, and a wake-up only for the first outcome after the loop last
/// emptied it; the loop takes everything there under one lock.
pub(crate) async fn finalize_loop(shared: Arc<Shared>, drain: CancellationToken) {
    let max = shared.settings.finalize_batch;
    let window = shared.settings.finalize_window;
    // A deque: a backlog larger than one flush is taken from the front, each outcome
    // moved once.
    let mut batch: VecDeque<Outcome> = VecDeque::new();
    // Each flush answers how many outcomes it took and those to retry.
    let mut flushes: JoinSet<(usize, Vec<Outcome>)> = JoinSet::new();
    // Some when the last flush answered had outcomes to retry: the wait before the next.
    let mut backoff: Option<Duration> = None;
    loop {
        if batch.is_empty() {
            // Registered before the outbox is looked at, so an outcome left from here
            // on wakes the loop.
            let posted = shared.outbox.posted.notified();
            tokio::pin!(posted);
            posted.as_mut().enable();
            shared.outbox.take(&mut batch);
            if batch.is_empty() {
                if drain.is_cancelled() {
                    if flushes.is_empty() {
                        return;
                    }
                    take_back(&shared, flushes.join_next().await, &mut batch, &mut backoff);
                    continue;
                }
                tokio::select! {
                    _ = &mut posted => {}
                    _ = drain.cancelled() => {}
                    j = flushes.join_next(), if !flushes.is_empty() => {
                        take_back(&shared, j, &mut batch, &mut backoff);
                    }
                }
                continue;
            }
        }
        let until = Instant::now() + window;
        while batch.len() < max && !drain.is_cancelled() {
            let posted = shared.outbox.posted.notified();
            tokio::pin!(posted);
            posted.as_mut().enable();
            if shared.outbox.take(&mut batch) && batch.len() >= max {
                break;
            }
            tokio::select! {
                biased;
                _ = &mut posted => {}
                _ = sleep_until(until) => break,
                _ = drain.cancelled() => break,
            }
        }
        shared.outbox.take(&mut batch);
        while flushes.len() >= FLUSHES_IN_FLIGHT {
            take_back(&shared, flushes.join_next().await, &mut batch, &mut backoff);
        }
        if let Some(wait) = backoff {
            tokio::select! {
                _ = sleep(wait) => {}
                _ = shared.killed.cancelled() => return,
            }
        }
        let take = batch.len().min(max);
        let flushing: Vec<Outcome> = batch.drain(..take).collect();
        let sh = Arc::clone(&shared);
        let count = flushing.len();
        flushes.spawn(
            async move { (count, flush(&sh, flushing).await) }.instrument(shared.span.clone()),
        );
    }
}

/// Takes the answer of a flush: outcomes it could not write go back to the front of
/// `batch`, and `backoff` grows; a flush that wrote everything resets it. The rest
/// are answered: they leave the worker's count of unflushed outcomes.
fn take_back(
    shared: &Shared,
    joined: Option<Result<(usize, Vec<Outcome>), JoinError>>,
    batch: &mut VecDeque<Outcome>,
    backoff: &mut Option<Duration>,
) {
    // Only an aborted flush answers nothing (panics are caught inside it): its leases
    // expire and are recovered.
    if let Some(Ok((count, kept))) = joined {
        shared.room.flushed(count - kept.len().min(count));
        if kept.is_empty() {
            *backoff = None;
        } else {
            for o in kept.into_iter().rev() {
                batch.push_front(o);
            }
            *backoff = Some(backoff.map_or(RETRY_FIRST, |b| (b * 2).min(RETRY_MAX)));
        }
    }
}

/// Writes one batch; returns the outcomes to retry (those of a call that failed with a
/// retryable error).
async fn flush(shared: &Shared, batch: Vec<Outcome>) -> Vec<Outcome> {
    shared.export.finalize_batch.record(batch.len() as f64);
    let mut completes = Vec::new();
    let mut failures = Vec::new();
    // Failures of attempts their handlers took over: sent with the others, told apart
    // by their answer.
    let mut taken: Vec<LeaseToken> = Vec::new();
    for o in batch {
        match o {
            Outcome::Complete(t) => completes.push(t),
            Outcome::Fail { failure } => failures.push(failure),
            Outcome::FailTaken { failure } => {
                taken.push(failure.token);
                failures.push(failure);
            }
        }
    }
    let mut kept = Vec::new();
    if !completes.is_empty() {
        let count = completes.len();
        let call = shared
            .store
            .complete(CompleteParams::new(completes.clone()));
        match caught(shared, "complete", call).await {
            Ok(answers) if answers.len() == count => {
                let mut accepted = Vec::new();
                let mut later = Vec::new();
                for (t, a) in completes.iter().zip(answers) {
                    match a {
                        TokenOutcome::Accepted => {
                            add(&shared.metrics.completed, 1);
                            accepted.push(*t);
                            tracing::debug!(event = "complete", item = %t.id, attempt = t.attempt, "completed");
                        }
                        TokenOutcome::LeaseLost if shared.inflight.was_unanswered(t) => {
                            settle(shared, t, Finalize::Complete).await;
                        }
                        TokenOutcome::LeaseLost => {
                            shared.count_lost(t);
                            tracing::warn!(event = "lost", item = %t.id, attempt = t.attempt, "completion refused: lease lost");
                        }
                        // An earlier item of its stream run is being completed by
                        // the other flush in flight: try again after it.
                        TokenOutcome::OutOfOrder => {
                            tracing::debug!(event = "complete", item = %t.id, attempt = t.attempt, "behind an unfinished item of its stream; retrying");
                            later.push(*t);
                        }
                    }
                }
                shared.history_tally(&accepted, Kind::Finished);
                shared.tally(&accepted, |q| &q.completed);
                shared
                    .inflight
                    .remove_all(completes.iter().filter(|t| !later.contains(t)));
                kept.extend(later.into_iter().map(Outcome::Complete));
                tracing::debug!(event = "complete", count, "completions flushed");
            }
            Ok(answers) => {
                give_up(
                    shared,
                    &completes,
                    &format!("{} answers for {count} tokens", answers.len()),
                );
            }
            Err(e) if e.is_retryable() => {
                add(&shared.metrics.store_errors, 1);
                tracing::warn!(error = %e, count, "completion flush failed; retrying");
                shared.inflight.mark_unanswered(&completes);
                kept.extend(completes.into_iter().map(Outcome::Complete));
            }
            Err(e) => give_up(shared, &completes, &e.to_string()),
        }
    }
    if !failures.is_empty() {
        let count = failures.len();
        let call = shared.store.fail(FailParams::new(failures.clone()));
        match caught(shared, "fail", call).await {
            Ok(answers) if answers.len() == count => {
                let mut accepted = Vec::new();
                let mut dead = Vec::new();
                for (f, a) in failures.iter().zip(answers) {
                    let t = &f.token;
                    match a {
                        FailOutcome::Retrying { run_at } => {
                            add(&shared.metrics.failed, 1);
                            accepted.push(*t);
                            tracing::info!(event = "fail", item = %t.id, attempt = t.attempt, %run_at, error = %f.error, "failed; retrying");
                        }
                        FailOutcome::Dead => {
                            add(&shared.metrics.failed, 1);
                            add(&shared.metrics.dead, 1);
                            accepted.push(*t);
                            dead.push(*t);
                            tracing::warn!(event = "fail", item = %t.id, attempt = t.attempt, error = %f.error, "failed; dead");
                        }
                        FailOutcome::LeaseLost if shared.inflight.was_unanswered(t) => {
                            settle(shared, t, Finalize::Fail).await;
                        }
                        FailOutcome::LeaseLost if taken.contains(t) => {
                            settle_taken(shared, t).await;
                        }
                        FailOutcome::LeaseLost => {
                            shared.count_lost(t);
                            tracing::warn!(event = "lost", item = %t.id, attempt = t.attempt, "failure refused: lease lost");
                        }
                    }
                }
                shared.history_tally(&dead, Kind::Dead);
                shared.history_tally(accepted.iter().filter(|t| !dead.contains(t)), Kind::Failed);
                shared.tally(&accepted, |q| &q.failed);
                shared
                    .inflight
                    .remove_all(failures.iter().map(|f| &f.token));
            }
            Ok(answers) => {
                let tokens: Vec<LeaseToken> = failures.iter().map(|f| f.token).collect();
                give_up(
                    shared,
                    &tokens,
                    &format!("{} answers for {count} failures", answers.len()),
                );
            }
            Err(e) if e.is_retryable() => {
                add(&shared.metrics.store_errors, 1);
                tracing::warn!(error = %e, count, "failure flush failed; retrying");
                let tokens: Vec<LeaseToken> = failures.iter().map(|f| f.token).collect();
                shared.inflight.mark_unanswered(&tokens);
                kept.extend(failures.into_iter().map(|failure| {
                    let handed = taken.contains(&failure.token);
                    Outcome::fail(failure, handed)
                }));
            }
            Err(e) => {
                let tokens: Vec<LeaseToken> = failures.iter().map(|f| f.token).collect();
                give_up(shared, &tokens, &e.to_string());
            }
        }
    }
    kept
}

/// What a retried finalize was writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Finalize {
    Complete,
    Fail,
}

/// A finalize whose earlier call failed without an answer (the connection dropped, a
/// timeout) was retried and refused as stale. The refusal proves nothing by itself:
/// the first call may have committed, so the token is stale because of this worker's
/// own write. The item tells: still at this attempt and no longer running means the
/// first call took effect (counted as completed or failed); a later attempt or this
/// attempt still running means the lease was really lost; an item that is gone (a
/// completion deletes it) or a store that cannot answer leaves it unconfirmed, counted
/// apart from "lost".
async fn settle(shared: &Shared, t: &LeaseToken, what: Finalize) {
    match shared.store.item_get(t.id).await {
        Ok(Some(item)) if item.attempt == t.attempt && item.state != ItemState::Running => {
            let took = match what {
                Finalize::Complete => item.state == ItemState::Done,
                Finalize::Fail => matches!(item.state, ItemState::Ready | ItemState::Dead),
            };
            if took {
                match what {
                    Finalize::Complete => {
                        add(&shared.metrics.completed, 1);
                        shared.queue_of(t).completed.increment(1);
                        shared.history_tally([t], Kind::Finished);
                    }
                    Finalize::Fail => {
                        add(&shared.metrics.failed, 1);
                        shared.queue_of(t).failed.increment(1);
                        if item.state == ItemState::Dead {
                            add(&shared.metrics.dead, 1);
                            shared.history_tally([t], Kind::Dead);
                        } else {
                            shared.history_tally([t], Kind::Failed);
                        }
                    }
                }
                tracing::info!(event = "settled", item = %t.id, attempt = t.attempt, ?what, "a retried finalize was refused as stale: the first call had taken effect");
            } else {
                shared.count_lost(t);
            }
        }
        Ok(Some(_)) => {
            shared.count_lost(t);
            tracing::warn!(event = "lost", item = %t.id, attempt = t.attempt, ?what, "retried finalize refused: lease lost");
        }
        Ok(None) | Err(_) => {
            add(&shared.metrics.unconfirmed, 1);
            tracing::warn!(event = "unconfirmed", item = %t.id, attempt = t.attempt, ?what, "a retried finalize was refused as stale and the item is gone: the first call most likely took effect");
        }
    }
}

/// The failure of an attempt whose handler took the finalize over was refused as
/// stale. The handler's own finalize may have committed before it returned its error;
/// the item tells: gone (a completion deletes it) or at this attempt and no longer
/// running means it did (counted as finalized by the handler); a later attempt, or
/// this one still running, means the lease was really lost; a store that cannot
/// answer leaves it unconfirmed.
async fn settle_taken(shared: &Shared, t: &LeaseToken) {
    match shared.store.item_get(t.id).await {
        Ok(None) => finalized_by_handler(shared, t),
        Ok(Some(item)) if item.attempt == t.attempt && item.state != ItemState::Running => {
            finalized_by_handler(shared, t);
        }
        Ok(Some(_)) => {
            shared.count_lost(t);
            tracing::warn!(event = "lost", item = %t.id, attempt = t.attempt, "failure refused: lease lost");
        }
        Err(e) => {
            add(&shared.metrics.unconfirmed, 1);
            tracing::warn!(event = "unconfirmed", item = %t.id, attempt = t.attempt, error = %e, "the failure of a handler-finalized attempt was refused and the item could not be read");
        }
    }
}

fn finalized_by_handler(shared: &Shared, t: &LeaseToken) {
    add(&shared.metrics.handler_finalized, 1);
    shared.queue_of(t).handler_finalized.increment(1);
    tracing::info!(event = "handler-finalized", item = %t.id, attempt = t.attempt, "the handler returned an error after its own finalize had taken effect; the runtime's failure was refused by the fence");
}

/// A non-retryable answer: the outcomes are dropped and their leases left to expire,
/// so recovery hands the items out again.
/// Runs a finalize call of the store, a panic in it answered as an internal error: not
/// retried, so [`give_up`] lets its leases expire and be recovered (G2), since
/// whether the store wrote the batch is unknown.
async fn caught<T>(
    shared: &Shared,
    op: &str,
    call: impl std::future::Future<Output = tenure_core::Result<T>>,
) -> tenure_core::Result<T> {
    CatchPanic(Box::pin(call)).await.unwrap_or_else(|_| {
        Err(tenure_core::Error::internal(
            shared.store.name(),
            format!("the {op} call panicked"),
        ))
    })
}

fn give_up(shared: &Shared, tokens: &[LeaseToken], error: &str) {
    add(&shared.metrics.store_errors, 1);
    tracing::error!(%error, count = tokens.len(), "finalize refused; the leases will expire and be recovered");
    shared.inflight.remove_all(tokens);
}
