//! Periodic jobs: a [`Recurrence`] per name, enqueued by the maintenance leader.
//!
//! The rules are on [`Periodic`].

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use tenure_core::{
    duration_micros, DedupKey, Error, NewItem, QueueName, Result, Timestamp, DEFAULT_MAX_ATTEMPTS,
    MAX_KEY_BYTES,
};

/// The prefix of every periodic item's dedup key.
pub const PERIODIC_KEY_PREFIX: &str = "tenure.periodic:";
/// Most ticks of one schedule enqueued by one pass; the rest wait for the next.
const MAX_TICKS_PER_PASS: usize = 1_000;
/// The longest a store remembers a dedup key.
const MAX_WINDOW: Duration = Duration::from_secs(366 * 24 * 60 * 60);
/// Kept on top of the gap between ticks, so a key outlives every pass that could
/// enqueue its tick again.
const WINDOW_MARGIN: Duration = Duration::from_secs(60 * 60);
/// Shortest interval of [`Recurrence::every`].
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Longest periodic name: the dedup key must fit in [`MAX_KEY_BYTES`] with the
/// prefix and a tick.
pub const MAX_PERIODIC_NAME_BYTES: usize = 128;

/// When a periodic job ticks: a cron expression (read in UTC) or a fixed interval.
#[derive(Clone)]
pub struct Recurrence(Repr);

#[derive(Clone)]
enum Repr {
    Cron {
        expr: String,
        cron: Box<croner::Cron>,
    },
    Interval {
        every: i64,
        offset: i64,
    },
}

impl Recurrence {
    /// A cron expression, read in **UTC**: five fields (minute, hour, day of month,
    /// month, day of week), or six with a leading seconds field; `L`, `W`, `#` and
    /// the nicknames (`@hourly`, `@daily`, ...) as croner reads them.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `schedule`, with the parser's reason.
    pub fn cron(expr: &str) -> Result<Self> {
        let cron = croner::Cron::from_str(expr)
            .map_err(|e| Error::invalid("schedule", format!("cron expression {expr:?}: {e}")))?;
        Ok(Recurrence(Repr::Cron {
            expr: expr.trim().to_owned(),
            cron: Box::new(cron),
        }))
    }

    /// Every `interval` (at least 1 s), at the whole multiples of it since the Unix
    /// epoch: `every(1 h)` ticks on the hour (UTC), `every(5 min)` at :00, :05, ...
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `schedule` for an interval under 1 s.
    pub fn every(interval: Duration) -> Result<Self> {
        Recurrence::every_with_offset(interval, Duration::ZERO)
    }

    /// Every `interval`, shifted by `offset` (under the interval): `every(1 h)` with an
    /// offset of 15 min ticks at a quarter past each hour.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `schedule` for an interval under 1 s or an offset
    /// not under the interval.
    pub fn every_with_offset(interval: Duration, offset: Duration) -> Result<Self> {
        if interval < MIN_INTERVAL {
            return Err(Error::invalid(
                "schedule",
                format!("an interval of {interval:?} is under the minimum of 1s"),
            ));
        }
        if offset >= interval {
            return Err(Error::invalid(
                "schedule",
                format!("the offset {offset:?} must be under the interval {interval:?}"),
            ));
        }
        Ok(Recurrence(Repr::Interval {
            every: duration_micros(interval),
            offset: duration_micros(offset),
        }))
    }

    /// The first tick strictly after `t`, if the schedule has one.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        match &self.0 {
            Repr::Interval { every, offset } => {
                let k = (t.as_micros() - offset).div_euclid(*every) + 1;
                k.checked_mul(*every)
                    .and_then(|m| m.checked_add(*offset))
                    .map(Timestamp::from_micros)
            }
            Repr::Cron { cron, .. } => {
                let at = to_chrono(t)?;
                cron.find_next_occurrence(&at, false).ok().map(from_chrono)
            }
        }
    }

    /// The last tick at or before `t`, if the schedule has one.
    pub fn latest_at_or_before(&self, t: Timestamp) -> Option<Timestamp> {
        match &self.0 {
            Repr::Interval { every, offset } => {
                let k = (t.as_micros() - offset).div_euclid(*every);
                k.checked_mul(*every)
                    .and_then(|m| m.checked_add(*offset))
                    .map(Timestamp::from_micros)
            }
            Repr::Cron { cron, .. } => {
                let at = to_chrono(t)?;
                cron.find_previous_occurrence(&at, true)
                    .ok()
                    .map(from_chrono)
            }
        }
    }
}

