//! The burn-down and backlog cells every store's bench runs, side by side in one run:
//! the store-level loop and a `Worker` on the same store and `N`, and the same drain
//! on top of a small and of a large backlog.
//!
//! Each cell drains `N` items seeded just before it (not timed). A cell is meant to
//! run for at least about 3 s, which criterion's ten samples per cell would turn into
//! minutes per cell; so these groups run their own rounds instead: every round runs
//! every cell once, in turn, so noise from elsewhere on the machine falls on all cells
//! alike, and the report is the median over rounds of each cell's items/s, with the
//! ratios that matter, each the median over rounds of that round's ratio:
//!
//! - [`BURNDOWN`]: `store b100 w4` (`claim(100)` + `complete`, 4 tasks), `store b16
//!   w1` (as many items in flight as a worker of 16), and a `Worker` with a no-op
//!   handler at concurrency 16, 64 and 256; each worker cell is read against
//!   [`Drainer::reference`].
//! - backlog: `store b100 w4` and `worker c64` draining the top of a backlog of
//!   1,000 and of [`BIG_BACKLOG`] items scheduled a week out ([`seed_backlog`]); the
//!   ratio big/small is the flatness (1.0 is flat).
//!
//! Environment: `TENURE_BENCH_N` (items per burn-down cell), `TENURE_BENCH_BACKLOG_N`
//! (items per backlog cell), `TENURE_BENCH_BACKLOG` (the big backlog),
//! `TENURE_BENCH_ROUNDS` (default 3). Each store's bench sizes its own defaults.
//!
//! [`seed_backlog`]: crate::seed_backlog

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use tenure_core::{QueueName, Store};

use crate::worker::{drain_worker, WorkerSpec};
use crate::{drain, BenchError, DrainSpec, OnEmpty};

/// The big backlog of the backlog cells, unless `TENURE_BENCH_BACKLOG` says otherwise.
pub const BIG_BACKLOG: usize = 1_000_000;
/// The small backlog the big one is compared with.
pub const SMALL_BACKLOG: usize = 1_000;

/// One way to drain a seeded queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drainer {
    /// [`drain`]: `workers` tasks looping `claim(batch)` then `complete`.
    Store {
        /// Items per claim.
        batch: usize,
        /// Tasks.
        workers: usize,
    },
    /// [`drain_worker`]: one `Worker` with a no-op handler.
    Worker {
        /// Handler slots.
        concurrency: usize,
    },
}

/// The burn-down cells, in the order each round runs them.
pub const BURNDOWN: [Drainer; 5] = [
    Drainer::Store {
        batch: 100,
        workers: 4,
    },
    Drainer::Store {
        batch: 16,
        workers: 1,
    },
    Drainer::Worker { concurrency: 16 },
    Drainer::Worker { concurrency: 64 },
    Drainer::Worker { concurrency: 256 },
];

/// The cells run on top of each backlog.
pub const BACKLOG: [Drainer; 2] = [
    Drainer::Store {
        batch: 100,
        workers: 4,
    },
    Drainer::Worker { concurrency: 64 },
];

impl Drainer {
    /// `store b100 w4`, `worker c64`.
    pub fn label(&self) -> String {
        match self {
            Drainer::Store { batch, workers } => format!("store b{batch} w{workers}"),
            Drainer::Worker { concurrency } => format!("worker c{concurrency}"),
        }
    }

    /// The store-level cell a worker cell is measured against: at concurrency 16 the
    /// loop with as many items in flight (`store b16 w1`), above it `store b100 w4`.
    /// `None` for store cells.
    pub fn reference(&self) -> Option<Drainer> {
        match self {
            Drainer::Store { .. } => None,
            Drainer::Worker { concurrency } if *concurrency <= 16 => Some(Drainer::Store {
                batch: 16,
                workers: 1,
            }),
            Drainer::Worker { .. } => Some(Drainer::Store {
                batch: 100,
                workers: 4,
            }),
        }
    }

    /// Drains the `n` ready items of `queue` and answers the time it took. A store
    /// loop whose claim comes back empty sleeps 1 ms and claims again until every item
    /// has finished (another loop may hold the last ones for a moment).
    pub async fn drain<S: Store + Clone>(
        &self,
        store: &S,
        queue: &QueueName,
        n: usize,
    ) -> Result<Duration, BenchError> {
        let run = match *self {
            Drainer::Store { batch, workers } => {
                let spec =
                    DrainSpec::new(queue.clone(), n, batch, workers).on_empty(OnEmpty::Retry {
                        pause: Duration::from_millis(1),
                        give_up_after: 1_000,
                    });
                drain(store, &spec).await?
            }
            Drainer::Worker { concurrency } => {
                drain_worker(store, &WorkerSpec::new(queue.clone(), n, concurrency)).await?
            }
        };
        Ok(run.elapsed)
    }
}

