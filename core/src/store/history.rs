//! Params and answers of the work history: per-queue, per-minute sums of finished,
//! failed and dead attempts, added in aggregate by workers and read by operators.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::QueueName;
use crate::time::Timestamp;

use super::Limits;

/// A minute, in microseconds.
const MINUTE_MICROS: i64 = 60_000_000;

/// How long a store keeps a minute of history, at least, counted back from the newest
/// minute it was given: a store MAY delete older minutes, never younger ones.
pub const HISTORY_KEEP: Duration = Duration::from_secs(48 * 60 * 60);
/// The longest span one [`Store::history`](super::Store::history) read covers.
pub const MAX_HISTORY_SPAN: Duration = Duration::from_secs(48 * 60 * 60);
/// Most entries in one [`Store::history_add`](super::Store::history_add) call.
pub const MAX_HISTORY_ENTRIES: usize = 1_000;

/// The start of the minute `at` falls in (minutes of the Unix epoch, UTC).
pub fn history_minute(at: Timestamp) -> Timestamp {
    Timestamp::from_micros(at.as_micros().div_euclid(MINUTE_MICROS) * MINUTE_MICROS)
}

/// What finished in one queue in one minute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HistoryCounts {
    /// Attempts completed.
    pub finished: u64,
    /// Attempts failed and retrying (not dead).
    pub failed: u64,
    /// Attempts failed that made their item dead.
    pub dead: u64,
}

impl HistoryCounts {
    /// These counts.
    pub const fn new(finished: u64, failed: u64, dead: u64) -> Self {
        HistoryCounts {
            finished,
            failed,
            dead,
        }
    }

    /// True when every count is zero.
    pub const fn is_empty(&self) -> bool {
        self.finished == 0 && self.failed == 0 && self.dead == 0
    }

    /// These counts plus `other`'s, saturating.
    pub const fn plus(self, other: HistoryCounts) -> Self {
        HistoryCounts {
            finished: self.finished.saturating_add(other.finished),
            failed: self.failed.saturating_add(other.failed),
            dead: self.dead.saturating_add(other.dead),
        }
    }
}

/// Counts to add to one queue's minute.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HistoryEntry {
    /// The queue.
    pub queue: QueueName,
    /// The start of the minute ([`history_minute`]).
    pub minute: Timestamp,
    /// What to add.
    pub counts: HistoryCounts,
}

impl HistoryEntry {
    /// `counts` to add to `queue` in the minute `at` falls in.
    pub fn new(queue: QueueName, at: Timestamp, counts: HistoryCounts) -> Self {
        HistoryEntry {
            queue,
            minute: history_minute(at),
            counts,
        }
    }
}

/// Parameters of [`Store::history_add`](super::Store::history_add).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HistoryAddParams {
    /// The sums to add, at most one per queue and minute.
    pub entries: Vec<HistoryEntry>,
}

impl HistoryAddParams {
    /// Adds these entries.
    pub fn new(entries: Vec<HistoryEntry>) -> Self {
        HistoryAddParams { entries }
    }

    /// Checks the bounds (G15): 1..=[`MAX_HISTORY_ENTRIES`] entries, each on the start
    /// of a minute, no queue and minute twice, every count at most `i64::MAX`.
    pub fn validate(&self, _limits: &Limits) -> Result<()> {
        let n = self.entries.len();
        if n == 0 || n > MAX_HISTORY_ENTRIES {
            return Err(Error::invalid(
                "entries",
                format!("{n} is outside 1..={MAX_HISTORY_ENTRIES}"),
            ));
        }
        for e in &self.entries {
            if history_minute(e.minute) != e.minute {
                return Err(Error::invalid(
                    "minute",
                    format!("{} is not the start of a minute", e.minute),
                ));
            }
            let max = i64::MAX.unsigned_abs();
            let c = e.counts;
            if c.finished > max || c.failed > max || c.dead > max {
                return Err(Error::invalid("counts", "a count is over i64::MAX"));
            }
        }
        let mut keys: Vec<(&str, Timestamp)> = self
            .entries
            .iter()
            .map(|e| (e.queue.as_str(), e.minute))
            .collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::invalid(
                "entries",
                format!("queue {} minute {} appears more than once", w[0].0, w[0].1),
            ));
        }
        Ok(())
    }
}

/// Parameters of [`Store::history`](super::Store::history).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HistoryParams {
    /// The queue.
    pub queue: QueueName,
    /// The first minute read (inclusive, the start of a minute).
    pub since: Timestamp,
    /// The end of the span read (exclusive).
    pub until: Timestamp,
}

impl HistoryParams {
    /// `queue`'s minutes from the one `since` falls in up to, not including, the one
    /// `until` falls in.
    pub fn new(queue: QueueName, since: Timestamp, until: Timestamp) -> Self {
        HistoryParams {
            queue,
            since: history_minute(since),
            until: history_minute(until),
        }
    }

    /// Checks the span (G15): `since <= until`, at most [`MAX_HISTORY_SPAN`] long.
    pub fn validate(&self, _limits: &Limits) -> Result<()> {
        if self.since > self.until {
            return Err(Error::invalid(
                "until",
                format!("{} is before since {}", self.until, self.since),
            ));
        }
        if self.until.duration_since(self.since) > MAX_HISTORY_SPAN {
            return Err(Error::invalid(
                "since",
                format!(
                    "the span {}..{} is longer than {} s",
                    self.since,
                    self.until,
                    MAX_HISTORY_SPAN.as_secs()
                ),
            ));
        }
        Ok(())
    }
}

/// One minute of one queue's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HistoryPoint {
    /// The start of the minute.
    pub minute: Timestamp,
    /// What finished in it.
    pub counts: HistoryCounts,
}

impl HistoryPoint {
    /// `counts` of the minute starting at `minute`.
    pub const fn new(minute: Timestamp, counts: HistoryCounts) -> Self {
        HistoryPoint { minute, counts }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minute_is_floored_also_before_the_epoch() {
        assert_eq!(
            history_minute(Timestamp::from_micros(61_000_000)),
            Timestamp::from_micros(60_000_000)
        );
        assert_eq!(
            history_minute(Timestamp::from_micros(-1)),
            Timestamp::from_micros(-60_000_000)
        );
    }

    #[test]
    fn bad_history_params_are_refused_naming_the_field() {
        let q = QueueName::new("q").expect("name");
        let l = Limits::default();
        let empty = HistoryAddParams::new(Vec::new()).validate(&l);
        assert!(format!("{empty:?}").contains("entries"));
        let mut e = HistoryEntry::new(q.clone(), Timestamp::EPOCH, HistoryCounts::new(1, 0, 0));
        e.minute = Timestamp::from_micros(5);
        let odd = HistoryAddParams::new(vec![e]).validate(&l);
        assert!(format!("{odd:?}").contains("minute"));
        let twice = HistoryEntry::new(q.clone(), Timestamp::EPOCH, HistoryCounts::new(1, 0, 0));
        let twice = HistoryAddParams::new(vec![twice.clone(), twice]).validate(&l);
        assert!(format!("{twice:?}").contains("entries"));
        let back = HistoryParams::new(
            q.clone(),
            Timestamp::from_micros(120_000_000),
            Timestamp::EPOCH,
        );
        assert!(format!("{:?}", back.validate(&l)).contains("until"));
        let long = HistoryParams::new(
            q,
            Timestamp::EPOCH,
            Timestamp::EPOCH + MAX_HISTORY_SPAN + Duration::from_secs(60),
        );
        assert!(format!("{:?}", long.validate(&l)).contains("since"));
    }
}