impl fmt::Debug for Recurrence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Recurrence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Cron { expr, .. } => write!(f, "cron {expr:?} (UTC)"),
            Repr::Interval { every, offset: 0 } => {
                write!(f, "every {:?}", Duration::from_micros(every.unsigned_abs()))
            }
            Repr::Interval { every, offset } => write!(
                f,
                "every {:?} offset {:?}",
                Duration::from_micros(every.unsigned_abs()),
                Duration::from_micros(offset.unsigned_abs())
            ),
        }
    }
}

fn to_chrono(t: Timestamp) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp_micros(t.as_micros())
}

fn from_chrono(t: chrono::DateTime<chrono::Utc>) -> Timestamp {
    Timestamp::from_micros(t.timestamp_micros())
}

/// What happens to ticks that passed while no leader enqueued them (every instance
/// down, the store unreachable, a leader change under way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Missed {
    /// The most recent missed tick is enqueued once; earlier ones are not (the
    /// default). A schedule's first leader enqueues its most recent past tick.
    #[default]
    Latest,
    /// Every missed tick less than `within` old is enqueued, each once (at most 1 000
    /// per pass; the rest follow on the next passes).
    All {
        /// How far back missed ticks are still wanted.
        within: Duration,
    },
    /// Missed ticks are dropped: only ticks a leader sees coming (or that are late by
    /// less than one maintenance lookahead) are enqueued.
    Skip,
}

/// One periodic job: a name, the queue its items go to, when it ticks, and what each
/// item carries. Give it to [`WorkerBuilder::periodic`](crate::WorkerBuilder::periodic).
///
/// # How a tick becomes an item
///
/// - **Ticks are a function of the schedule alone.** A cron expression is read in
///   **UTC** (there are no time zones: `0 9 * * *` is 09:00 UTC all year); an interval
///   ticks at the whole multiples of its length since the Unix epoch (plus an optional
///   offset), so every instance computes the same ticks with nothing shared.
/// - **Only the leader enqueues.** On every maintenance pass the holder of the
///   maintenance leader lease (G13) enqueues the ticks that come due before its next
///   pass (two maintenance intervals ahead), as scheduled items whose `run_at` is the
///   tick (G7): an item is claimable from its tick on, however long the maintenance
///   interval, and a worker picks it up within its poll interval.
/// - **Exactly once per tick, across instances and leader changes.** Each tick's item
///   carries the dedup key `tenure.periodic:<name>:<tick in µs since the epoch>` (G11),
///   remembered for longer than the gap to the next tick. Two leaders (an old one that
///   died mid-call, a new one that took over) that enqueue the same tick insert one
///   item: the second is answered as a duplicate. A leader moves on past a tick only
///   when the store has answered for it, so a failed call is tried again on the next
///   pass.
/// - **Missed ticks.** A tick that passed while no leader was enqueueing (every
///   instance down, the store unreachable, a takeover under way) is a missed tick. By
///   default ([`Missed::Latest`]) only the most recent missed tick is enqueued, once,
///   when a leader next looks; [`Missed::All`] enqueues every missed tick within a
///   window, and [`Missed::Skip`] none. A new leader cannot tell a schedule that was
///   down from one that was just added, so a schedule's first leader also enqueues its
///   most recent past tick under [`Missed::Latest`].
///
/// The item's `run_at` is its tick, its payload the one given here.
///
/// ```
/// # fn demo() -> tenure_core::Result<()> {
/// use std::time::Duration;
/// use tenure_runtime::{Missed, Periodic, Recurrence};
/// use tenure_core::QueueName;
///
/// let report = Periodic::new("nightly-report", QueueName::new("reports")?, Recurrence::cron("0 3 * * *")?)?
///     .payload(b"{\"kind\":\"nightly\"}".to_vec());
/// let sweep = Periodic::new("sweep", QueueName::new("maintenance")?, Recurrence::every(Duration::from_secs(300))?)?
///     .missed(Missed::Skip);
/// # let _ = (report, sweep);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Periodic {
    name: String,
    queue: QueueName,
    recurrence: Recurrence,
    payload: Vec<u8>,
    missed: Missed,
    priority: i16,
    max_attempts: u32,
}

