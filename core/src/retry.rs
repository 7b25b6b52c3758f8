//! How long a retryable failure waits: exponential, with jitter, capped (G5).

use std::time::Duration;

use crate::model::LeaseToken;

/// Exponential backoff with jitter and a cap.
///
/// The delay after attempt `n` is `base * 2^(n-1)`, capped at `max`, then spread by up
/// to `±jitter` of itself. The jitter is derived from the token, so a given attempt of a
/// given item always waits the same time (reproducible in tests) while items that
/// failed together spread out.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// The delay after the first attempt. Default 1 s.
    pub base: Duration,
    /// The longest delay before jitter. Default 1 h.
    pub max: Duration,
    /// The spread, as a fraction of the delay (0.0..=1.0). Default 0.2.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60 * 60),
            jitter: 0.2,
        }
    }
}

impl RetryPolicy {
    /// A policy starting at `base`, capped at `max`, with the default jitter.
    pub fn exponential(base: Duration, max: Duration) -> Self {
        RetryPolicy {
            base,
            max,
            ..RetryPolicy::default()
        }
    }

    /// Sets the jitter fraction, clamped to 0.0..=1.0.
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter.clamp(0.0, 1.0);
        self
    }

    /// The delay before the capped, un-jittered delay is spread: `base * 2^(attempt-1)`.
    pub fn nominal(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(63);
        let factor = 1u64 << exp;
        let base = u64::try_from(self.base.as_micros()).unwrap_or(u64::MAX);
        let max = u64::try_from(self.max.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(base.saturating_mul(factor).min(max))
    }

    /// The delay to wait after the attempt `token` failed.
    pub fn delay(&self, token: &LeaseToken) -> Duration {
        let nominal = self.nominal(token.attempt).as_secs_f64();
        // A unit value in [-1, 1) drawn from the token.
        let (hi, lo) = token.id.as_uuid().as_u64_pair();
        let unit = splitmix(hi ^ lo.rotate_left(17) ^ u64::from(token.attempt)) as f64
            / u64::MAX as f64
            * 2.0
            - 1.0;
        let spread = nominal * self.jitter.clamp(0.0, 1.0) * unit;
        Duration::from_secs_f64((nominal + spread).max(0.0))
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ItemId;

    #[test]
    fn nominal_delay_doubles_and_is_capped() {
        let p = RetryPolicy::exponential(Duration::from_secs(1), Duration::from_secs(10));
        let secs: Vec<u64> = (1..=6).map(|a| p.nominal(a).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 10, 10]);
        assert_eq!(p.nominal(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn jitter_stays_within_its_fraction_and_is_reproducible() {
        let p = RetryPolicy::exponential(Duration::from_secs(10), Duration::from_secs(3600));
        let mut distinct = std::collections::HashSet::new();
        for _ in 0..200 {
            let t = LeaseToken::new(ItemId::new(), 3, crate::LeaseId::mint());
            let d = p.delay(&t);
            assert!(
                d >= Duration::from_secs(32) && d <= Duration::from_secs(48),
                "{d:?}"
            );
            assert_eq!(d, p.delay(&t));
            distinct.insert(d.as_millis());
        }
        assert!(distinct.len() > 100, "jitter spreads delays");
    }

    #[test]
    fn zero_jitter_gives_the_nominal_delay() {
        let p = RetryPolicy::default().with_jitter(0.0);
        let t = LeaseToken::new(ItemId::new(), 2, crate::LeaseId::mint());
        assert_eq!(p.delay(&t), Duration::from_secs(2));
    }
}
