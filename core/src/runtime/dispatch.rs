//! From claimed lease to running handler: the ready queue, the tasks that work it,
//! and how many leases the claim loop may hold (the prefetch rule).
//!
//! A claim's leases are recorded and queued at once, each as the [`Job`] its handler
//! will receive (one shared [`Control`] per attempt: its stop reason and a cancellation
//! token made only when asked for). At most `concurrency` runs (an attempt, or the
//! attempts of one stream run) are started at once: a slot is taken from the count of
//! running runs, not from a task of its own.
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
//! The claim loop may hold `concurrency` leases, plus `prefetch` more while the
//! handlers are short, so the next claim is on its way while the handlers run. A
//! prefetched lease is leased in the store like any other, so G9 and G10 hold as they
//! do for running items; it waits in the queue for a slot, and one still waiting when
//! its renewal comes due is given back instead of renewed (see the renewal loop), so a
//! worker never renews a lease it has not started.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::model::{Lease, LeaseToken};
use crate::time::Timestamp;

use super::handler::Job;
use super::supervise::{begin, supervise, Begun};
use super::worker::{Entry, GroupRef, Shared};

/// A claimed attempt waiting in the ready queue: its job, and when the claim that
/// leased it was sent.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) job: Job,
    pub(crate) sent: Sent,
}

/// When a claim call was sent: on tokio's clock (the self-stop counts from it), and
/// on the wall clock, derived once per claim answer, so an attempt's pickup latency
/// needs no wall clock reading of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sent {
    pub(crate) at: Instant,
    pub(crate) wall: Timestamp,
}

/// What one slot runs: an attempt, or the attempts of one stream run in stream order
/// (G9). `rest` is empty (and unallocated) for a lone attempt.
pub(crate) struct Run<'a> {
    /// The first attempt, begun as it was taken from the queue.
    first: Begun<'a>,
    rest: Vec<Queued>,
}

/// Handler run time in the moving average before any handler has returned: unknown,
/// so nothing is prefetched until the handlers have shown how long they take.
pub(crate) const UNKNOWN: u64 = u64::MAX;

impl Shared {
    /// How many more leases the claim loop may ask for now: the cap less the leases
    /// held, and less the finalize backlog (see [`Shared::finalize_backlog`]).
    pub(crate) fn room(&self) -> usize {
        self.cap()
            .saturating_sub(self.held.load(Ordering::SeqCst) + self.finalize_backlog())
    }

    /// Outcomes waiting for the store beyond what the finalizer writes in a few
    /// flushes (the cap, or its flushes out and the batch it fills, whichever is
    /// more). Their leases are still held in the store, so while the finalizer falls
    /// behind the claims, the claims shrink by as much: the leases a worker holds stay
    /// bounded, rather than piling up (and expiring) behind a slow finalize.
    pub(crate) fn finalize_backlog(&self) -> usize {
        let allowance = self.cap().max(
            self.settings
                .finalize_batch
                .saturating_mul(super::finalize::FLUSHES_IN_FLIGHT + 1),
        );
        self.unflushed
            .load(Ordering::SeqCst)
            .saturating_sub(allowance)
    }

    /// Counts `n` outcomes the store answered; wakes the claim loop when a finalize
    /// backlog held its claims back.
    pub(crate) fn flushed(&self, n: usize) {
        if n > 0 {
            let backlog = self.finalize_backlog();
            self.unflushed.fetch_sub(n, Ordering::SeqCst);
            if backlog > 0 {
                self.room_freed.notify_one();
            }
        }
    }

    /// How many leases the claim loop may hold now.
    pub(crate) fn cap(&self) -> usize {
        // One stream run (G9) may hold k - 1 leases beyond the slots and prefetch.
        let run_extra = usize::try_from(self.settings.stream_run).unwrap_or(1) - 1;
        self.settings.concurrency + self.prefetch_now() + run_extra
    }

    /// Asks [`Shared::let_go`] to wake the claim loop once the room reaches `want`
    /// (held leases fall to `cap - want`), and returns the room now, read after that
    /// was set: a lease let go after the read wakes the loop, one let go before is in
    /// the room returned.
    pub(crate) fn wake_at_room(&self, want: usize) -> usize {
        let cap = self.cap();
        self.wake_at_held
            .store(cap.saturating_sub(want.max(1)), Ordering::SeqCst);
        self.room()
    }

