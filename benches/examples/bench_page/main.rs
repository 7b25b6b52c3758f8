//! Writes `docs/benchmarks.md`: every table of the benchmarks page, from one run.
//!
//! ```sh
//! cargo run --release -p tenure-benches --example bench_page -- [--scale F] [--rounds R]
//!     [--stores memory,sqlite,postgres,redis] [--out PATH]
//! ```
//!
//! Per store, one after the other, each cell on fresh data (a new store, file, schema or
//! key prefix), seeding never timed:
//!
//! - **claim + complete**: `W` tasks looping `claim(B)` then one `complete` of the
//!   batch, beside the raw loop of `tenure_benches::raw` doing the same claim and fenced
//!   finalize on the same backend, back to back; B in {1, 100}, W in {1, 4};
//! - **through the Worker**: the burn-down cells of `tenure_benches::cells` (the store
//!   loop, and a `Worker` with a no-op handler at 16, 64 and 256 slots);
//! - **backlog**: the store loop and a Worker of 64 draining the top of a backlog of
//!   1,000 and of a large one (items scheduled a week out);
//! - **stream runs**: one stream drained with runs off and with runs of 100, beside
//!   unstreamed items (`tenure_benches::streams`);
//! - **sustained**: 500 items/s enqueued one call each while a Worker of 16 works them,
//!   beside 4 store loops polling every millisecond; pickup latency.
//!
//! `--scale` (default 1) multiplies every item count and the sustained run's length
//! (at least 2 s): 1 makes each cell run about 3 s on a quiet 2-core machine; 0.2 is a
//! modest run for a busy one (about a quarter of an hour). `--rounds` (default 1) runs
//! every cell that many times and reports medians. PostgreSQL is read at `TENURE_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), Redis at `TENURE_REDIS_URL` (default
//! `redis://127.0.0.1:6379`); each cell's schema or prefix is removed after it. A store
//! that cannot be reached stops the run before anything is written: leave it out with
//! `--stores`. The page says the date, the commit, the machine and the sizes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tenure_benches::cells::{backlog_label, Rounds, BACKLOG, BURNDOWN, SMALL_BACKLOG};
use tenure_benches::page::load;
use tenure_benches::streams::STREAM_CELLS;
use tenure_benches::sustained::{self, Plan, Summary};
use tenure_benches::{bench_queue, drain, runtime, seed, seed_backlog, DrainSpec, OnEmpty};
use tenure_core::Store;

mod backends;
mod page;

use backends::{Memory, Postgres, Redis, Sqlite, CELL_POOL};
use page::{humantime, page, Run};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The claim + complete cells: (B, W).
const CLAIM_CELLS: [(usize, usize); 4] = [(1, 1), (1, 4), (100, 1), (100, 4)];
/// The sustained run's rate, warm-up and slots.
const RATE: u32 = 500;
const WARMUP: Duration = Duration::from_secs(1);
const SUSTAINED_SLOTS: usize = 16;
/// The store loops of the sustained run: loops, items per claim, sleep on empty.
const LOOPS: (usize, u32) = (4, 1);
const LOOP_POLL: Duration = Duration::from_millis(1);
/// How long the sustained run counts at `scale`: 5 s at scale 1, at least 2 s.
fn sustained_length(scale: f64) -> Duration {
    Duration::from_secs_f64((5.0 * scale).clamp(2.0, 60.0))
}
/// The big backlog at scale 1.
const BIG_BACKLOG: usize = 1_000_000;

/// Item counts of one store's cells at scale 1, each about 3 s of draining on a quiet
/// 2-core machine.
#[derive(Clone, Copy)]
struct Sizes {
    claim_single: usize,
    claim_batched: usize,
    burndown: usize,
    backlog: usize,
    stream: usize,
}

impl Sizes {
    fn scaled(self, scale: f64) -> Sizes {
        let s = |n: usize| ((n as f64 * scale) as usize).max(1_000);
        Sizes {
            claim_single: s(self.claim_single),
            claim_batched: s(self.claim_batched),
            burndown: s(self.burndown),
            backlog: s(self.backlog),
            stream: s(self.stream),
        }
    }
}