impl Periodic {
    /// A periodic job `name` (1..=128 bytes, no control characters; unique among the
    /// periodic jobs of a deployment) enqueuing into `queue` on `recurrence`, with an
    /// empty payload and [`Missed::Latest`].
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `name`.
    pub fn new(name: impl Into<String>, queue: QueueName, recurrence: Recurrence) -> Result<Self> {
        let name = name.into();
        if name.is_empty() || name.len() > MAX_PERIODIC_NAME_BYTES {
            return Err(Error::invalid(
                "name",
                format!(
                    "a periodic job's name must be 1..={MAX_PERIODIC_NAME_BYTES} bytes, got {}",
                    name.len()
                ),
            ));
        }
        if let Some(c) = name.chars().find(|c| c.is_control()) {
            return Err(Error::invalid(
                "name",
                format!("contains {c:?}, which is not allowed"),
            ));
        }
        debug_assert!(PERIODIC_KEY_PREFIX.len() + MAX_PERIODIC_NAME_BYTES + 21 <= MAX_KEY_BYTES);
        Ok(Periodic {
            name,
            queue,
            recurrence,
            payload: Vec::new(),
            missed: Missed::default(),
            priority: 0,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        })
    }

    /// The payload of every item (default empty).
    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.payload = payload.into();
        self
    }

    /// What happens to missed ticks (default [`Missed::Latest`]).
    pub fn missed(mut self, missed: Missed) -> Self {
        self.missed = missed;
        self
    }

    /// The priority of every item (default 0; smaller runs first).
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
    }

    /// The attempts each item gets (default 20).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The queue its items go to.
    pub fn queue(&self) -> &QueueName {
        &self.queue
    }

    /// When it ticks.
    pub fn recurrence(&self) -> &Recurrence {
        &self.recurrence
    }

    /// The dedup key of this job's item for `tick`: the same on every instance.
    pub fn dedup_key(&self, tick: Timestamp) -> Result<DedupKey> {
        DedupKey::new(format!(
            "{PERIODIC_KEY_PREFIX}{}:{}",
            self.name,
            tick.as_micros()
        ))
    }

    /// The item for `tick`, remembered under its dedup key for longer than any pass
    /// could enqueue the tick again.
    pub(crate) fn item(&self, tick: Timestamp, lookahead: Duration) -> Result<NewItem> {
        let gap = self
            .recurrence
            .next_after(tick)
            .map_or(MAX_WINDOW, |next| next.duration_since(tick));
        let lookback = match self.missed {
            Missed::Latest => Duration::ZERO,
            Missed::All { within } => within,
            Missed::Skip => lookahead,
        };
        let window = gap
            .saturating_add(lookback)
            .saturating_add(lookahead * 2)
            .saturating_add(WINDOW_MARGIN)
            .min(MAX_WINDOW);
        Ok(NewItem::new(self.queue.clone(), self.payload.clone())
            .dedup_key(self.dedup_key(tick)?)
            .dedup_window(window)
            .run_at(tick)
            .priority(self.priority)
            .max_attempts(self.max_attempts))
    }

    /// The ticks a pass at `now` enqueues, given that earlier passes of the same
    /// leadership covered every tick up to `covered`: the missed ones by the policy,
    /// then those due by `horizon`. The flag is true when the list was cut short.
    pub(crate) fn due(
        &self,
        covered: Option<Timestamp>,
        now: Timestamp,
        horizon: Timestamp,
        lookahead: Duration,
    ) -> (Vec<Timestamp>, bool) {
        let r = &self.recurrence;
        let mut ticks = Vec::new();
        // Ticks at or before `now` not yet covered: missed (or a pass ran late).
        let oldest_wanted = match self.missed {
            Missed::Latest => None,
            Missed::All { within } => Some(now.saturating_sub(within)),
            Missed::Skip => Some(now.saturating_sub(lookahead)),
        };
        match oldest_wanted {
            None => {
                if let Some(t) = r.latest_at_or_before(now) {
                    if covered.is_none_or(|c| t > c) {
                        ticks.push(t);
                    }
                }
            }
            Some(oldest) => {
                // Strictly after both what is covered and the oldest tick wanted.
                let after = match covered {
                    Some(c) if c >= oldest => c,
                    _ => oldest.saturating_sub(Duration::from_micros(1)),
                };
                let mut at = after;
                while let Some(t) = r.next_after(at) {
                    if t > now {
                        break;
                    }
                    ticks.push(t);
                    at = t;
                }
                // Keep the most recent ones when there are too many.
                if ticks.len() > MAX_TICKS_PER_PASS {
                    ticks.drain(..ticks.len() - MAX_TICKS_PER_PASS);
                }
            }
        }
        // Ticks after `now` up to the horizon, ahead of time.
        let mut at = covered.map_or(now, |c| c.max(now));
        while ticks.len() < MAX_TICKS_PER_PASS {
            match r.next_after(at) {
                Some(t) if t <= horizon => {
                    ticks.push(t);
                    at = t;
                }
                _ => return (ticks, false),
            }
        }
        (ticks, r.next_after(at).is_some_and(|t| t <= horizon))
    }
}

