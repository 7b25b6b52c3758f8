//! The claim loop: claims only up to free slots, keeps claims ahead of the handlers
//! while there is work, polls adaptively, wakes on a signal.
//!
//! State: reads `standing` (it waits for the first registration, and registers again
//! only while the heartbeat is on) and `room` (how much to ask for); writes `room`
//! (holds what it asks for, lets go of what an answer did not fill). Each answer goes
//! to [`dispatch`](crate::dispatch); at shutdown it gives back what is still queued.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::{sleep, sleep_until, timeout, Instant};
use tracing::Instrument;

use tenure_core::{
    ClaimParams, Clock, Error, HeartbeatParams, Lease, SystemClock, WakeHealth, WakeSignal,
};

use crate::dispatch::{dispatch, take_queued};
use crate::metrics::add;
use crate::panic::CatchPanic;
use crate::release::{release, release_unstarted};
use crate::settings::Settings;
use crate::shared::Shared;
use crate::slots::Sent;

/// When the next claim is due after `failures` consecutive failed claims (at least 1).
fn next_retry(s: &Settings, failures: u32) -> Option<Instant> {
    let wait = s.poll.wait_after_failure(failures);
    tracing::trace!(
        event = "poll",
        failures,
        ?wait,
        "next claim after a failure"
    );
    Some(Instant::now() + wait)
}

/// When the next poll is due after `empty` consecutive empty polls, by the poll policy
/// and the health of the store's wake-ups now; `None` waits for a wake-up.
fn next_poll(s: &Settings, empty: u32, signal: Option<&WakeSignal>) -> Option<Instant> {
    let health = signal.map_or(WakeHealth::Local, WakeSignal::health);
    let wait = s.poll.wait_for(empty, health);
    tracing::trace!(event = "poll", %health, empty, ?wait, "next poll");
    wait.map(|w| Instant::now() + w)
}

/// How long until time alone lets the store start an item its limits hold back, on
/// stores with limits ([`Store::limits_wait`](tenure_core::Store::limits_wait)); `None` on
/// others, and when the answer is an error (the poll's own backoff then applies).
async fn limits_wait(shared: &Shared) -> Option<Duration> {
    if !shared.store.capabilities().limits {
        return None;
    }
    match shared.store.limits_wait(&shared.settings.queues).await {
        Ok(wait) => {
            if let Some(w) = wait {
                add(&shared.metrics.limit_waits, 1);
                crate::limit_waits::observe(shared, w).await;
            }
            wait
        }
        Err(e) => {
            tracing::debug!(event = "claim", error = %e, "limits_wait failed");
            None
        }
    }
}