/// What one store needs for the cells: a fresh store, a fresh raw loop, cleanup.
trait Backend {
    type Store: Store + Clone + 'static;
    /// The name in the tables.
    const NAME: &'static str;
    /// Item counts at scale 1.
    const SIZES: Sizes;
    /// A new, empty store on data of its own, with a pool of `pool` connections where
    /// the store has one.
    async fn open(&mut self, pool: usize) -> Res<Self::Store>;
    /// A new, empty store for the sustained run, set up as an application would run
    /// it (wake-ups on where the store has them).
    async fn open_live(&mut self) -> Res<Self::Store> {
        self.open(CELL_POOL).await
    }
    /// Called after each seed (not timed): PostgreSQL vacuums.
    async fn seeded(&mut self, _store: &Self::Store) -> Res<()> {
        Ok(())
    }
    /// Removes what `open` made.
    async fn close(&mut self, store: Self::Store) -> Res<()>;
    /// Seeds `n` items for the raw loop (not timed), drains them with `workers` loops
    /// claiming `batch`, cleans up; answers the drain's time.
    async fn raw(&mut self, n: usize, batch: usize, workers: usize) -> Res<Duration>;
    /// The server's version, for the page.
    async fn version(&mut self) -> Res<Option<String>> {
        Ok(None)
    }
}

// -------------------------------------------------------------------------- cells

/// What one store measured.
struct Measured {
    name: &'static str,
    sizes: Sizes,
    big_backlog: usize,
    claim: Rounds,
    burndown: Rounds,
    backlog: Rounds,
    streams: Rounds,
    sustained: Vec<(&'static str, Result<Summary, String>)>,
    version: Option<String>,
}

fn report_sustained(
    m: &mut Measured,
    who: &'static str,
    run: Result<Summary, tenure_benches::BenchError>,
) {
    match &run {
        Ok(summary) => println!("  {who}: {summary}"),
        Err(e) => println!("  {who}: FAILED: {e}"),
    }
    m.sustained.push((who, run.map_err(|e| e.to_string())));
}

fn claim_label(side: &str, batch: usize, workers: usize) -> String {
    format!("{side} b{batch} w{workers}")
}

async fn measure<B: Backend>(mut b: B, scale: f64, rounds: usize) -> Res<Measured> {
    let sizes = B::SIZES.scaled(scale);
    let big = ((BIG_BACKLOG as f64 * scale) as usize).max(SMALL_BACKLOG * 10);
    let queue = bench_queue()?;
    let name = B::NAME;
    let mut m = Measured {
        name,
        sizes,
        big_backlog: big,
        claim: Rounds::new(),
        burndown: Rounds::new(),
        backlog: Rounds::new(),
        streams: Rounds::new(),
        sustained: Vec::new(),
        version: b.version().await?,
    };

    println!("{name}: claim + complete beside the raw loop");
    for _ in 0..rounds {
        for (batch, workers) in CLAIM_CELLS {
            let n = if batch == 1 {
                sizes.claim_single
            } else {
                sizes.claim_batched
            };
            // One connection more than the loops, as the PostgreSQL store's docs advise.
            let store = b.open(workers + 1).await?;
            seed(&store, &queue, n).await?;
            b.seeded(&store).await?;
            let spec = DrainSpec::new(queue.clone(), n, batch, workers).on_empty(OnEmpty::Retry {
                pause: Duration::from_millis(1),
                give_up_after: 1_000,
            });
            let run = drain(&store, &spec).await?;
            b.close(store).await?;
            m.claim
                .record(&claim_label("tenure", batch, workers), n, run.elapsed);
            let elapsed = b.raw(n, batch, workers).await?;
            m.claim
                .record(&claim_label("raw", batch, workers), n, elapsed);
        }
    }

    println!("{name}: burn-down through the Worker");
    let n = sizes.burndown;
    for _ in 0..rounds {
        for d in BURNDOWN {
            let store = b.open(CELL_POOL).await?;
            seed(&store, &queue, n).await?;
            b.seeded(&store).await?;
            let elapsed = d.drain(&store, &queue, n).await?;
            b.close(store).await?;
            m.burndown.record(&d.label(), n, elapsed);
        }
    }

    println!("{name}: the top of a small and of a big backlog");
    let n = sizes.backlog;
    let mut stores = Vec::new();
    for backlog in [SMALL_BACKLOG, big] {
        let store = b.open(CELL_POOL).await?;
        seed_backlog(&store, &queue, backlog).await?;
        stores.push((backlog, store));
    }
    for _ in 0..rounds {
        for d in BACKLOG {
            for (backlog, store) in &stores {
                seed(store, &queue, n).await?;
                b.seeded(store).await?;
                let elapsed = d.drain(store, &queue, n).await?;
                m.backlog.record(&backlog_label(&d, *backlog), n, elapsed);
            }
        }
    }
    for (backlog, store) in stores {
        let counts = store.queue_counts(&queue).await?;
        if counts.scheduled != backlog as u64 {
            return Err(format!("the backlog of {backlog} changed: {counts:?}").into());
        }
        b.close(store).await?;
    }

    println!("{name}: stream runs");
    let n = sizes.stream;
    for _ in 0..rounds {
        for cell in STREAM_CELLS {
            let store = b.open(CELL_POOL).await?;
            cell.seed(&store, &queue, n).await?;
            b.seeded(&store).await?;
            let elapsed = cell.drain(&store, &queue, n).await?;
            b.close(store).await?;
            m.streams.record(&cell.label(), n, elapsed);
        }
    }

    println!("{name}: sustained pickup latency");
    let plan = Plan::new(RATE, WARMUP, sustained_length(scale));
    let settle = Duration::from_secs(30);
    // A failed check is a finding, not a reason to throw the run away: the page shows it.
    let store = b.open_live().await?;
    let run = sustained::run_worker(&store, &store, &queue, &plan, SUSTAINED_SLOTS, settle).await;
    if run.is_err() {
        let counts = store.queue_counts(&queue).await?;
        eprintln!("  after the failure: {counts:?}");
    }
    report_sustained(&mut m, "Worker c16", run.map(|r| r.summary));
    b.close(store).await?;
    let store = b.open_live().await?;
    let run = sustained::run_store(&store, &queue, &plan, LOOPS, LOOP_POLL, settle).await;
    report_sustained(&mut m, "4 store loops, 1 ms poll", run.map(|r| r.summary));
    b.close(store).await?;
    Ok(m)
}

// --------------------------------------------------------------------------- main

struct Args {
    scale: f64,
    rounds: usize,
    stores: Vec<String>,
    out: PathBuf,
}

const USAGE: &str = "usage: bench_page [--scale F] [--rounds R] [--stores memory,sqlite,postgres,redis] [--out PATH]";

fn args() -> Res<Args> {
    let mut a = Args {
        scale: 1.0,
        rounds: 1,
        stores: ["memory", "sqlite", "postgres", "redis"]
            .map(str::to_owned)
            .to_vec(),
        out: Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/benchmarks.md"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--scale" => {
                a.scale = value()?.parse()?;
                if !(a.scale > 0.0 && a.scale <= 100.0) {
                    return Err("--scale must be above 0 and at most 100".into());
                }
            }
            "--rounds" => {
                a.rounds = value()?.parse()?;
                if a.rounds == 0 {
                    return Err("--rounds must be at least 1".into());
                }
            }
            "--stores" => {
                a.stores = value()?.split(',').map(str::to_owned).collect();
                if let Some(bad) = a
                    .stores
                    .iter()
                    .find(|s| !["memory", "sqlite", "postgres", "redis"].contains(&s.as_str()))
                {
                    return Err(format!("--stores: unknown store {bad:?}\n{USAGE}").into());
                }
            }
            "--out" => a.out = PathBuf::from(value()?),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {flag:?}\n{USAGE}").into()),
        }
    }
    Ok(a)
}

