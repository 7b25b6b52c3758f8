//! Chaos figures users can read: 100,000 items through a fleet of worker processes
//! while workers are SIGKILLed and the server restarts (PostgreSQL) or fails over
//! (Redis Sentinel), counted from an exact ledger.
//!
//! ```sh
//! cargo run --release -p tenure-benches --example chaos                  # both, print
//! cargo run --release -p tenure-benches --example chaos -- postgres      # one store
//! cargo run --release -p tenure-benches --example chaos -- --write docs/chaos.md
//! ```
//!
//! Options: `--items N` (100000), `--seconds N` (the producer enqueues them at a steady
//! rate over 60 s), `--workers N` (worker processes, 4), `--kills N`
//! (20), `--restarts N` (PostgreSQL, 3), `--failovers N` (Redis, 2), `--json` (one
//! JSON object per scenario on stdout), `--write PATH` (the page in `docs/chaos.md`).
//!
//! Every server is a throwaway one on free loopback ports (PostgreSQL 15's `initdb`,
//! `redis-server` with three sentinels), started, faulted and stopped by this program.
//!
//! **The ledger.** Each worker process appends one line per handler start (`R`) and
//! per accepted finish (`A`) to a log of its own, with the item, attempt and lease id,
//! unbuffered, so a SIGKILL loses at most the line being written.
//! - PostgreSQL: the handler takes the finalize ([`Job::take_finalize`]) and inserts
//!   its ledger row and completes the item in one transaction (`complete_in_tx`); the
//!   row commits only if the complete was accepted. The table is the ledger.
//! - Redis: the worker finalizes as usual (batched); a store wrapper records every
//!   `complete` answer and the process logs each accepted token. A worker killed
//!   between the answer and its log line leaves an item done in the store with no
//!   line: counted as finished once, "answer not logged".
//!
//! **What is counted**, over the items whose enqueue was acknowledged:
//! - *lost*: not done at the end (missing, or left ready, running or dead);
//! - *finished by a superseded lease*: an accepted finish whose lease is not the one
//!   the item ended with (a finish the store accepted and then forgot in a failover,
//!   or a fencing hole);
//! - *finished twice*: two accepted finishes of one item;
//! - *run more than once*: handler starts beyond the first (expected after a kill:
//!   at-least-once execution; this is what the fencing makes harmless).
//!
//! And per fault, the time to recover: for a killed worker, from the kill until every
//! item it was running is finished by another; for a restart or failover, how long the
//! server was gone and how long after it was back the fleet finished its next item.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use tenure_test_support::pg_cluster as cluster;
use tenure_test_support::redis as support;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tenure_benches::page::{commit, machine, utc};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub(crate) const QUEUE: &str = "chaos";
/// Items one enqueue call carries.
pub(crate) const ENQUEUE_BATCH: usize = 500;
/// Enqueued but unfinished items the producer keeps ahead of the fleet, so faults
/// land while enqueues are still going on.
pub(crate) const AHEAD: u64 = 10_000;
/// The fleet's lease: a killed worker's items are handed out again after it.
pub(crate) const LEASE: Duration = Duration::from_secs(5);
/// What each handler does before it finishes: 20 ms of work (a sleep), so a killed
/// worker has items in flight.
pub(crate) const WORK: Duration = Duration::from_millis(20);
/// A run that finishes nothing for this long is reported as stuck.
pub(crate) const STALL: Duration = Duration::from_secs(120);

pub(crate) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

mod fleet;
mod report;
mod scenario;
mod worker;

use report::{costs, faults_table, json, summary_table};
use scenario::{run, Scenario};
use worker::{worker_main, WorkerArgs};

struct Options {
    stores: Vec<&'static str>,
    items: usize,
    workers: usize,
    kills: usize,
    restarts: usize,
    failovers: usize,
    seconds: f64,
    json: bool,
    write: Option<PathBuf>,
}

fn options(args: &[String]) -> Result<Options, BoxError> {
    let mut o = Options {
        stores: Vec::new(),
        items: 100_000,
        workers: 4,
        kills: 20,
        restarts: 3,
        failovers: 2,
        seconds: 60.0,
        json: false,
        write: None,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<usize, BoxError> {
            let v = args
                .next()
                .ok_or_else(|| format!("{name}: needs a number"))?;
            v.parse()
                .map_err(|_| format!("{name}: {v:?} is not a number").into())
        };
        match arg.as_str() {
            "postgres" => o.stores.push("postgres"),
            "redis" => o.stores.push("redis"),
            "all" => o.stores.extend(["postgres", "redis"]),
            "--items" => o.items = number("--items")?.max(1),
            "--workers" => o.workers = number("--workers")?.max(1),
            "--kills" => o.kills = number("--kills")?,
            "--restarts" => o.restarts = number("--restarts")?,
            "--failovers" => o.failovers = number("--failovers")?,
            "--seconds" => o.seconds = number("--seconds")?.max(1) as f64,
            "--json" => o.json = true,
            "--write" => {
                o.write = Some(args.next().ok_or("--write: needs a path")?.into());
            }
            other => return Err(format!("{other:?}: expected postgres, redis, all or an option (see the docs at the top of chaos.rs)").into()),
        }
    }
    if o.stores.is_empty() {
        o.stores.extend(["postgres", "redis"]);
    }
    Ok(o)
}

