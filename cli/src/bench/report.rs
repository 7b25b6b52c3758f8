//! What a run reports: one JSON document (`--json`) or a table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use tenure_benches::Percentiles;

use super::run::{Measured, DEFAULT_STORE_BATCH};
use super::target::{redact, Target};
use super::{BenchArgs, Mode, Through};

/// Latency percentiles in microseconds.
#[derive(Debug, Serialize)]
pub(crate) struct Latency {
    count: usize,
    p50_us: u64,
    p90_us: u64,
    p99_us: u64,
    max_us: u64,
}

impl From<Percentiles> for Latency {
    fn from(p: Percentiles) -> Self {
        Latency {
            count: p.count,
            p50_us: p.p50,
            p90_us: p.p90,
            p99_us: p.p99,
            max_us: p.max,
        }
    }
}

/// The exactly-once check as reported.
#[derive(Debug, Serialize)]
pub(crate) struct ExactlyOnceReport {
    checked: bool,
    holds: bool,
    expected: u64,
    finished: u64,
    finished_twice: u64,
    lost: u64,
    not_seeded: u64,
    completes_refused: u64,
    left_in_queue: u64,
}

/// Throughput over time: items finished per second in buckets of `bucket_s`.
#[derive(Debug, Serialize)]
pub(crate) struct Throughput {
    pub(crate) bucket_s: f64,
    /// `[start of bucket in s, items/s]`. The last bucket usually ends early, at
    /// `end_s`: its rate is its items over the time it covered, not over a whole bucket.
    pub(crate) points: Vec<(f64, f64)>,
    /// When the measurement ended, in s: the end of the last bucket.
    pub(crate) end_s: f64,
}

/// What the run made and removed.
#[derive(Debug, Serialize)]
pub(crate) struct Cleanup {
    kind: &'static str,
    name: String,
    removed: bool,
}

/// Everything `tenure bench` reports.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    tool: &'static str,
    version: &'static str,
    url: String,
    store: &'static str,
    mode: &'static str,
    through: &'static str,
    queue: String,
    items: u64,
    backlog: usize,
    workers: Option<usize>,
    batch: Option<usize>,
    concurrency: Option<usize>,
    rate: Option<u32>,
    duration_s: Option<f64>,
    elapsed_s: f64,
    items_per_s: f64,
    seed_s: f64,
    claim_latency: Option<Latency>,
    pickup_latency: Option<Latency>,
    exactly_once: ExactlyOnceReport,
    pub(crate) throughput: Throughput,
    plot: Option<String>,
    cleanup: Cleanup,
    /// Whether another session held an idle REPEATABLE READ transaction throughout.
    snapshot_held: bool,
    /// The peak `n_dead_tup` of each table of the schema during the run (sampled with
    /// `--hold-snapshot`).
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_dead_tuples: Option<BTreeMap<String, i64>>,
    /// Claim p99 over the first and the last minute of a run of two minutes or more.
    #[serde(skip_serializing_if = "Option::is_none")]
    claim_p99_by_minute: Option<FirstLast>,
}

/// A claim percentile over the first and over the last minute of a run.
#[derive(Debug, Serialize)]
pub(crate) struct FirstLast {
    first_minute_us: u64,
    last_minute_us: u64,
    /// `last_minute_us / first_minute_us`.
    last_over_first: f64,
}

impl FirstLast {
    /// From `(seconds since the start, wall time in microseconds)` claim samples;
    /// `None` when they span less than two minutes.
    fn of(claims: &[(f64, u64)]) -> Option<FirstLast> {
        let end = claims.iter().map(|(t, _)| *t).fold(0.0, f64::max);
        if end < 120.0 {
            return None;
        }
        let p99 = |from: f64, to: f64| {
            let mut v: Vec<u64> = claims
                .iter()
                .filter(|(t, _)| *t >= from && *t < to)
                .map(|(_, us)| *us)
                .collect();
            Percentiles::of(&mut v).map(|p| p.p99)
        };
        let first = p99(0.0, 60.0)?;
        let last = p99(end - 60.0, f64::INFINITY)?;
        Some(FirstLast {
            first_minute_us: first,
            last_minute_us: last,
            last_over_first: last as f64 / (first as f64).max(1.0),
        })
    }
}

/// The two runs of `--hold-snapshot`: without and with a snapshot held.
#[derive(Debug, Serialize)]
pub(crate) struct Pair {
    free: Report,
    held: Report,
    /// Items/s with the snapshot held over items/s without.
    held_over_free: f64,
}

