//! Time as every store sees it: a [`Timestamp`] read from one [`Clock`].
//!
//! Every comparison a store makes (is this lease expired? is this item due?) reads
//! the store's one clock, never a second source. Tests drive a [`ManualClock`] so
//! expiry is exercised without sleeping.

use std::fmt;
use std::ops::{Add, Sub};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An instant, in whole microseconds since the Unix epoch (UTC).
///
/// A plain integer so that every store (SQL `BIGINT`, memory, a user's own) stores and
/// compares it identically, with no time-zone or precision surprises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// Builds a timestamp from microseconds since the Unix epoch.
    pub const fn from_micros(micros: i64) -> Self {
        Timestamp(micros)
    }

    /// Microseconds since the Unix epoch.
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// This instant plus `d`, saturating at the end of the representable range.
    pub fn saturating_add(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_add(duration_micros(d)))
    }

    /// This instant minus `d`, saturating at the start of the representable range.
    pub fn saturating_sub(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_sub(duration_micros(d)))
    }

    /// How long after `earlier` this instant is; zero when it is not after it.
    pub fn duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0).max(0).unsigned_abs())
    }
}

/// Converts a duration to whole microseconds, saturating at `i64::MAX`.
pub fn duration_micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: Duration) -> Timestamp {
        self.saturating_add(d)
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, d: Duration) -> Timestamp {
        self.saturating_sub(d)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.div_euclid(1_000_000);
        let micros = self.0.rem_euclid(1_000_000);
        write!(f, "{secs}.{micros:06}s")
    }
}

/// The one source of time for a store.
///
/// # Contract
/// `now` never goes backwards for one clock value. Stores read it once per operation
/// and bind that value into every comparison the operation makes.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system wall clock.
///
/// Workers on different machines compare lease expiries written by each other's
/// clocks. The runtime bounds the damage of skew with the self-stop margin: a handler
/// stops itself when half a lease has passed since its last successful renewal, so
/// skew below half a lease cannot give two owners at once.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Timestamp(duration_micros(since))
    }
}

/// A clock that moves only when told to; clones share the same time.
///
/// Used by the conformance suite and tests to drive lease expiry without sleeping.
#[derive(Clone, Debug)]
pub struct ManualClock {
    micros: Arc<AtomicI64>,
}

impl ManualClock {
    /// A manual clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            micros: Arc::new(AtomicI64::new(start.0)),
        }
    }

    /// A manual clock standing at the current system time.
    pub fn starting_now() -> Self {
        ManualClock::new(SystemClock.now())
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.micros.fetch_add(duration_micros(d), Ordering::SeqCst);
    }

    /// Sets the clock to `t`. Panics in debug builds if that would move it backwards.
    pub fn set(&self, t: Timestamp) {
        let before = self.micros.swap(t.0, Ordering::SeqCst);
        debug_assert!(before <= t.0, "ManualClock moved backwards");
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::starting_now()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.micros.load(Ordering::SeqCst))
    }
}

/// A shared clock handle, as stores hold it.
pub type SharedClock = Arc<dyn Clock>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_time() {
        let a = ManualClock::new(Timestamp::from_micros(10));
        let b = a.clone();
        a.advance(Duration::from_micros(5));
        assert_eq!(b.now(), Timestamp::from_micros(15));
    }

    #[test]
    fn timestamp_arithmetic_saturates() {
        let t = Timestamp::from_micros(i64::MAX - 1);
        assert_eq!(t + Duration::from_secs(1), Timestamp::from_micros(i64::MAX));
        assert_eq!(
            Timestamp::from_micros(3).duration_since(Timestamp::from_micros(5)),
            Duration::ZERO
        );
    }
}
