//! From claimed lease to running handler: the ready queue, the slot tasks that work
//! it, and how many leases the claim loop may hold (the prefetch rule).
//!
//! A claim's leases are recorded and queued at once. Up to `concurrency` slot tasks
//! take them from the queue in claim order and run one attempt after another, so a
//! busy worker spawns a task per slot, not per attempt. A slot task that finds the
//! queue empty waits a moment for the next claim, then ends (at once when claiming
//! has stopped).
//!
//! The claim loop may hold `concurrency` leases, plus `prefetch` more while the
//! handlers are short, so the next claim is on its way while the handlers run. A
//! prefetched lease is leased in the store like any other, so G9 and G10 hold as they
//! do for running items; it waits in the queue for a slot, and one still waiting when
//! its renewal comes due is given back instead of renewed (see the renewal loop), so a
//! worker never renews a lease it has not started.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::model::{Lease, LeaseToken};

use super::worker::{Entry, Shared};

/// Handler run time in the moving average before any handler has returned: unknown,
/// so nothing is prefetched until the handlers have shown how long they take.
pub(crate) const UNKNOWN: u64 = u64::MAX;

impl Shared {
    /// How many more leases the claim loop may ask for now.
    pub(crate) fn room(&self) -> usize {
        // One stream run (G9) may hold k - 1 leases beyond the slots and prefetch.
        let run_extra = usize::try_from(self.settings.stream_run).unwrap_or(1) - 1;
        let cap = self.settings.concurrency + self.prefetch_now() + run_extra;
        cap.saturating_sub(self.held.load(Ordering::Acquire))
    }

    /// The prefetch allowed now: all of it while a queued lease would wait well under
    /// a renewal interval for its slot (about `prefetch / concurrency` handler runs),
    /// none while the handlers are slow or have not run yet.
    fn prefetch_now(&self) -> usize {
        let s = &self.settings;
        let average = self.handler_micros.load(Ordering::Relaxed);
        if s.prefetch > 0 && average != UNKNOWN && average <= self.prefetch_limit_micros() {
            s.prefetch
        } else {
            0
        }
    }

    /// The longest average handler run time at which the prefetch applies: a queued
    /// lease then waits about `prefetch / concurrency` runs, at most a quarter of the
    /// renewal interval.
    fn prefetch_limit_micros(&self) -> u64 {
        let s = &self.settings;
        let limit = (s.renew_after / 4)
            .saturating_mul(u32::try_from(s.concurrency).unwrap_or(u32::MAX))
            / u32::try_from(s.prefetch.max(1)).unwrap_or(u32::MAX);
        u64::try_from(limit.as_micros()).unwrap_or(UNKNOWN - 1)
    }

    /// Counts `n` leases the claim loop asked for.
    pub(crate) fn hold(&self, n: usize) {
        self.held.fetch_add(n, Ordering::AcqRel);
    }

    /// Lets go of `n` held leases (finished, given back, or never claimed) and tells
    /// the claim loop there is room.
    pub(crate) fn let_go(&self, n: usize) {
        if n > 0 {
            self.held.fetch_sub(n, Ordering::AcqRel);
            self.room_freed.notify_one();
        }
    }