impl Pair {
    pub(crate) fn new(free: Report, held: Report) -> Self {
        let held_over_free = held.items_per_s / free.items_per_s.max(1e-9);
        Pair {
            free,
            held,
            held_over_free,
        }
    }

    /// The pair as one line of JSON.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Both tables, then the ratio.
    pub(crate) fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "-- no snapshot held");
        out.push_str(&self.free.table());
        let _ = writeln!(
            out,
            "-- an idle REPEATABLE READ transaction held in another session"
        );
        out.push_str(&self.held.table());
        let _ = writeln!(out, "held / free      {:.2} (items/s)", self.held_over_free);
        out
    }
}

/// A round bucket width giving about 100 buckets over `span` seconds, at least 50 ms.
fn bucket_width(span: f64) -> f64 {
    let raw = (span / 100.0).max(0.05);
    let mut nice = 0.05;
    for step in [0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0] {
        nice = step;
        if step >= raw {
            break;
        }
    }
    nice
}

/// Buckets a timeline of `(seconds, items)` into items per second, the measurement
/// having ended at `end` seconds (at least the timeline's last second). The last bucket
/// covers only up to `end`, and its rate is over that time.
pub(crate) fn throughput(timeline: &[(f64, u32)], end: f64) -> Throughput {
    let span = timeline.iter().map(|(t, _)| *t).fold(0.0, f64::max);
    let end = end.max(span);
    let width = bucket_width(end);
    let buckets = (span / width) as usize + 1;
    let mut sums = vec![0u64; buckets];
    for (t, n) in timeline {
        let i = ((t / width) as usize).min(buckets - 1);
        sums[i] += u64::from(*n);
    }
    let last = buckets - 1;
    Throughput {
        bucket_s: width,
        points: sums
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let start = i as f64 * width;
                let covered = if i == last {
                    (end - start).clamp(width / 100.0, width)
                } else {
                    width
                };
                ((start * 1e3).round() / 1e3, *n as f64 / covered)
            })
            .collect(),
        end_s: end,
    }
}

impl Report {
    pub(crate) fn new(args: &BenchArgs, target: &Target, m: &Measured) -> Self {
        let (kind, name, removed) = target.made();
        let worker = args.through == Through::Worker;
        let sustained = args.mode == Mode::Sustained;
        let batch = match (args.through, args.mode) {
            (Through::Store, Mode::BurnDown) => Some(args.batch.unwrap_or(DEFAULT_STORE_BATCH)),
            (Through::Store, Mode::Sustained) => Some(args.batch.unwrap_or(1)),
            (Through::Worker, _) => args.batch,
        };
        let e = &m.exactly_once;
        Report {
            tool: "tenure bench",
            version: env!("CARGO_PKG_VERSION"),
            url: redact(&args.url),
            store: m.store,
            mode: if sustained { "sustained" } else { "burn-down" },
            through: if worker { "worker" } else { "store" },
            queue: m.queue.clone(),
            items: m.items,
            backlog: args.backlog,
            workers: (!worker).then_some(args.workers),
            batch,
            concurrency: worker.then_some(args.concurrency),
            rate: sustained.then_some(args.rate),
            duration_s: sustained.then_some(args.duration.as_secs_f64()),
            elapsed_s: m.elapsed.as_secs_f64(),
            items_per_s: m.per_sec,
            seed_s: m.seed_time.as_secs_f64(),
            claim_latency: m.claim_latency.map(Latency::from),
            pickup_latency: m.pickup_latency.map(Latency::from),
            exactly_once: ExactlyOnceReport {
                checked: true,
                holds: e.holds(),
                expected: e.expected,
                finished: e.finished,
                finished_twice: e.twice,
                lost: e.lost,
                not_seeded: e.unknown,
                completes_refused: e.refused,
                left_in_queue: m.left.ready + m.left.running + m.left.dead,
            },
            throughput: throughput(&m.timeline, m.elapsed.as_secs_f64()),
            plot: args.plot.as_ref().map(|p| p.display().to_string()),
            cleanup: Cleanup {
                kind,
                name,
                removed,
            },
            snapshot_held: m.snapshot_held,
            peak_dead_tuples: m.peak_dead_tuples.clone(),
            claim_p99_by_minute: FirstLast::of(&m.claims),
        }
    }

    /// The report as one line of JSON.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A title for the plot and the table.
    pub(crate) fn title(&self) -> String {
        let how = match (self.through, self.concurrency, self.workers, self.batch) {
            ("worker", Some(c), _, Some(b)) => format!("a worker (concurrency {c}, batch {b})"),
            ("worker", Some(c), _, None) => format!("a worker (concurrency {c})"),
            (_, _, Some(w), Some(b)) => format!("the store ({w} tasks, claim({b}))"),
            _ => "the store".to_owned(),
        };
        let backlog = if self.backlog > 0 {
            format!(", backlog {}", self.backlog)
        } else {
            String::new()
        };
        format!("{} {} through {how}{backlog}", self.store, self.mode)
    }

