//! From claimed lease to running handler: a claim's leases recorded and queued, and
//! the runner tasks that work the queue.
//!
//! A claim's leases are recorded and queued at once, each as the [`Job`] its handler
//! will receive (one shared [`Control`](crate::attempt::Control) per attempt: its stop
//! reason and a cancellation token made only when asked for). At most `concurrency`
//! runs (an attempt, or the attempts of one stream run) are started at once: a slot is
//! taken from the count of running runs, not from a task of its own.
//!
//! The queue is worked by a few *runner* tasks (at most one per thread of the tokio
//! runtime, and no more than the concurrency), started as claims come in and alive
//! until claiming stops. A runner takes the next run and polls its handler once, on
//! its own task: a handler that finishes on that first poll costs no task and no
//! wake-up, and the runner goes on with the next lease. A handler that does not finish
//! keeps the runner's task: the runner becomes a *slot* that supervises it (timers,
//! cancellation) to its end, and a new runner is started in its place. A slot, once
//! its run is over, takes more runs from the queue the same way (supervising in place
//! whatever pends) and ends when the queue has none for it.
//!
//! How many leases the claim loop may hold (the prefetch rule) is the room's (see
//! [`Room`](crate::room::Room)); the queue and the slot and runner counts are the
//! [`Slots`]. A prefetched lease is leased in the store like any other, so G9 and G10
//! hold as they do for running items; it waits in the queue for a slot, and one still
//! waiting when its renewal comes due is given back instead of renewed (see the
//! renewal loop), so a worker never renews a lease it has not started.
//!
//! State: writes `inflight` (records each claim's attempts, forgets the rest of a
//! stream run), `slots` (the queue, the slot and runner counts) and `room` (lets go
//! of a lease when its run ends).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;

use tracing::Instrument;

use tenure_core::{Lease, LeaseToken};

use crate::handler::Job;
use crate::inflight::{Entry, GroupRef};
use crate::release::release;
use crate::shared::Shared;
use crate::slots::{Queued, Sent, Slots};
use crate::supervise::{begin, first_poll, Begun, Started};

/// What a serving task is: one of the few *runners* that wait on the ready queue, or
/// a *slot*, a task that stays with a handler that did not finish on its first poll
/// (and then serves the queue until it finds nothing to take).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Serving {
    Runner,
    Slot,
}

impl Serving {
    /// After the first poll of a handler on this task: when it did not finish, a
    /// runner stays with it as a slot, and a new runner takes its place on the queue.
    fn after_first_poll(&mut self, shared: &Arc<Shared>, started: &Started<'_>) {
        if *self == Serving::Runner && matches!(started, Started::Watching(_)) {
            *self = Serving::Slot;
            spawn_serve(shared, Serving::Runner);
        }
    }
}

/// What one slot runs: an attempt, or the attempts of one stream run in stream order
/// (G9). `rest` is empty (and unallocated) for a lone attempt.
struct Run<'a> {
    /// The first attempt, begun as it was taken from the queue.
    first: Begun<'a>,
    rest: Vec<Queued>,
}

/// Records `leases`, claimed by a call sent at `sent`, under one lock, queues them
/// as jobs, and wakes (or starts) a runner for them.
pub(crate) fn dispatch(shared: &Arc<Shared>, leases: Vec<Lease>, sent: Sent) {
    let due = sent.at + shared.settings.renew_after;
    let controls = shared.inflight.controls(leases.len());
    // The claim's leases share one renewal group: one schedule entry for them all.
    let wake_renewal = shared.inflight.lock().insert_claimed(
        leases.iter().zip(&controls).map(|(lease, control)| {
            (
                lease.token,
                Entry {
                    control: Arc::clone(control),
                    renewed_at: sent.at,
                    capped: false,
                    lost_counted: false,
                    unanswered: false,
                    group: GroupRef::NONE,
                    queue: shared.export.index(&lease.item.queue),
                },
            )
        }),
        due,
    );
    if wake_renewal {
        shared.inflight.renew_wake.notify_one();
    }
    // Each lease moves once, from the claim's answer into the queue, as its job.
    shared.slots.ready().extend(
        leases
            .into_iter()
            .zip(controls)
            .map(|(lease, control)| Queued {
                job: Job::with_control(lease, control),
                sent,
            }),
    );
    if shared.slots.idle_runners.load(Ordering::Acquire) > 0 {
        shared.slots.work.notify_waiters();
    } else {
        start_runner(shared);
    }
}