    /// The prefetch allowed now: as much of it as keeps a queued lease's wait for its
    /// slot (about `prefetch / concurrency` handler runs) within a quarter of the
    /// renewal interval, none while the handlers have not run yet.
    fn prefetch_now(&self) -> usize {
        let s = &self.settings;
        let average = self.handler_micros.load(Ordering::Relaxed);
        if s.prefetch == 0 || average == UNKNOWN {
            return 0;
        }
        // prefetch * average / concurrency <= a quarter of the renewal interval.
        let fits = self.prefetch_off_micros() / average.max(1);
        s.prefetch.min(usize::try_from(fits).unwrap_or(usize::MAX))
    }

    /// The average handler run time from which not one lease is prefetched: a single
    /// queued lease would then wait about `1 / concurrency` runs, a quarter of the
    /// renewal interval.
    fn prefetch_off_micros(&self) -> u64 {
        let s = &self.settings;
        let quarter = u64::try_from((s.renew_after / 4).as_micros()).unwrap_or(UNKNOWN - 1);
        u64::try_from(s.concurrency)
            .unwrap_or(u64::MAX)
            .saturating_mul(quarter)
            .min(UNKNOWN - 1)
    }

    /// Counts `n` leases the claim loop asked for.
    pub(crate) fn hold(&self, n: usize) {
        self.held.fetch_add(n, Ordering::SeqCst);
    }

    /// Lets go of `n` held leases (finished, given back, or never claimed) and tells
    /// the claim loop there is room.
    pub(crate) fn let_go(&self, n: usize) {
        if n > 0 {
            let after = self.held.fetch_sub(n, Ordering::SeqCst).saturating_sub(n);
            // Only when the claim loop would claim now: not once per finished lease.
            if after <= self.wake_at_held.load(Ordering::SeqCst) {
                self.room_freed.notify_one();
            }
        }
    }

    /// Records `leases`, claimed by a call sent at `sent`, under one lock, queues them
    /// as jobs, and wakes (or starts) a runner for them.
    pub(crate) fn dispatch(self: &Arc<Self>, leases: Vec<Lease>, sent: Sent) {
        let due = sent.at + self.settings.renew_after;
        let controls = self.controls(leases.len());
        // The claim's leases share one renewal group: one schedule entry for them all.
        let wake_renewal = self.inflight().insert_claimed(
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
                        queue: self.export.index(&lease.item.queue),
                    },
                )
            }),
            due,
        );
        if wake_renewal {
            self.renew_wake.notify_one();
        }
        // Each lease moves once, from the claim's answer into the queue, as its job.
        self.ready().extend(
            leases
                .into_iter()
                .zip(controls)
                .map(|(lease, control)| Queued {
                    job: Job::with_control(lease, control),
                    sent,
                }),
        );
        if self.idle_runners.load(Ordering::Acquire) > 0 {
            self.work.notify_waiters();
        } else {
            self.start_runner();
        }
    }

    /// Starts one more runner, unless as many run as the worker may have.
    fn start_runner(self: &Arc<Self>) {
        let mut runners = self.runners.load(Ordering::Acquire);
        while runners < self.max_runners {
            match self.runners.compare_exchange(
                runners,
                runners + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.spawn_serve(true);
                    return;
                }
                Err(now) => runners = now,
            }
        }
    }

    /// Spawns a task that works the ready queue: a runner (counted in `runners`), or
    /// a slot.
    fn spawn_serve(self: &Arc<Self>, runner: bool) {
        let shared = Arc::clone(self);
        self.tracker
            .spawn(serve(shared, runner).instrument(self.span.clone()));
    }

    /// Takes one of the `concurrency` slots; false when every slot is taken.
    fn take_slot(&self) -> bool {
        let concurrency = self.settings.concurrency;
        self.running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < concurrency).then_some(n + 1)
            })
            .is_ok()
    }

    /// Gives a slot back.
    fn free_slot(&self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }

    /// True when a run could be taken now: something is queued and a slot is free.
    fn can_take(&self) -> bool {
        self.running.load(Ordering::Acquire) < self.settings.concurrency && !self.ready().is_empty()
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
    fn next_run(&self) -> Option<Run<'_>> {
        if !self.take_slot() {
            return None;
        }
        let stream_run = usize::try_from(self.settings.stream_run).unwrap_or(1);
        let mut ready = self.ready();
        loop {
            if self.claiming_stopped() {
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
                        first: begin(self, job, sent),
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
                first: begin(self, job, sent),
                rest,
            });
        }
        drop(ready);
        self.free_slot();
        None
    }

    /// Forgets the waiting leases of a stream run that will not be started, under one
    /// lock (a renewal may be giving some back at once); returns the tokens it took.
    fn drop_waiting(&self, rest: &[Queued]) -> Vec<LeaseToken> {
        let mut map = self.inflight();
        let mut taken = Vec::new();
        for q in rest {
            let token = q.job.lease.token;
            if q.job.control().give_back() && map.forget(&token).is_some() {
                taken.push(token);
            }
        }
        drop(map);
        self.let_go(taken.len());
        taken
    }

    /// Takes every lease still queued, for shutdown to give back.
    pub(crate) fn take_queued(&self) -> Vec<LeaseToken> {
        let drained: Vec<Queued> = self.ready().drain(..).collect();
        let map = self.inflight();
        drained
            .into_iter()
            .filter(|q| q.job.control().give_back() && map.entries.contains_key(&q.job.lease.token))
            .map(|q| q.job.lease.token)
            .collect()
    }

    /// A prefetched lease waited a renewal interval for its slot: the handlers are not
    /// as short as their average said. Raises the average to twice what turns the
    /// prefetch off, so it stays off until short runs bring the average down again
    /// (and a given-back lease is not claimed straight back into the queue).
    pub(crate) fn prefetch_missed(&self) {
        let floor = self
            .prefetch_off_micros()
            .saturating_mul(2)
            .min(UNKNOWN - 1);
        let _ = self
            .handler_micros
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |avg| {
                Some(if avg == UNKNOWN {
                    floor
                } else {
                    avg.max(floor)
                })
            });
    }

    /// Folds one handler run time into the moving average (weight 1/8).
    pub(crate) fn record_run(&self, took: Duration) {
        let sample = u64::try_from(took.as_micros()).unwrap_or(UNKNOWN - 1);
        let _ = self
            .handler_micros
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |avg| {
                Some(if avg == UNKNOWN {
                    sample
                } else {
                    avg - avg / 8 + sample / 8
                })
            });
    }
}