/// `var` read as a count (`_` allowed as a digit separator), or `default`.
///
/// # Panics
/// When `var` is set to something that is not a count: a bench should not quietly run
/// another size than the one asked for.
pub fn env_count(var: &str, default: usize) -> usize {
    match std::env::var(var) {
        Ok(v) => v
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{var}={v:?} is not a count")),
        Err(_) => default,
    }
}

/// Whether a group named `group` should run in this bench process: only under
/// `cargo bench` (an argument `--bench`), and only when no filter was given or a
/// filter is part of the name.
pub fn wanted(group: &str) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        return false;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    filters.is_empty() || filters.iter().any(|f| group.contains(f.as_str()))
}

/// Items/s of every cell over the rounds of one group.
#[derive(Debug, Default)]
pub struct Rounds {
    order: Vec<String>,
    rates: BTreeMap<String, Vec<f64>>,
}

impl Rounds {
    /// No rounds yet.
    pub fn new() -> Self {
        Rounds::default()
    }

    /// Records that cell `label` drained `n` items in `elapsed`, and prints it.
    pub fn record(&mut self, label: &str, n: usize, elapsed: Duration) {
        let rate = n as f64 / elapsed.as_secs_f64().max(1e-9);
        println!("  {label:<28} {n:>9} items in {elapsed:>10.3?}: {rate:>9.0} items/s");
        if !self.rates.contains_key(label) {
            self.order.push(label.to_owned());
        }
        self.rates.entry(label.to_owned()).or_default().push(rate);
    }

    /// The median items/s of cell `label` over its rounds.
    pub fn median(&self, label: &str) -> Option<f64> {
        let mut v = self.rates.get(label)?.clone();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    }

    /// A markdown table of every cell's median, and a line per ratio `(numerator,
    /// denominator)` that both have.
    pub fn table(&self, title: &str, ratios: &[(String, String)]) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "\n{title}\n");
        let _ = writeln!(out, "| cell | items/s (median) | rounds |");
        let _ = writeln!(out, "|---|---|---|");
        for label in &self.order {
            let rounds = self.rates.get(label).map_or(0, Vec::len);
            let median = self.median(label).unwrap_or(0.0);
            let _ = writeln!(out, "| {label} | {median:.0} | {rounds} |");
        }
        let _ = writeln!(out);
        for (num, den) in ratios {
            if let Some((median, low, high)) = self.ratio(num, den) {
                let _ = writeln!(
                    out,
                    "ratio {num} / {den}: {median:.2} (rounds {low:.2}-{high:.2})"
                );
            }
        }
        out
    }

    /// The ratio of cell `num` over cell `den` in each round (the two ran in the
    /// same round, so they shared its conditions): `(median, lowest, highest)`.
    pub fn ratio(&self, num: &str, den: &str) -> Option<(f64, f64, f64)> {
        let (a, b) = (self.rates.get(num)?, self.rates.get(den)?);
        let mut r: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
        r.sort_by(f64::total_cmp);
        Some((*r.get(r.len() / 2)?, *r.first()?, *r.last()?))
    }
}

/// The ratio lines of the burn-down group: every worker cell over its reference.
pub fn burndown_ratios() -> Vec<(String, String)> {
    BURNDOWN
        .iter()
        .filter_map(|d| d.reference().map(|r| (d.label(), r.label())))
        .collect()
}

/// The label of cell `d` on top of a backlog of `backlog` items.
pub fn backlog_label(d: &Drainer, backlog: usize) -> String {
    format!("{}, backlog {backlog}", d.label())
}

/// The ratio lines of the backlog group: each cell on the big backlog over the same
/// cell on the small one.
pub fn backlog_ratios(big: usize) -> Vec<(String, String)> {
    BACKLOG
        .iter()
        .map(|d| (backlog_label(d, big), backlog_label(d, SMALL_BACKLOG)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_cells_are_read_against_the_loop_with_as_many_items_in_flight() {
        let ratios = burndown_ratios();
        assert_eq!(
            ratios,
            vec![
                ("worker c16".into(), "store b16 w1".into()),
                ("worker c64".into(), "store b100 w4".into()),
                ("worker c256".into(), "store b100 w4".into()),
            ]
        );
    }

    #[test]
    fn the_table_shows_medians_and_the_ratios_of_each_round() {
        let mut r = Rounds::new();
        // Round by round the worker takes 2x, 4x and 1x the store's time.
        for (store, worker) in [(1, 2), (2, 8), (4, 4)] {
            r.record("store b100 w4", 1000, Duration::from_secs(store));
            r.record("worker c64", 1000, Duration::from_secs(worker));
        }
        assert_eq!(r.median("store b100 w4"), Some(500.0));
        assert_eq!(
            r.ratio("worker c64", "store b100 w4"),
            Some((0.5, 0.25, 1.0))
        );
        let t = r.table("t", &[("worker c64".into(), "store b100 w4".into())]);
        assert!(t.contains("| store b100 w4 | 500 | 3 |"), "{t}");
        assert!(
            t.contains("ratio worker c64 / store b100 w4: 0.50 (rounds 0.25-1.00)"),
            "{t}"
        );
    }
}
