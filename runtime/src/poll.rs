//! The claim loop's adaptive poll interval.

use std::time::Duration;

use tenure_core::WakeHealth;

/// How long the claim loop waits between polls that found no more work.
///
/// After a claim that filled every free slot the loop polls again as soon as a slot is
/// free. Otherwise it waits [`PollPolicy::wait_for`] for the number of consecutive
/// empty polls so far and the health of the store's cross-process wake-ups
/// ([`WakeHealth`], read from [`Store::wake_signal`](tenure_core::Store::wake_signal)). Any
/// non-empty claim resets the count. A failed claim is retried by a rule of its own
/// ([`PollPolicy::wait_after_failure`]). A wake signal ends any wait at once, and so
/// does a change of the wake-up health.
///
/// # Behavior
///
/// - **No cross-process wake-ups** ([`WakeHealth::Local`]: memory, SQLite, a listener
///   turned off): the base interval after a poll that found some work and after the
///   first empty one, then doubling from the second consecutive empty poll, capped at
///   `max` ([`PollPolicy::wait`]). With the defaults (base 250 ms, max 10 s) the waits
///   after consecutive empty polls are 250, 500, 1000, 2000, 4000, 8000, then
///   10 000 ms. A `max` at or below `base` turns the backoff off.
/// - **Wake-ups healthy** ([`WakeHealth::Healthy`]): enqueues anywhere wake the loop,
///   so polling only has to catch what no wake-up announces (scheduled items coming
///   due, retries, recovered leases). The same backoff starts from the relaxed
///   baseline instead of the base (default 5 s: 5, 5, 10, 10 ... s), when that is
///   longer than the base; never longer than `max`. `relaxed: None` keeps the tight
///   base always. With `safety_net: false` (NOTIFY-only) the loop does not poll at
///   all while healthy: it sleeps until a wake-up.
/// - **Listener down** ([`WakeHealth::Down`]): the backoff is suspended and the loop
///   polls every `base`, so a listener outage never stretches claim latency. It polls
///   once at once when the listener goes down and again when it is back, and relaxes
///   from there.
///
/// - **Failed claims** (an error, such as the store being unavailable): retried after
///   the base, doubling from the second failure in a row, capped at
///   [`FAILED_CLAIM_RETRY_CAP`] (500 ms; `max` when lower), whatever the wake-up
///   health and the count of empty polls. No wake-up announces that a store is back,
///   and a retry against a store that is down costs it one refused connection, so a
///   worker is back at work within half a second of its store. Neither relaxes the
///   other: a failure does not count as an empty poll.
///
/// In NOTIFY-only mode an item that becomes claimable without an enqueue (a scheduled
/// `run_at` coming due, a retry's delay running out, an expired lease recovered) waits
/// for the next wake-up of any kind; keep the safety net on unless every item is
/// enqueued ready and announced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollPolicy {
    /// The shortest wait, and the interval while the listener is down. Default 250 ms.
    pub base: Duration,
    /// The longest wait. Default 10 s.
    pub max: Duration,
    /// Where the backoff starts while cross-process wake-ups are healthy, when longer
    /// than `base`; `None` polls from the tight base always. Default 5 s.
    pub relaxed: Option<Duration>,
    /// Whether the loop polls at all while wake-ups are healthy; `false` is NOTIFY-only
    /// mode (sleep until a wake-up, poll again the moment the listener is down).
    /// Default true.
    pub safety_net: bool,
}

/// The default relaxed baseline while cross-process wake-ups are healthy.
pub const DEFAULT_RELAXED_POLL: Duration = Duration::from_secs(5);

/// The longest wait before a failed claim is tried again (see [`PollPolicy`]).
pub const FAILED_CLAIM_RETRY_CAP: Duration = Duration::from_millis(500);

impl Default for PollPolicy {
    fn default() -> Self {
        PollPolicy {
            base: Duration::from_millis(250),
            max: Duration::from_secs(10),
            relaxed: Some(DEFAULT_RELAXED_POLL),
            safety_net: true,
        }
    }
}

impl PollPolicy {
    /// A policy starting at `base` and capped at `max`, with the default relaxed
    /// baseline (5 s) and the safety-net poll on.
    pub fn new(base: Duration, max: Duration) -> Self {
        PollPolicy {
            base,
            max,
            ..PollPolicy::default()
        }
    }

    /// The relaxed baseline while wake-ups are healthy (`None`: the tight base always).
    pub fn relaxed(mut self, relaxed: Option<Duration>) -> Self {
        self.relaxed = relaxed;
        self
    }