/// The sooner of a poll time and a wait from now; a wait to a start never delays a
/// poll, and never makes one wait-less (NOTIFY-only) loop poll later than it would.
fn earliest(poll_at: Option<Instant>, wait: Option<Duration>) -> Option<Instant> {
    match (poll_at, wait) {
        (at, None) => at,
        (None, Some(w)) => Some(Instant::now() + w),
        (Some(at), Some(w)) => Some(at.min(Instant::now() + w)),
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn woken(signal: Option<&WakeSignal>) {
    match signal {
        Some(s) => s.notified().await,
        None => std::future::pending().await,
    }
}

/// Takes a wake the signal may have stored for an enqueue that the claim about to be
/// sent will see anyway, so it does not cause a second, empty poll.
fn absorb_wake(signal: Option<&WakeSignal>) {
    if let Some(s) = signal {
        let notified = std::pin::pin!(s.notified());
        let mut cx = Context::from_waker(Waker::noop());
        let _ = notified.poll(&mut cx);
    }
}

/// What one claim call brought back, with how many leases it asked for.
struct Answer {
    leases: Result<Vec<Lease>, Error>,
    asked: usize,
    sent: Instant,
}

/// Claims until shutdown, keeping the handler slots full.
///
/// A claim asks for as many leases as the worker has room for (see
/// [`Room::available`](crate::room::Room::available): the free slots, plus the
/// prefetch while handlers are short), up to `claim_batch`. While the queue has work
/// (the last answer filled what it asked), up to `claims_in_flight` claims are out at
/// once, so claim round trips overlap the handlers and each other. After an answer
/// that did not fill what it asked, the loop sends nothing new until
/// [`PollPolicy::wait_for`](crate::poll::PollPolicy::wait_for) for the count of
/// consecutive empty polls and the store's wake-up health has passed (NOTIFY-only
/// mode may wait for a wake-up alone; after a failed claim,
/// [`PollPolicy::wait_after_failure`](crate::poll::PollPolicy::wait_after_failure)),
/// or less if the store's wake signal fires (a change of health fires it too); an
/// idle queue thus sees one poll at a time.
pub(crate) async fn claim_loop(shared: Arc<Shared>) {
    let s = &shared.settings;
    let stop = shared.stop_claiming.clone();
    let wake = shared.store.wake_signal();
    // Register before the first claim (G12), but never wait long for it.
    tokio::select! {
        _ = shared.standing.first_heartbeat.cancelled() => {}
        _ = stop.cancelled() => return,
        _ = sleep(s.heartbeat_interval) => {}
    }
    let mut calls: JoinSet<Answer> = JoinSet::new();
    let mut empty: u32 = 0;
    // Failed claims in a row: retried by their own short backoff, never relaxed.
    let mut failures: u32 = 0;
    let mut poll_now = true;
    // The last answer filled what it asked: the queue has work.
    let mut busy = false;
    // When the next poll is due while `poll_now` is false; `None` waits for a wake-up
    // (NOTIFY-only mode while the store's wake-ups are healthy).
    let mut poll_at = Some(Instant::now());
    // Set after registering again for a refused partitioned claim, so a store that
    // keeps refusing gets the ordinary backoff, not a tight loop.
    let mut registered_again = false;
    // Some answer brought leases since no claim was out: the claims out at once are
    // one poll, so their empty answers back off once, not once each.
    let mut round_got = false;
    loop {
        // Only a queue known to have work gets more than one claim at a time.
        let out = if busy { s.claims_in_flight } else { 1 };
        // While a claim is out on a busy queue, the next waits until it can ask for
        // half a batch: claims sized to what is free, not one per finished lease.
        let want = if busy && !calls.is_empty() {
            (s.claim_batch / 2).max(1)
        } else {
            1
        };
        let waits_for_room = poll_now && calls.len() < out;
        // Finished leases wake this loop only when it waits for room, and only once
        // there is room for `want`.
        let room = shared
            .room
            .wake_at_room(if waits_for_room { want } else { usize::MAX });
        let may_send = waits_for_room && room >= want;
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            Some(joined) = calls.join_next(), if !calls.is_empty() => {
                let Ok(answer) = joined else {
                    // Only an aborted call ends without an answer (panics are caught
                    // inside it): a failed claim.
                    add(&shared.metrics.store_errors, 1);
                    failures = failures.saturating_add(1);
                    poll_now = false;
                    busy = false;
                    round_got = round_got && !calls.is_empty();
                    poll_at = next_retry(s, failures);
                    continue;
                };
                let asked = answer.asked;
                match answer.leases {
                    Ok(leases) => {
                        registered_again = false;
                        failures = 0;
                        if stop.is_cancelled() {
                            shared.room.let_go(asked);
                            release_claimed(&shared, leases).await;
                            break;
                        }
                        let got = start(&shared, leases, asked, answer.sent).await;
                        if got == 0 {
                            poll_now = false;
                            busy = false;
                            if calls.is_empty() {
                                // The last answer of the claims sent together: an
                                // empty poll only if none of them brought anything.
                                empty = if round_got { 0 } else { empty.saturating_add(1) };
                                round_got = false;
                                poll_at = next_poll(s, empty, wake.as_ref());
                                // Items held back by a rate, a deferral or a lease
                                // that will expire: poll again when time lets one
                                // start, not a poll interval past it (G16, G17).
                                poll_at = earliest(poll_at, limits_wait(&shared).await);
                            } else if round_got {
                                // Another claim of these brought leases: as after a
                                // short answer.
                                poll_at = next_poll(s, 0, wake.as_ref());
                            } else {
                                // Others are still out: they tell whether this poll
                                // was empty; send nothing new meanwhile.
                                poll_at = None;
                            }
                            tracing::trace!(event = "claim", asked, count = 0, empty, "nothing to claim");
                        } else {
                            round_got = !calls.is_empty();
                            empty = 0;
                            // A short answer means the queue has run dry for now.
                            poll_now = got >= asked;
                            busy = poll_now;
                            if !poll_now {
                                poll_at = next_poll(s, 0, wake.as_ref());
                            }
                            tracing::debug!(event = "claim", asked, count = got, "claimed");
                        }
                    }
                    Err(Error::NotFound {
                        what: "instance", ..
                    }) if s.partitioning.is_some()
                        && !registered_again
                        && register_again(&shared).await =>
                    {
                        // A partitioned claim needs a registered owner (G14), and this
                        // instance was evicted (a long pause, say): it registered again
                        // at once instead of waiting for its next heartbeat, and claims
                        // again.
                        shared.room.let_go(asked);
                        add(&shared.metrics.store_errors, 1);
                        registered_again = true;
                        poll_now = true;
                        tracing::warn!(
                            event = "claim",
                            "the instance was not registered; registered again"
                        );
                    }
                    Err(e) => {
                        shared.room.let_go(asked);
                        registered_again = false;
                        add(&shared.metrics.store_errors, 1);
                        round_got = round_got && !calls.is_empty();
                        failures = failures.saturating_add(1);
                        poll_now = false;
                        busy = false;
                        poll_at = next_retry(s, failures);
                        tracing::warn!(event = "claim", error = %e, "claim failed; backing off");
                    }
                }
            }
            _ = std::future::ready(()), if may_send => {
                send(&shared, &mut calls, wake.as_ref(), busy).await;
            }
            _ = shared.room.room_freed.notified(), if waits_for_room && room < want => {}
            _ = sleep_until_some(poll_at), if !poll_now => {
                poll_now = true;
            }
            _ = woken(wake.as_ref()), if !poll_now => {
                tracing::trace!(event = "wake", "woken: polling at once");
                poll_now = true;
            }
        }
    }
    // Claims still out were sent before shutdown began: give back what they bring,
    // and every lease still waiting for a slot.
    while let Some(joined) = calls.join_next().await {
        if let Ok(answer) = joined {
            shared.room.let_go(answer.asked);
            if let Ok(leases) = answer.leases {
                release_claimed(&shared, leases).await;
            }
        }
    }
    let queued = take_queued(&shared);
    if !queued.is_empty() {
        tracing::info!(
            count = queued.len(),
            "shutdown: giving back leases no slot had started"
        );
        shared.room.let_go(queued.len());
        release(&shared, &queued).await;
    }
}

/// Sends one claim for the room the worker has now (up to `claim_batch`).
async fn send(
    shared: &Arc<Shared>,
    calls: &mut JoinSet<Answer>,
    wake: Option<&WakeSignal>,
    busy: bool,
) {
    let s = &shared.settings;
    if !busy && s.claim_batch > 1 && shared.room.available() < s.claim_batch {
        // Handlers that are returning now free their slots within this turn of the
        // scheduler: let them, so this claim asks for them too instead of leaving them
        // to a claim of their own.
        tokio::task::yield_now().await;
    }
    // A run of the stream runs option may hold k - 1 leases beyond the slots.
    let batch = s.claim_batch + usize::try_from(s.stream_run).unwrap_or(1) - 1;
    let asked = shared.room.available().min(batch).min(s.limits.max_batch);
    if asked == 0 {
        return;
    }
    shared.room.hold(asked);
    let limit = u32::try_from(asked).unwrap_or(u32::MAX);
    let mut params = ClaimParams::new(s.queues[0].clone(), s.instance.clone(), limit, s.lease)
        .queues(s.queues.clone());
    if let Some(p) = s.partitioning {
        params = params.partitioned(p);
    }
    if s.stream_run > 1 {
        params = params.stream_runs(s.stream_run);
    }
    absorb_wake(wake);
    let sent = Instant::now();
    let store = Arc::clone(&shared.store);
    calls.spawn(
        async move {
            // A store that panics in a claim answers an internal error, so what the
            // claim held is let go like any failed claim's.
            let leases = match CatchPanic(store.claim(params)).await {
                Ok(answer) => answer,
                Err(_) => Err(Error::internal(store.name(), "the claim call panicked")),
            };
            Answer {
                leases,
                asked,
                sent,
            }
        }
        .instrument(shared.span.clone()),
    );
}

/// Starts the attempts of one answer to a claim that asked for `asked`; returns how
/// many. What the answer did not fill is let go at once.
async fn start(shared: &Arc<Shared>, mut leases: Vec<Lease>, asked: usize, sent: Instant) -> usize {
    if leases.len() > asked {
        let extra = leases.split_off(asked);
        tracing::error!(
            asked,
            got = asked + extra.len(),
            "the store answered more leases than asked; releasing the extra ones"
        );
        release_unstarted(shared, extra).await;
    }
    let got = leases.len();
    add(&shared.metrics.polls, 1);
    add(&shared.metrics.claimed, got as u64);
    let took = sent.elapsed();
    shared.export.claim.record(took.as_secs_f64());
    // The wall clock when the claim was sent, read once for all its leases: each
    // attempt's pickup latency counts from it on tokio's clock.
    let sent = Sent {
        at: sent,
        wall: SystemClock.now() - took,
    };
    if shared.export.single() {
        if got > 0 {
            shared.export.at(0).claimed.increment(got as u64);
        }
    } else {
        for l in &leases {
            let queue = shared.export.index(&l.item.queue);
            shared.export.at(queue).claimed.increment(1);
        }
    }
    shared.room.let_go(asked - got);
    if got > 0 {
        dispatch(shared, leases, sent);
    }
    got
}

/// Gives back leases claimed by a call that was out when shutdown began.
async fn release_claimed(shared: &Shared, leases: Vec<Lease>) {
    if !leases.is_empty() {
        tracing::info!(
            count = leases.len(),
            "claimed during shutdown; releasing at once"
        );
        release_unstarted(shared, leases).await;
    }
}

/// Registers the instance again (one heartbeat, limited to one heartbeat interval);
/// true when the store recorded it. Never while the heartbeat is switched off.
async fn register_again(shared: &Shared) -> bool {
    let s = &shared.settings;
    if !*shared.standing.heartbeat_on.borrow() {
        // Draining: the instance is meant to stay evicted.
        return false;
    }
    let call = shared
        .store
        .instance_heartbeat(HeartbeatParams::new(s.instance.clone()));
    matches!(timeout(s.heartbeat_interval, call).await, Ok(Ok(())))
}