    /// Records `leases`, claimed by a call sent at `sent`, under one lock, queues them,
    /// and starts slot tasks for them up to the concurrency.
    pub(crate) fn dispatch(self: &Arc<Self>, leases: Vec<Lease>, sent: Instant) {
        let due = sent + self.settings.renew_after;
        let mut wake_renewal = false;
        {
            let mut map = self.inflight();
            for lease in &leases {
                map.entries.insert(
                    lease.token,
                    Entry {
                        cancel: CancellationToken::new(),
                        stop: Arc::new(OnceLock::new()),
                        renewed_at: sent,
                        capped: false,
                        started: false,
                        handler_done: false,
                        ended: false,
                        lost_counted: false,
                        unanswered: false,
                        renew_due: due,
                        queue: self.export.index(&lease.item.queue),
                    },
                );
                wake_renewal |= map.push_due(lease.token, due);
            }
        }
        if wake_renewal {
            self.renew_wake.notify_one();
        }
        let queued = {
            let mut ready = self.ready();
            ready.extend(leases.into_iter().map(|l| (l, sent)));
            ready.len()
        };
        // Idle slot tasks take the new leases; more are started, one per queued lease
        // beyond them, up to the concurrency.
        let idle = self.idle_slots.load(Ordering::Acquire);
        if idle > 0 {
            self.work.notify_waiters();
        }
        let mut tasks = self.slot_tasks.load(Ordering::Acquire);
        let mut spawned = idle;
        while spawned < queued && tasks < self.settings.concurrency {
            match self.slot_tasks.compare_exchange(
                tasks,
                tasks + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.spawn_slot();
                    spawned += 1;
                    tasks += 1;
                }
                Err(now) => tasks = now,
            }
        }
    }

    fn spawn_slot(self: &Arc<Self>) {
        let shared = Arc::clone(self);
        let task = self
            .tracker
            .spawn(slot(shared).instrument(self.span.clone()));
        let mut handles = self.slot_handles();
        handles.retain(|h| !h.is_finished());
        handles.push(task.abort_handle());
    }

    /// Takes the next queued lease that is still this worker's to start, marking it
    /// started. None when the queue is empty or claiming has stopped.
    fn next_lease(&self) -> Option<(Lease, Instant)> {
        loop {
            if self.stop_claiming.is_cancelled() {
                return None;
            }
            let (lease, sent) = self.ready().pop_front()?;
            let mut map = self.inflight();
            match map.entries.get_mut(&lease.token) {
                Some(e) => {
                    e.started = true;
                    return Some((lease, sent));
                }
                // Given back while it waited (its renewal came due first).
                None => continue,
            }
        }
    }

    /// Takes the next queued lease with the rest of its stream run (G9): the leases
    /// right behind it in the queue that one claim answered for the same stream, in
    /// stream order. The rest stay unstarted until their turn on this slot (a renewal
    /// coming due first gives them back, as for any lease waiting for a slot). Empty
    /// when `next_lease` is None.
    fn next_run(&self) -> Vec<(Lease, Instant)> {
        let Some(first) = self.next_lease() else {
            return Vec::new();
        };
        let stream = match &first.0.item.stream {
            Some(s) if self.settings.stream_run > 1 => s.clone(),
            _ => return vec![first],
        };
        let sent = first.1;
        let mut run = vec![first];
        let mut ready = self.ready();
        let map = self.inflight();
        while run.len() < usize::try_from(self.settings.stream_run).unwrap_or(1) {
            let same = ready
                .front()
                .is_some_and(|(l, at)| *at == sent && l.item.stream.as_ref() == Some(&stream));
            if !same {
                break;
            }
            let Some((lease, at)) = ready.pop_front() else {
                break;
            };
            if map.entries.contains_key(&lease.token) {
                run.push((lease, at));
            }
        }
        run
    }

    /// Marks the waiting lease `token` of a stream run started as its turn comes;
    /// false when it was given back meanwhile.
    fn start_waiting(&self, token: &LeaseToken) -> bool {
        match self.inflight().entries.get_mut(token) {
            Some(e) if !e.started => {
                e.started = true;
                true
            }
            _ => false,
        }
    }

    /// Forgets the waiting leases of a stream run that will not be started, under one
    /// lock (a renewal may be giving some back at once); returns the tokens it took.
    fn drop_waiting(&self, rest: &[(Lease, Instant)]) -> Vec<LeaseToken> {
        let mut map = self.inflight();
        let mut taken = Vec::new();
        for (l, _) in rest {
            if map.entries.get(&l.token).is_some_and(|e| !e.started) {
                map.entries.remove(&l.token);
                taken.push(l.token);
            }
        }
        drop(map);
        self.let_go(taken.len());
        taken
    }

    /// Takes every lease still queued, for shutdown to give back.
    pub(crate) fn take_queued(&self) -> Vec<LeaseToken> {
        let drained: Vec<LeaseToken> = self.ready().drain(..).map(|(l, _)| l.token).collect();
        let map = self.inflight();
        drained
            .into_iter()
            .filter(|t| map.entries.get(t).is_some_and(|e| !e.started))
            .collect()
    }

    /// A prefetched lease waited a renewal interval for its slot: the handlers are not
    /// as short as their average said. Raises the average to twice what turns the
    /// prefetch off, so it stays off until short runs bring the average down again
    /// (and a given-back lease is not claimed straight back into the queue).
    pub(crate) fn prefetch_missed(&self) {
        let floor = self
            .prefetch_limit_micros()
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

/// Runs one lease, or the leases of one stream run one after another in stream order
/// (G9). After an item that did not complete, or once claiming has stopped, the rest
/// of the run is not started: the store puts those items back untouched when the
/// earlier item's failure or expiry lands, and on shutdown they are given back at once.
async fn run_items(shared: &Arc<Shared>, run: Vec<(Lease, Instant)>) {
    let mut items = run.into_iter();
    let mut first = true;
    while let Some((lease, sent)) = items.next() {
        if !first && !shared.start_waiting(&lease.token) {
            // Given back while it waited; the store put the rest of the run back.
            let rest: Vec<(Lease, Instant)> = items.collect();
            shared.drop_waiting(&rest);
            return;
        }
        first = false;
        // The handler's run time reaches the prefetch average from the attempt itself
        // (`record_run`), on the clock reading that also feeds the handler histogram.
        let completed = super::supervise::supervise(shared, lease, sent).await;
        shared.let_go(1);
        if items.as_slice().is_empty() || (completed && !shared.stop_claiming.is_cancelled()) {
            continue;
        }
        let rest: Vec<(Lease, Instant)> = items.collect();
        let tokens = shared.drop_waiting(&rest);
        if shared.stop_claiming.is_cancelled() {
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
        return;
    }
}

/// How long a slot task with nothing to run waits for the next claim before it ends.
const SLOT_IDLE: Duration = Duration::from_secs(1);

/// One handler slot: runs queued attempts one after another; with the queue empty it
/// waits up to [`SLOT_IDLE`] for the next claim's leases, then ends.
async fn slot(shared: Arc<Shared>) {
    loop {
        loop {
            let run = shared.next_run();
            if run.is_empty() {
                break;
            }
            run_items(&shared, run).await;
        }
        if shared.stop_claiming.is_cancelled() {
            break;
        }
        // Registered before the queue is looked at again, so leases queued from here
        // on wake this task.
        let work = shared.work.notified();
        tokio::pin!(work);
        work.as_mut().enable();
        if !shared.ready().is_empty() {
            continue;
        }
        shared.idle_slots.fetch_add(1, Ordering::AcqRel);
        let woken = tokio::select! {
            _ = &mut work => true,
            _ = tokio::time::sleep(SLOT_IDLE) => false,
            _ = shared.stop_claiming.cancelled() => false,
        };
        shared.idle_slots.fetch_sub(1, Ordering::AcqRel);
        if !woken {
            break;
        }
    }
    shared.slot_tasks.fetch_sub(1, Ordering::AcqRel);
    // A lease queued after this task stopped looking, while it still counted, found
    // no slot to start: start one for it.
    if !shared.stop_claiming.is_cancelled() && !shared.ready().is_empty() {
        let mut tasks = shared.slot_tasks.load(Ordering::Acquire);
        while tasks < shared.settings.concurrency {
            match shared.slot_tasks.compare_exchange(
                tasks,
                tasks + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    shared.spawn_slot();
                    break;
                }
                Err(now) => tasks = now,
            }
        }
    }
}
