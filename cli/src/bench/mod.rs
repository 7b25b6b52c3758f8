//! `tenure bench <url>`: claim throughput and latency on the user's own store.
//!
//! A run makes data of its own ([`target`]), seeds it, measures ([`mod@run`]) with the
//! shared harness of `tenure-benches` (the same seed, drain and worker-drain code the
//! benches use), checks that every item finished exactly once, removes its data, and
//! reports ([`report`]) as a table or one JSON document, with an SVG plot of
//! throughput over time ([`plot`]) when asked.

mod plot;
mod progress;
mod report;
mod run;
mod target;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::error::CliError;
use target::Target;

/// How the items arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    /// Seed N ready items, then drain them as fast as possible: throughput.
    BurnDown,
    /// Enqueue --rate items per second for --duration while they are worked: pickup
    /// latency at a steady load.
    Sustained,
}

/// What works the items.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Through {
    /// One `Worker` with a no-op handler and --concurrency slots: what applications
    /// run.
    Worker,
    /// --workers tasks looping `claim(--batch)` then `complete` on the store API.
    Store,
}

/// The options of `tenure bench`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tenure bench sqlite://bench.db\n  \
    tenure bench 'postgres://user@host/db' --through store -w 4 -b 100 -n 200000 --json\n  \
    tenure bench memory:// --mode sustained --rate 1000 --duration 10s --plot run.svg\n  \
    tenure bench 'postgres://user@host/db' --mode sustained --rate 1000 --producers 4 --duration 30m --hold-snapshot --held-only\n  \
    tenure bench redis://127.0.0.1:6379 -c 64\n\n\
    Every run checks that each item finished exactly once, and removes the file, schema or \
    key prefix it made. It refuses a SQLite file or PostgreSQL schema that already exists, \
    and a Redis prefix that already holds keys.")]
pub(crate) struct BenchArgs {
    /// The store: memory://, sqlite://PATH (a new file), postgres://... (a new schema
    /// tenure_bench_RANDOM, or the new one named by ?tenure_schema=NAME), redis://... (a
    /// new key prefix tenure_bench_RANDOM, or the unused one named by ?tenure_prefix=NAME).
    pub(crate) url: String,

    /// burn-down drains a seeded queue; sustained enqueues at --rate while working.
    #[arg(long, value_enum, default_value_t = Mode::BurnDown)]
    pub(crate) mode: Mode,

    /// Work the items through the worker runtime or the store API.
    #[arg(long, value_enum, default_value_t = Through::Worker)]
    pub(crate) through: Through,

    /// Items drained (burn-down).
    #[arg(short = 'n', long = "items", default_value_t = 100_000)]
    pub(crate) items: usize,

    /// Claiming tasks (--through store). On PostgreSQL, `tenure::open` gives the store
    /// a pool of 10 connections: tasks beyond it wait for one.
    #[arg(short = 'w', long, default_value_t = 4)]
    pub(crate) workers: usize,

    /// Items per claim: the store loop's claim size (default 100 in burn-down, 1 in
    /// sustained mode), or the worker's claim batch (default: its concurrency).
    #[arg(short = 'b', long)]
    pub(crate) batch: Option<usize>,

    /// The worker's handler slots (--through worker).
    #[arg(short = 'c', long, default_value_t = 64)]
    pub(crate) concurrency: usize,

    /// Items enqueued per second (sustained).
    #[arg(long, default_value_t = 500)]
    pub(crate) rate: u32,

    /// Producers enqueueing at once in a sustained run, sharing the --rate schedule
    /// (as several application processes would). One producer awaits each enqueue
    /// before the next, so a round trip caps its rate: raise this for high rates. More
    /// than one share a store handle of their own (on PostgreSQL, a pool of their
    /// own), apart from the one that works the items (--through worker).
    #[arg(long, default_value_t = 1)]
    pub(crate) producers: usize,

    /// How long the counted part of a sustained run enqueues, e.g. 10s, 500ms, 2m.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub(crate) duration: Duration,

    /// How long a sustained run enqueues before the items that count.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub(crate) warmup: Duration,

    /// Extra items seeded first, scheduled a week out so they are never claimed: the
    /// run drains from the top of a backlog this large.
    #[arg(long, default_value_t = 0)]
    pub(crate) backlog: usize,

    /// PostgreSQL only: measure twice, each on a schema of its own, first as usual and
    /// then while another session holds an idle REPEATABLE READ transaction open (as a
    /// report, `pg_dump` or a forgotten `BEGIN` in psql would), and report both with
    /// the ratio held / free of items/s. The snapshot is taken with `SELECT 1`, so it
    /// locks no table; it is taken after seeding, before the drain or the sustained
    /// run starts, and rolled back when the run ends. Both runs also report the peak
    /// dead tuples (`pg_stat_user_tables.n_dead_tup`) of the schema's tables, sampled
    /// every 250 ms.
    #[arg(long)]
    pub(crate) hold_snapshot: bool,

    /// With --hold-snapshot, only the held run (no free run first, no ratio): for a
    /// long sustained run whose first and last minutes are compared with each other.
    #[arg(long, requires = "hold_snapshot")]
    pub(crate) held_only: bool,

    /// Print one JSON document on stdout instead of the table.
    #[arg(long)]
    pub(crate) json: bool,