fn main() -> Res<()> {
    let a = args()?;
    let rt = runtime()?;
    let started = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let clock = Instant::now();
    let load_before = load();
    let mut command = "cargo run --release -p tenure-benches --example bench_page --".to_owned();
    let _ = write!(command, " --scale {}", a.scale);
    if a.rounds > 1 {
        let _ = write!(command, " --rounds {}", a.rounds);
    }
    if a.stores.len() < 4 {
        let _ = write!(command, " --stores {}", a.stores.join(","));
    }
    let measured: Vec<Measured> = rt.block_on(async {
        // Reach every server before measuring anything.
        let pg = if a.stores.iter().any(|s| s == "postgres") {
            Some(Postgres::connect().await?)
        } else {
            None
        };
        let redis = if a.stores.iter().any(|s| s == "redis") {
            Some(Redis::connect().await?)
        } else {
            None
        };
        let mut out = Vec::new();
        if a.stores.iter().any(|s| s == "memory") {
            out.push(measure(Memory, a.scale, a.rounds).await?);
        }
        if a.stores.iter().any(|s| s == "sqlite") {
            out.push(measure(Sqlite::new()?, a.scale, a.rounds).await?);
        }
        if let Some(pg) = pg {
            out.push(measure(pg, a.scale, a.rounds).await?);
        }
        if let Some(redis) = redis {
            out.push(measure(redis, a.scale, a.rounds).await?);
        }
        Ok::<_, Box<dyn std::error::Error>>(out)
    })?;
    let run = Run {
        started,
        load_before,
        load_after: load(),
        elapsed: clock.elapsed(),
        scale: a.scale,
        rounds: a.rounds,
        command,
    };
    let text = page(&run, &measured);
    if let Some(dir) = a.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&a.out, text)?;
    println!(
        "wrote {} ({} in all)",
        a.out.display(),
        humantime(run.elapsed)
    );
    Ok(())
}