/// Starts one more runner, unless as many run as the worker may have.
fn start_runner(shared: &Arc<Shared>) {
    if shared.slots.add_runner() {
        spawn_serve(shared, Serving::Runner);
    }
}

/// Spawns a task that works the ready queue: a runner (counted in the slots'
/// runners), or a slot.
fn spawn_serve(shared: &Arc<Shared>, serving: Serving) {
    let task = Arc::clone(shared);
    shared
        .slots
        .tracker
        .spawn(serve(task, serving).instrument(shared.span.clone()));
}

/// Takes the next queued lease that is still this worker's to start (marking it
/// started) with the rest of its stream run (G9): the leases right behind it in
/// the queue that one claim answered for the same stream, in stream order. The
/// rest stay unstarted until their turn on this slot (a renewal coming due first
/// gives them back, as for any lease waiting for a slot). Takes one of the
/// `concurrency` slots for the run; None (and no slot) when no slot is free, the
/// queue is empty or claiming has stopped.
///
/// All under one lock of the queue, and the first lease leaves the queue straight
/// into its handler's call: it is moved once.
fn next_run(shared: &Shared) -> Option<Run<'_>> {
    let slots: &Slots = &shared.slots;
    if !slots.take_slot() {
        return None;
    }
    let stream_run = usize::try_from(shared.settings.stream_run).unwrap_or(1);
    let mut ready = slots.ready();
    loop {
        if shared.claiming_stopped() {
            break;
        }
        let Some(front) = ready.front() else {
            break;
        };
        // False when it was given back while it waited (its renewal came due
        // first).
        if !front.job.control().start() {
            ready.pop_front();
            continue;
        }
        let stream = match &front.job.lease.item.stream {
            Some(s) if stream_run > 1 => s.clone(),
            _ => {
                let Some(Queued { job, sent }) = ready.pop_front() else {
                    break;
                };
                drop(ready);
                return Some(Run {
                    first: begin(shared, job, sent),
                    rest: Vec::new(),
                });
            }
        };
        let Some(Queued { job, sent }) = ready.pop_front() else {
            break;
        };
        let mut rest = Vec::new();
        while rest.len() + 1 < stream_run {
            let same = ready.front().is_some_and(|q| {
                q.sent == sent && q.job.lease.item.stream.as_ref() == Some(&stream)
            });
            if !same {
                break;
            }
            let Some(queued) = ready.pop_front() else {
                break;
            };
            if !queued.job.control().phase().given_back {
                rest.push(queued);
            }
        }
        drop(ready);
        return Some(Run {
            first: begin(shared, job, sent),
            rest,
        });
    }
    drop(ready);
    slots.free_slot();
    None
}

/// Forgets the waiting leases of a stream run that will not be started, under one
/// lock (a renewal may be giving some back at once); returns the tokens it took.
fn drop_waiting(shared: &Shared, rest: &[Queued]) -> Vec<LeaseToken> {
    let mut map = shared.inflight.lock();
    let mut taken = Vec::new();
    for q in rest {
        let token = q.job.lease.token;
        if q.job.control().give_back() && map.forget(&token).is_some() {
            taken.push(token);
        }
    }
    drop(map);
    shared.room.let_go(taken.len());
    taken
}

/// Takes every lease still queued, for shutdown to give back.
pub(crate) fn take_queued(shared: &Shared) -> Vec<LeaseToken> {
    let drained: Vec<Queued> = shared.slots.ready().drain(..).collect();
    let map = shared.inflight.lock();
    drained
        .into_iter()
        .filter(|q| q.job.control().give_back() && map.entries.contains_key(&q.job.lease.token))
        .map(|q| q.job.lease.token)
        .collect()
}