    /// Write an SVG plot of throughput over time to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) plot: Option<PathBuf>,

    /// Never show the progress bar (it is also hidden with --json and when stderr is
    /// not a terminal).
    #[arg(long)]
    pub(crate) quiet: bool,
}

/// `10s`, `500ms`, `2m`, or a number of seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 10s, 500ms or 2m"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("{s:?}: the unit must be ms, s or m")),
    };
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("{s:?} must be more than zero"));
    }
    Ok(Duration::from_secs_f64(secs))
}

impl BenchArgs {
    /// Checks the options, naming the one at fault.
    fn check(&self) -> Result<(), CliError> {
        let positive = |name: &str, v: usize| {
            if v == 0 {
                Err(CliError::Usage(format!("{name} must be at least 1")))
            } else {
                Ok(())
            }
        };
        positive("--workers", self.workers)?;
        positive("--concurrency", self.concurrency)?;
        positive("--producers", self.producers)?;
        if let Some(b) = self.batch {
            positive("--batch", b)?;
            if u32::try_from(b).is_err() {
                return Err(CliError::Usage("--batch is too large".to_owned()));
            }
        }
        match self.mode {
            Mode::BurnDown => positive("--items", self.items)?,
            Mode::Sustained => {
                if self.rate == 0 {
                    return Err(CliError::Usage("--rate must be at least 1".to_owned()));
                }
            }
        }
        if self.hold_snapshot
            && !(self.url.starts_with("postgres://") || self.url.starts_with("postgresql://"))
        {
            return Err(CliError::Usage(
                "--hold-snapshot: only a postgres:// store has snapshots to hold".to_owned(),
            ));
        }
        if let Some(plot) = &self.plot {
            if plot.extension().and_then(|e| e.to_str()) != Some("svg") {
                return Err(CliError::Usage(format!(
                    "--plot: {} must end in .svg",
                    plot.display()
                )));
            }
        }
        Ok(())
    }
}

/// Runs one bench: prepare the target, measure, clean up (also after a failure or
/// Ctrl-C), then report. With `--hold-snapshot`, two of them: free, then held.
pub(crate) async fn run(args: BenchArgs) -> Result<(), CliError> {
    args.check()?;
    // Listening before anything is made: an interrupt from here on is held until the
    // select below sees it, and the cleanup runs.
    let mut interrupt = Interrupt::listen()?;
    if !args.hold_snapshot {
        let (report, once) = run_one(&args, &mut interrupt, run::Snapshot::None).await?;
        if let Some(path) = &args.plot {
            plot::write_svg(path, &report)?;
        }
        if args.json {
            println!("{}", report.to_json());
        } else {
            print!("{}", report.table());
        }
        return once;
    }
    if args.held_only {
        let (held, once) = run_one(&args, &mut interrupt, run::Snapshot::Hold).await?;
        if let Some(path) = &args.plot {
            plot::write_svg(path, &held)?;
        }
        if args.json {
            println!("{}", held.to_json());
        } else {
            print!("{}", held.table());
        }
        return once;
    }
    let (free, free_once) = run_one(&args, &mut interrupt, run::Snapshot::Watch).await?;
    let (held, held_once) = run_one(&args, &mut interrupt, run::Snapshot::Hold).await?;
    if let Some(path) = &args.plot {
        plot::write_svg(path, &held)?;
    }
    let pair = report::Pair::new(free, held);
    if args.json {
        println!("{}", pair.to_json());
    } else {
        print!("{}", pair.table());
    }
    free_once.and(held_once)
}

/// One measurement on a target of its own, cleaned up after. The report comes back
/// with the exactly-once verdict, which fails the command after the report is shown.
async fn run_one(
    args: &BenchArgs,
    interrupt: &mut Interrupt,
    snapshot: run::Snapshot,
) -> Result<(report::Report, Result<(), CliError>), CliError> {
    let target = Target::prepare(&args.url, args.backlog).await?;
    let progress = progress::Progress::new(!(args.json || args.quiet));
    let measured = tokio::select! {
        m = run::measure(&target, args, &progress, snapshot) => m,
        () = interrupt.recv() => Err(CliError::Interrupted),
    };
    progress.finish();
    // The store is closed inside `measure`; now remove what the run made.
    let cleaned = target.cleanup().await;
    let measured = measured?;
    cleaned?;
    let report = report::Report::new(args, &target, &measured);
    let once = if measured.exactly_once.holds() {
        Ok(())
    } else {
        Err(CliError::ExactlyOnce(measured.exactly_once.to_string()))
    };
    Ok((report, once))
}

/// SIGINT (Ctrl-C) and, on Unix, SIGTERM, caught from the moment [`Interrupt::listen`]
/// returns.
struct Interrupt {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Interrupt {
    fn listen() -> Result<Self, CliError> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let err = |source| CliError::Io {
                context: "listening for interrupts".to_owned(),
                source,
            };
            Ok(Interrupt {
                int: signal(SignalKind::interrupt()).map_err(err)?,
                term: signal(SignalKind::terminate()).map_err(err)?,
            })
        }
        #[cfg(not(unix))]
        Ok(Interrupt {})
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_ms_s_and_m() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("1h").is_err());
        assert!(parse_duration("x").is_err());
    }
}