/// Runs one run: one lease, or the leases of one stream run one after another in
/// stream order (G9), on the calling task. After an item that did not complete, or
/// once claiming has stopped, the rest of the run is not started: the store puts those
/// items back untouched when the earlier item's failure or expiry lands, and on
/// shutdown they are given back at once. A runner (`*runner` true) whose handler does
/// not finish on its first poll becomes a slot, and a new runner takes its place.
async fn run_items(shared: &Arc<Shared>, run: Run<'_>, runner: &mut bool) {
    let Run { first, rest } = run;
    // The handler's run time reaches the prefetch average from the attempt itself
    // (`record_run`), on the clock reading that also feeds the handler histogram.
    let mut completed = supervise(shared, first, runner).await;
    shared.let_go(1);
    if rest.is_empty() {
        return;
    }
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
            shared.drop_waiting(&rest);
            return;
        }
        completed = supervise(shared, begin(shared, job, sent), runner).await;
        shared.let_go(1);
    }
}

/// The rest of a stream run after an item that did not complete, or once claiming has
/// stopped: not started; given back at once on shutdown.
async fn abandon_rest(shared: &Arc<Shared>, rest: &[Queued]) {
    let tokens = shared.drop_waiting(rest);
    if shared.claiming_stopped() {
        tracing::debug!(
            count = tokens.len(),
            "shutdown: giving back the rest of a stream run"
        );
        super::worker::release(shared, &tokens).await;
    } else {
        tracing::debug!(
            count = tokens.len(),
            "an item of a stream run did not complete; the rest of the run is not started"
        );
    }
}

impl Shared {
    /// A runner's handler did not finish on its first poll: the runner stays with it
    /// as a slot, and a new runner takes its place on the queue.
    pub(crate) fn replace_runner(self: &Arc<Self>) {
        self.spawn_serve(true);
    }
}

/// Works the ready queue: takes runs while a slot is free and runs them (see the
/// module docs). A runner waits for the next claim when there is nothing to take and
/// ends when claiming stops; a slot ends as soon as there is nothing to take.
async fn serve(shared: Arc<Shared>, mut runner: bool) {
    loop {
        if let Some(run) = shared.next_run() {
            run_items(&shared, run, &mut runner).await;
            shared.free_slot();
            // A runner that keeps finding work yields now and then.
            tokio::task::coop::consume_budget().await;
            continue;
        }
        if !runner || shared.claiming_stopped() {
            break;
        }
        // Registered before the queue is looked at again, so leases queued from here
        // on wake this task (and so does the end of claiming).
        let work = shared.work.notified();
        tokio::pin!(work);
        work.as_mut().enable();
        // Counted idle before the last look, so a claim queued after that look sees
        // an idle runner and wakes it.
        shared.idle_runners.fetch_add(1, Ordering::AcqRel);
        if !shared.can_take() && !shared.claiming_stopped() {
            work.await;
        }
        shared.idle_runners.fetch_sub(1, Ordering::AcqRel);
    }
    if runner {
        shared.runners.fetch_sub(1, Ordering::AcqRel);
    }
}
