//! The claim loop's adaptive poll interval.

use std::time::Duration;

/// How long the claim loop waits between polls that found no more work.
///
/// After a claim that filled every free slot the loop polls again as soon as a slot is
/// free. Otherwise it waits [`PollPolicy::wait`] for the number of consecutive empty
/// polls so far: the base interval after a poll that found some work and after the
/// first empty one, then doubling from the second consecutive empty poll, capped at
/// `max`. Any non-empty claim resets the count. A failed claim counts as empty. A wake
/// signal ([`Store::wake_signal`](crate::Store::wake_signal)) ends any wait at once.
///
/// With the defaults (base 250 ms, max 10 s) the waits after consecutive empty polls
/// are 250, 500, 1000, 2000, 4000, 8000, then 10 000 ms. A `max` at or below `base`
/// turns the backoff off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollPolicy {
    /// The shortest wait. Default 250 ms.
    pub base: Duration,
    /// The longest wait. Default 10 s.
    pub max: Duration,
}

impl Default for PollPolicy {
    fn default() -> Self {
        PollPolicy {
            base: Duration::from_millis(250),
            max: Duration::from_secs(10),
        }
    }
}

impl PollPolicy {
    /// A policy starting at `base` and capped at `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        PollPolicy { base, max }
    }

    /// The wait after `consecutive_empty` empty polls in a row:
    /// `min(base * 2^min(consecutive_empty - 1, 10), max)`, and `base` for 0.
    pub fn wait(&self, consecutive_empty: u32) -> Duration {
        let doublings = consecutive_empty.saturating_sub(1).min(10);
        self.base
            .checked_mul(1 << doublings)
            .unwrap_or(self.max)
            .min(self.max.max(self.base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_from_the_second_empty_poll_and_stop_at_the_cap() {
        let p = PollPolicy::default();
        let ms: Vec<u128> = (0..=9).map(|n| p.wait(n).as_millis()).collect();
        assert_eq!(
            ms,
            vec![250, 250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000]
        );
        assert_eq!(p.wait(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn a_cap_at_or_below_the_base_turns_the_backoff_off() {
        let p = PollPolicy::new(Duration::from_millis(250), Duration::from_millis(100));
        assert!((0..20).all(|n| p.wait(n) == Duration::from_millis(250)));
    }
}