/// Goes on with the rest of a stream run (G9), on the calling task, once its first
/// item ended (`completed` when its outcome was a complete): the next item is started
/// only after an item that completed and while claiming goes on; otherwise the rest
/// is not started: the store puts those items back untouched when the earlier item's
/// failure or expiry lands, and on shutdown they are given back at once. A runner
/// whose handler does not finish on its first poll becomes a slot, and a new runner
/// takes its place.
async fn run_rest(
    shared: &Arc<Shared>,
    mut completed: bool,
    rest: Vec<Queued>,
    serving: &mut Serving,
) {
    let mut rest = rest.into_iter();
    while let Some(Queued { job, sent }) = rest.next() {
        if !completed || shared.claiming_stopped() {
            let rest: Vec<Queued> = std::iter::once(Queued { job, sent }).chain(rest).collect();
            abandon_rest(shared, &rest).await;
            return;
        }
        // False when it was given back while it waited.
        if !job.control().start() {
            // Given back while it waited; the store put the rest of the run back.
            let rest: Vec<Queued> = rest.collect();
            drop_waiting(shared, &rest);
            return;
        }
        completed = run_here(shared, begin(shared, job, sent), serving).await;
        shared.room.let_go(1);
    }
}

/// The rest of a stream run after an item that did not complete, or once claiming has
/// stopped: not started; given back at once on shutdown.
async fn abandon_rest(shared: &Arc<Shared>, rest: &[Queued]) {
    let tokens = drop_waiting(shared, rest);
    if shared.claiming_stopped() {
        tracing::debug!(
            count = tokens.len(),
            "shutdown: giving back the rest of a stream run"
        );
        release(shared, &tokens).await;
    } else {
        tracing::debug!(
            count = tokens.len(),
            "an item of a stream run did not complete; the rest of the run is not started"
        );
    }
}

/// Runs one begun attempt on this task: its handler is polled once at once
/// ([`first_poll`]), and one that does not finish then is supervised here to its end.
/// True when the attempt's outcome is a complete (a stream run goes on to its next
/// item only then, G9).
async fn run_here(shared: &Arc<Shared>, begun: Begun<'_>, serving: &mut Serving) -> bool {
    let mut begun = Some(begun);
    let started = std::future::poll_fn(|cx| {
        Poll::Ready(begun.take().map(|b| {
            let started = first_poll(shared, b, cx);
            serving.after_first_poll(shared, &started);
            started
        }))
    })
    .await;
    match started {
        Some(started) => started.ended().await,
        // Polled once only: the attempt is always there.
        None => false,
    }
}

/// Works the ready queue: takes runs while a slot is free and runs them (see the
/// module docs). A runner waits for the next claim when there is nothing to take and
/// ends when claiming stops; a slot ends as soon as there is nothing to take.
///
/// The next run is taken and its first handler polled once within one poll of this
/// task ([`first_poll`]), so an attempt that finishes at once never moves into a
/// future's state; one that pends is supervised here to its end.
async fn serve(shared: Arc<Shared>, mut serving: Serving) {
    loop {
        let next = std::future::poll_fn(|cx| {
            Poll::Ready(next_run(&shared).map(|Run { first, rest }| {
                let started = first_poll(&shared, first, cx);
                serving.after_first_poll(&shared, &started);
                (started, rest)
            }))
        })
        .await;
        if let Some((started, rest)) = next {
            // The handler's run time reaches the prefetch average from the attempt
            // itself (`record_run`), on the clock reading that also feeds the handler
            // histogram.
            let completed = started.ended().await;
            shared.room.let_go(1);
            if !rest.is_empty() {
                run_rest(&shared, completed, rest, &mut serving).await;
            }
            shared.slots.free_slot();
            // A runner that keeps finding work yields now and then.
            tokio::task::coop::consume_budget().await;
            continue;
        }
        if serving == Serving::Slot || shared.claiming_stopped() {
            break;
        }
        // Registered before the queue is looked at again, so leases queued from here
        // on wake this task (and so does the end of claiming).
        let work = shared.slots.work.notified();
        tokio::pin!(work);
        work.as_mut().enable();
        // Counted idle before the last look, so a claim queued after that look sees
        // an idle runner and wakes it.
        shared.slots.idle_runners.fetch_add(1, Ordering::AcqRel);
        if !shared.slots.can_take() && !shared.claiming_stopped() {
            work.await;
        }
        shared.slots.idle_runners.fetch_sub(1, Ordering::AcqRel);
    }
    if serving == Serving::Runner {
        shared.slots.runner_ended();
    }
}
