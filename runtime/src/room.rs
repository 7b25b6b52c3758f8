//! How many leases the claim loop may hold, and ask for now: the room counters the
//! claim loop reads, and the prefetch rule.
//!
//! The claim loop may hold `concurrency` leases, plus `prefetch` more while the
//! handlers are short, so the next claim is on its way while the handlers run. The
//! counters are written where leases come and go: the claim loop holds what it asks
//! for, the slots let go of what they finish, the finalizer counts what the store
//! answered, and every finished handler's run time feeds the prefetch average.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::outbox::FLUSHES_IN_FLIGHT;
use crate::settings::Settings;

/// Handler run time in the moving average before any handler has returned: unknown,
/// so nothing is prefetched until the handlers have shown how long they take.
pub(crate) const UNKNOWN: u64 = u64::MAX;

/// The claim loop's room counters.
#[derive(Debug)]
pub(crate) struct Room {
    /// Leases asked for by claims out, queued, or being worked on (see
    /// [`Room::available`]).
    held: AtomicUsize,
    /// Outcomes left for the finalizer that the store has not answered yet: their
    /// leases are still held in the store (see [`Room::available`]).
    unflushed: AtomicUsize,
    /// Notified when held leases are let go down to `wake_at_held`, so a claim loop
    /// waiting for room claims.
    pub(crate) room_freed: Notify,
    /// The held count at or below which letting leases go wakes the claim loop (set
    /// by the loop before it waits: see [`Room::wake_at_room`]).
    wake_at_held: AtomicUsize,
    /// The moving average of handler run times, in microseconds (or [`UNKNOWN`]).
    handler_micros: AtomicU64,
    /// The settings the room is made of.
    concurrency: usize,
    prefetch: usize,
    stream_run: u32,
    finalize_batch: usize,
    renew_after: Duration,
}

impl Room {
    /// Nothing held, and the handlers' run time unknown.
    pub(crate) fn new(settings: &Settings) -> Self {
        Room {
            held: AtomicUsize::new(0),
            unflushed: AtomicUsize::new(0),
            room_freed: Notify::new(),
            wake_at_held: AtomicUsize::new(usize::MAX),
            handler_micros: AtomicU64::new(UNKNOWN),
            concurrency: settings.concurrency,
            prefetch: settings.prefetch,
            stream_run: settings.stream_run,
            finalize_batch: settings.finalize_batch,
            renew_after: settings.renew_after,
        }
    }

    /// How many more leases the claim loop may ask for now: the cap less the leases
    /// held, and less the finalize backlog (see [`Room::finalize_backlog`]).
    pub(crate) fn available(&self) -> usize {
        self.cap()
            .saturating_sub(self.held.load(Ordering::SeqCst) + self.finalize_backlog())
    }

    /// Outcomes waiting for the store beyond what the finalizer writes in a few
    /// flushes (the cap, or its flushes out and the batch it fills, whichever is
    /// more). Their leases are still held in the store, so while the finalizer falls
    /// behind the claims, the claims shrink by as much: the leases a worker holds stay
    /// bounded, rather than piling up (and expiring) behind a slow finalize.
    pub(crate) fn finalize_backlog(&self) -> usize {
        let allowance = self
            .cap()
            .max(self.finalize_batch.saturating_mul(FLUSHES_IN_FLIGHT + 1));
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

    /// Counts one outcome left for the finalizer (see [`Room::flushed`]).
    pub(crate) fn posted(&self) {
        self.unflushed.fetch_add(1, Ordering::SeqCst);
    }

    /// How many leases the claim loop may hold now.
    pub(crate) fn cap(&self) -> usize {
        // One stream run (G9) may hold k - 1 leases beyond the slots and prefetch.
        let run_extra = usize::try_from(self.stream_run).unwrap_or(1) - 1;
        self.concurrency + self.prefetch_now() + run_extra
    }

    /// Asks [`Room::let_go`] to wake the claim loop once the room reaches `want`
    /// (held leases fall to `cap - want`), and returns the room now, read after that
    /// was set: a lease let go after the read wakes the loop, one let go before is in
    /// the room returned.
    pub(crate) fn wake_at_room(&self, want: usize) -> usize {
        let cap = self.cap();
        self.wake_at_held
            .store(cap.saturating_sub(want.max(1)), Ordering::SeqCst);
        self.available()
    }

    /// The prefetch allowed now: as much of it as keeps a queued lease's wait for its
    /// slot (about `prefetch / concurrency` handler runs) within a quarter of the
    /// renewal interval, none while the handlers have not run yet.
    fn prefetch_now(&self) -> usize {
        let average = self.handler_micros.load(Ordering::Relaxed);
        if self.prefetch == 0 || average == UNKNOWN {
            return 0;
        }
        // prefetch * average / concurrency <= a quarter of the renewal interval.
        let fits = self.prefetch_off_micros() / average.max(1);
        self.prefetch
            .min(usize::try_from(fits).unwrap_or(usize::MAX))
    }

    /// The average handler run time from which not one lease is prefetched: a single
    /// queued lease would then wait about `1 / concurrency` runs, a quarter of the
    /// renewal interval.
    fn prefetch_off_micros(&self) -> u64 {
        let quarter = u64::try_from((self.renew_after / 4).as_micros()).unwrap_or(UNKNOWN - 1);
        u64::try_from(self.concurrency)
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