    /// NOTIFY-only mode (`true`): no polling while wake-ups are healthy. Default off.
    pub fn notify_only(mut self, notify_only: bool) -> Self {
        self.safety_net = !notify_only;
        self
    }

    /// The wait after `consecutive_empty` empty polls in a row without cross-process
    /// wake-ups: `min(base * 2^min(consecutive_empty - 1, 10), max)`, and `base` for 0.
    pub fn wait(&self, consecutive_empty: u32) -> Duration {
        backoff(self.base, self.max, consecutive_empty)
    }

    /// The wait after `consecutive_failures` failed claims in a row (at least 1):
    /// `min(base * 2^(consecutive_failures - 1), max(base, min(max,
    /// FAILED_CLAIM_RETRY_CAP)))`, whatever the wake-up health.
    pub fn wait_after_failure(&self, consecutive_failures: u32) -> Duration {
        backoff(
            self.base,
            self.max.min(FAILED_CLAIM_RETRY_CAP),
            consecutive_failures,
        )
    }

    /// The wait after `consecutive_empty` empty polls in a row while the store's
    /// wake-ups are `health`; `None` means no poll until a wake-up (NOTIFY-only mode).
    /// See the rules above.
    pub fn wait_for(&self, consecutive_empty: u32, health: WakeHealth) -> Option<Duration> {
        match health {
            WakeHealth::Down => Some(self.base),
            WakeHealth::Healthy if !self.safety_net => None,
            WakeHealth::Healthy => {
                let start = self
                    .relaxed
                    .map_or(self.base, |r| r.min(self.max).max(self.base));
                Some(backoff(start, self.max, consecutive_empty))
            }
            // `Local`, and any health a later store may report: the ordinary backoff.
            _ => Some(self.wait(consecutive_empty)),
        }
    }
}

/// `min(start * 2^min(n - 1, 10), max)`, never below `start`.
fn backoff(start: Duration, max: Duration, consecutive_empty: u32) -> Duration {
    let doublings = consecutive_empty.saturating_sub(1).min(10);
    start
        .checked_mul(1 << doublings)
        .unwrap_or(max)
        .min(max.max(start))
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

    #[test]
    fn healthy_wake_ups_start_the_backoff_from_the_relaxed_baseline_capped_at_max() {
        let p = PollPolicy::default();
        let s: Vec<Option<u64>> = (0..=4)
            .map(|n| p.wait_for(n, WakeHealth::Healthy).map(|d| d.as_secs()))
            .collect();
        assert_eq!(s, vec![Some(5), Some(5), Some(10), Some(10), Some(10)]);
        let tight = p.relaxed(None);
        assert_eq!(
            tight.wait_for(2, WakeHealth::Healthy),
            Some(Duration::from_millis(500))
        );
        let low_cap = PollPolicy::new(Duration::from_millis(250), Duration::from_secs(1));
        assert_eq!(
            low_cap.wait_for(0, WakeHealth::Healthy),
            Some(Duration::from_secs(1))
        );
        let relaxed_below_base = PollPolicy::new(Duration::from_secs(2), Duration::from_secs(10))
            .relaxed(Some(Duration::from_secs(1)));
        assert_eq!(
            relaxed_below_base.wait_for(1, WakeHealth::Healthy),
            Some(Duration::from_secs(2))
        );
    }

    #[test]
    fn failed_claims_are_retried_within_half_a_second_whatever_the_wake_up_health() {
        let p = PollPolicy::default();
        let ms: Vec<u128> = (1..=5)
            .map(|n| p.wait_after_failure(n).as_millis())
            .collect();
        assert_eq!(ms, vec![250, 500, 500, 500, 500]);
        assert_eq!(p.wait_after_failure(u32::MAX), FAILED_CLAIM_RETRY_CAP);
        let fast = PollPolicy::new(Duration::from_millis(20), Duration::from_millis(100));
        assert_eq!(fast.wait_after_failure(9), Duration::from_millis(100));
        let slow_base = PollPolicy::new(Duration::from_secs(1), Duration::from_secs(10));
        assert_eq!(slow_base.wait_after_failure(3), Duration::from_secs(1));
    }

    #[test]
    fn a_listener_that_is_down_pins_every_wait_to_the_base() {
        let p = PollPolicy::default().notify_only(true);
        assert!((0..20).all(|n| p.wait_for(n, WakeHealth::Down) == Some(p.base)));
        assert_eq!(p.wait_for(3, WakeHealth::Local), Some(p.wait(3)));
        assert_eq!(p.wait_for(0, WakeHealth::Healthy), None, "NOTIFY-only");
    }
}