/// The periodic jobs of one worker and how far the current leadership has enqueued
/// them.
#[derive(Debug, Default)]
pub(crate) struct Periodics {
    pub(crate) jobs: Vec<Periodic>,
    state: Mutex<PassState>,
}

#[derive(Debug, Default)]
struct PassState {
    /// The leadership term the coverage belongs to.
    term: Option<u64>,
    /// Per job: every tick up to this instant is enqueued (the store answered).
    covered: Vec<Option<Timestamp>>,
}

impl Periodics {
    /// Checks that no two jobs share a name.
    pub(crate) fn new(jobs: Vec<Periodic>) -> Result<Self> {
        let mut names = std::collections::HashSet::new();
        for j in &jobs {
            if !names.insert(j.name.as_str()) {
                return Err(Error::invalid(
                    "periodic",
                    format!("two periodic jobs are named {:?}", j.name),
                ));
            }
        }
        Ok(Periodics {
            jobs,
            state: Mutex::default(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PassState> {
        // Every update is a plain field write: poisoning cannot leave it inconsistent.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How far each job is covered in leadership `term`: nothing when `term` is new
    /// (its coverage starts over).
    pub(crate) fn covered(&self, term: u64) -> Vec<Option<Timestamp>> {
        let mut state = self.state();
        if state.term != Some(term) {
            state.term = Some(term);
            state.covered = vec![None; self.jobs.len()];
        }
        state.covered.clone()
    }

    /// Records job `i` covered up to `reached` in leadership `term`, unless a newer
    /// term started meanwhile.
    pub(crate) fn cover(&self, term: u64, i: usize, reached: Timestamp) {
        let mut state = self.state();
        if state.term == Some(term) {
            if let Some(c) = state.covered.get_mut(i) {
                *c = Some(reached.max(c.unwrap_or(reached)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_micros(secs * 1_000_000)
    }

    fn q() -> QueueName {
        QueueName::new("q").unwrap()
    }

    #[test]
    fn an_interval_ticks_on_its_multiples_since_the_epoch_with_its_offset() {
        let r = Recurrence::every(Duration::from_secs(60)).unwrap();
        assert_eq!(r.next_after(at(119)), Some(at(120)));
        assert_eq!(r.next_after(at(120)), Some(at(180)));
        assert_eq!(r.latest_at_or_before(at(120)), Some(at(120)));
        assert_eq!(r.latest_at_or_before(at(179)), Some(at(120)));
        let o = Recurrence::every_with_offset(Duration::from_secs(60), Duration::from_secs(15))
            .unwrap();
        assert_eq!(o.next_after(at(120)), Some(at(135)));
        assert_eq!(o.latest_at_or_before(at(134)), Some(at(75)));
    }

    #[test]
    fn a_cron_expression_is_read_in_utc() {
        // 2023-11-14T22:13:20Z
        let t = at(1_700_000_000);
        let r = Recurrence::cron("0 3 * * *").unwrap();
        // 2023-11-15T03:00:00Z and 2023-11-14T03:00:00Z
        assert_eq!(r.next_after(t), Some(at(1_700_017_200)));
        assert_eq!(r.latest_at_or_before(t), Some(at(1_699_930_800)));
        let five = Recurrence::cron("*/5 * * * *").unwrap();
        assert_eq!(five.next_after(t), Some(at(1_700_000_100)));
        assert_eq!(five.next_after(at(1_700_000_100)), Some(at(1_700_000_400)));
    }

    #[test]
    fn bad_schedules_and_names_are_refused_naming_the_field() {
        for bad in ["", "61 * * * *", "* * *", "every minute"] {
            let e = Recurrence::cron(bad).err().unwrap();
            assert_eq!(e.invalid_field(), Some("schedule"), "{bad:?}");
        }
        let e = Recurrence::every(Duration::from_millis(999)).err().unwrap();
        assert_eq!(e.invalid_field(), Some("schedule"));
        let e = Recurrence::every_with_offset(Duration::from_secs(60), Duration::from_secs(60))
            .err()
            .unwrap();
        assert_eq!(e.invalid_field(), Some("schedule"));
        let r = Recurrence::every(Duration::from_secs(1)).unwrap();
        for bad in [String::new(), "x".repeat(129), "a\nb".to_owned()] {
            let e = Periodic::new(bad, q(), r.clone()).err().unwrap();
            assert_eq!(e.invalid_field(), Some("name"));
        }
        let long = Periodic::new("x".repeat(128), q(), r).unwrap();
        assert!(long.dedup_key(Timestamp::from_micros(i64::MIN)).is_ok());
    }

    #[test]
    fn a_first_pass_takes_the_latest_missed_tick_and_those_due_by_the_horizon() {
        let job = Periodic::new(
            "j",
            q(),
            Recurrence::every(Duration::from_secs(60)).unwrap(),
        )
        .unwrap();
        let la = Duration::from_secs(10);
        // Ticks at 0, 60, 120, ... ; now 125, horizon 185.
        let (ticks, cut) = job.due(None, at(125), at(185), la);
        assert_eq!(ticks, vec![at(120), at(180)]);
        assert!(!cut);
        // The next pass of the same leadership covered up to 185: nothing twice.
        let (ticks, _) = job.due(Some(at(185)), at(130), at(190), la);
        assert!(ticks.is_empty());
        // A pass long after (the store was down): only the latest missed tick.
        let (ticks, _) = job.due(Some(at(185)), at(1_000), at(1_010), la);
        assert_eq!(ticks, vec![at(960)]);
    }

    #[test]
    fn missed_all_takes_each_tick_within_its_window_and_skip_takes_none() {
        let r = Recurrence::every(Duration::from_secs(60)).unwrap();
        let la = Duration::from_secs(10);
        let all = Periodic::new("a", q(), r.clone())
            .unwrap()
            .missed(Missed::All {
                within: Duration::from_secs(200),
            });
        let (ticks, _) = all.due(None, at(1_000), at(1_010), la);
        assert_eq!(ticks, vec![at(840), at(900), at(960)]);
        let (ticks, _) = all.due(Some(at(900)), at(1_000), at(1_010), la);
        assert_eq!(ticks, vec![at(960)]);
        let skip = Periodic::new("s", q(), r).unwrap().missed(Missed::Skip);
        let (ticks, _) = skip.due(None, at(1_000), at(1_070), la);
        assert_eq!(ticks, vec![at(1_020)]);
        // Late by less than the lookahead still counts as on time.
        let (ticks, _) = skip.due(Some(at(955)), at(965), at(975), la);
        assert_eq!(ticks, vec![at(960)]);
    }

    #[test]
    fn a_pass_is_cut_at_a_thousand_ticks_and_says_so() {
        let job = Periodic::new("j", q(), Recurrence::every(Duration::from_secs(1)).unwrap())
            .unwrap()
            .missed(Missed::Skip);
        let (ticks, cut) = job.due(Some(at(0)), at(0), at(5_000), Duration::from_secs(1));
        assert_eq!(ticks.len(), MAX_TICKS_PER_PASS);
        assert!(cut);
        assert_eq!(ticks.last(), Some(&at(1_000)));
    }

    #[test]
    fn a_ticks_dedup_key_outlives_the_gap_to_the_next_tick() {
        let job = Periodic::new("j", q(), Recurrence::cron("0 3 * * *").unwrap()).unwrap();
        let item = job
            .item(at(1_699_930_800), Duration::from_secs(10))
            .unwrap();
        assert!(item.dedup_window > Duration::from_secs(24 * 60 * 60));
        assert_eq!(
            item.dedup_key.unwrap().as_str(),
            "tenure.periodic:j:1699930800000000"
        );
        assert_eq!(item.schedule, tenure_core::Schedule::At(at(1_699_930_800)));
    }
}