    /// The human table.
    pub(crate) fn table(&self) -> String {
        let ms = |us: u64| us as f64 / 1000.0;
        let lat = |l: &Latency| {
            format!(
                "p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  max {:.2} ms  ({} samples)",
                ms(l.p50_us),
                ms(l.p90_us),
                ms(l.p99_us),
                ms(l.max_us),
                l.count
            )
        };
        let e = &self.exactly_once;
        let mut out = String::new();
        let _ = writeln!(out, "tenure bench: {}", self.title());
        let _ = writeln!(out, "  url             {}", self.url);
        let _ = writeln!(out, "  items           {}", self.items);
        let _ = writeln!(out, "  items/s         {:.0}", self.items_per_s);
        let _ = writeln!(
            out,
            "  elapsed         {:.3} s (seeding {:.3} s, not counted)",
            self.elapsed_s, self.seed_s
        );
        if let Some(l) = &self.claim_latency {
            let _ = writeln!(out, "  claim latency   {}", lat(l));
        }
        if let Some(l) = &self.pickup_latency {
            let _ = writeln!(out, "  pickup latency  {}", lat(l));
        }
        let _ = writeln!(
            out,
            "  exactly once    {} of {} finished once; {} twice, {} lost, {} unknown, {} refused, {} left: {}",
            e.finished - e.finished_twice,
            e.expected,
            e.finished_twice,
            e.lost,
            e.not_seeded,
            e.completes_refused,
            e.left_in_queue,
            if e.holds { "ok" } else { "FAILED" }
        );
        let removed = if self.cleanup.removed {
            "removed"
        } else {
            "drained, its finished items left to the store's purge"
        };
        let _ = writeln!(
            out,
            "  cleanup         {} {} {removed}",
            self.cleanup.kind, self.cleanup.name
        );
        if let Some(fl) = &self.claim_p99_by_minute {
            let _ = writeln!(
                out,
                "  claim p99       first minute {:.2} ms, last minute {:.2} ms ({:.2}x)",
                ms(fl.first_minute_us),
                ms(fl.last_minute_us),
                fl.last_over_first
            );
        }
        if let Some(peaks) = &self.peak_dead_tuples {
            let list: Vec<String> = peaks.iter().map(|(t, n)| format!("{t} {n}")).collect();
            let _ = writeln!(
                out,
                "  dead tuples     peak {}{}",
                if list.is_empty() {
                    "none".to_owned()
                } else {
                    list.join(", ")
                },
                if self.snapshot_held {
                    " (snapshot held)"
                } else {
                    ""
                }
            );
        }
        if let Some(p) = &self.plot {
            let _ = writeln!(out, "  plot            {p}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_is_bucketed_into_items_per_second() {
        let t = throughput(&[(0.01, 10), (0.04, 10), (0.06, 5), (0.12, 1)], 0.15);
        assert_eq!(t.bucket_s, 0.05);
        assert_eq!(t.points.len(), 3);
        assert!((t.points[0].1 - 400.0).abs() < 1e-9);
        assert!((t.points[1].1 - 100.0).abs() < 1e-9);
        assert!((t.points[2].1 - 20.0).abs() < 1e-9);
        assert_eq!(t.end_s, 0.15);
    }

    #[test]
    fn a_partial_last_bucket_shows_the_rate_it_had_not_a_fall() {
        // A steady 1000 items/s for 0.33 s, one item every millisecond: the last
        // 50 ms bucket covers only 30 ms of it.
        let timeline: Vec<(f64, u32)> = (1..=330).map(|ms| (f64::from(ms) / 1e3, 1)).collect();
        let t = throughput(&timeline, 0.33);
        assert_eq!(t.bucket_s, 0.05);
        assert_eq!(t.points.len(), 7);
        let (start, rate) = *t.points.last().unwrap();
        assert_eq!(start, 0.3);
        assert!((rate - 1000.0).abs() < 40.0, "last bucket {rate} items/s");
        for (at, rate) in &t.points {
            assert!((rate - 1000.0).abs() < 40.0, "{at}: {rate} items/s");
        }
    }

    #[test]
    fn bucket_widths_are_round_and_about_a_hundredth() {
        assert_eq!(bucket_width(1.0), 0.05);
        assert_eq!(bucket_width(30.0), 0.5);
        assert_eq!(bucket_width(100.0), 1.0);
    }
}