/// How a scenario names its Redis durability setting.
fn wait_setting(wait: u32) -> &'static str {
    if wait > 0 {
        "wait_replicas(1, 1 s)"
    } else {
        "no WAIT"
    }
}

fn scenarios(o: &Options) -> Vec<Scenario> {
    let mut out = Vec::new();
    let base = |name: String, store: &'static str| Scenario {
        name,
        store,
        items: o.items,
        workers: o.workers,
        kills: o.kills,
        server_faults: 0,
        wait_replicas: 0,
        standby: None,
        work: WORK,
        seconds: o.seconds,
    };
    for store in &o.stores {
        if *store == "postgres" {
            out.push(Scenario {
                server_faults: o.restarts,
                ..base(
                    format!(
                        "PostgreSQL: {} worker kills, {} restarts",
                        o.kills, o.restarts
                    ),
                    "postgres",
                )
            });
            // What a synchronous standby costs, without faults, on a fifth of the items.
            for sync in [false, true] {
                out.push(Scenario {
                    items: (o.items / 2).max(1),
                    kills: 0,
                    standby: Some(sync),
                    // As fast as the fleet drains: the rate is the measurement.
                    seconds: 0.001,
                    // A handler that finishes at once: the store is what is timed.
                    work: Duration::ZERO,
                    ..base(
                        format!(
                            "PostgreSQL, {} standby, no faults",
                            if sync { "synchronous" } else { "asynchronous" }
                        ),
                        "postgres",
                    )
                });
            }
        } else {
            for wait in [0, 1] {
                let setting = wait_setting(wait);
                out.push(Scenario {
                    server_faults: o.failovers,
                    wait_replicas: wait,
                    ..base(
                        format!(
                            "Redis Sentinel, {setting}: {} worker kills, {} failovers",
                            o.kills, o.failovers
                        ),
                        "redis",
                    )
                });
            }
            // What WAIT costs, without faults, as fast as the fleet drains.
            for wait in [0, 1] {
                let setting = wait_setting(wait);
                out.push(Scenario {
                    items: (o.items / 2).max(1),
                    kills: 0,
                    wait_replicas: wait,
                    seconds: 0.001,
                    // A handler that finishes at once: the store is what is timed.
                    work: Duration::ZERO,
                    ..base(format!("Redis Sentinel, {setting}, no faults"), "redis")
                });
            }
        }
    }
    out
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if args.first().map(String::as_str) == Some("worker") {
        let [_, store, url, log, wait, work]: [String; 6] = args
            .try_into()
            .map_err(|_| "worker STORE URL LOG WAIT_REPLICAS WORK_MS")?;
        return runtime.block_on(worker_main(WorkerArgs {
            store,
            url,
            log: log.into(),
            wait_replicas: wait.parse()?,
            concurrency: 32,
            work: Duration::from_millis(work.parse()?),
        }));
    }
    let o = options(&args)?;
    let started = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let dir = tempfile::tempdir()?;
    let mut outcomes = Vec::new();
    for (n, scenario) in scenarios(&o).iter().enumerate() {
        eprintln!("== {}", scenario.name);
        let sub = dir.path().join(n.to_string());
        std::fs::create_dir(&sub)?;
        let outcome = runtime.block_on(run(scenario, &sub))?;
        if o.json {
            println!("{}", json(&outcome));
        }
        outcomes.push(outcome);
    }
    let command = format!(
        "cargo run --release -p tenure-benches --example chaos --{}",
        args.iter()
            .filter(|a| !a.starts_with("--write") && !a.ends_with(".md"))
            .fold(String::new(), |s, a| s + " " + a)
    );
    let mut page = format!(
        "# Chaos\n\nMeasured {} at {} on {}; {} worker processes of 32 slots, handlers of {} ms (none in the runs without faults), a {} s lease, client and servers on the same machine.\n\n\
         Every figure on this page comes from one run of\n\n```sh\n{}\n```\n\n",
        utc(started),
        commit(),
        machine(),
        o.workers,
        WORK.as_millis(),
        LEASE.as_secs(),
        command.trim_end_matches(" --"),
    );
    page.push_str(&summary_table(&outcomes));
    page.push_str(&costs(&outcomes));
    for outcome in outcomes.iter().filter(|o| !o.faults.is_empty()) {
        page.push('\n');
        page.push_str(&faults_table(outcome));
    }
    if !o.json {
        println!("{page}");
    }
    if let Some(path) = &o.write {
        let intro = std::fs::read_to_string(path).ok().and_then(|old| {
            old.find("<!-- figures -->")
                .map(|at| old[..at + "<!-- figures -->\n".len()].to_owned())
        });
        let text = match intro {
            Some(intro) => format!(
                "{intro}\n{}",
                page.split_once("\n\n")
                    .map_or(page.as_str(), |(_, rest)| rest)
            ),
            None => page,
        };
        std::fs::write(path, text)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
