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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use sqlx::{Connection, PgConnection};
use tempfile::TempDir;
use tenure_benches::cells::{
    self, backlog_label, Drainer, Rounds, BACKLOG, BURNDOWN, SMALL_BACKLOG,
};
use tenure_benches::page::{commit, load, machine, utc};
use tenure_benches::raw::memory::RawMemory;
use tenure_benches::raw::pg::{self as raw_pg, PgRaw};
use tenure_benches::raw::redis::{self as raw_redis, RedisRaw};
use tenure_benches::raw::sqlite as raw_sqlite;
use tenure_benches::streams::{self, STREAM_CELLS};
use tenure_benches::sustained::{self, Plan, Summary};
use tenure_benches::{bench_queue, drain, runtime, seed, seed_backlog, DrainSpec, OnEmpty};
use tenure_core::Store;
use tenure_memory::MemoryStore;
use tenure_postgres::{PgConfig, PgStore};
use tenure_redis::{RedisConfig, RedisStore};
use tenure_sqlite::{SqliteConfig, SqliteStore};

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

// ------------------------------------------------------------------------- memory

struct Memory;

impl Backend for Memory {
    type Store = MemoryStore;
    const NAME: &'static str = "memory";
    const SIZES: Sizes = Sizes {
        claim_single: 1_000_000,
        claim_batched: 2_000_000,
        burndown: 5_000_000,
        backlog: 1_000_000,
        stream: 1_000_000,
    };

    async fn open(&mut self, _: usize) -> Res<MemoryStore> {
        Ok(MemoryStore::default())
    }

    async fn close(&mut self, _: MemoryStore) -> Res<()> {
        Ok(())
    }

    async fn raw(&mut self, n: usize, batch: usize, workers: usize) -> Res<Duration> {
        let raw = Arc::new(RawMemory::with_items(n));
        let done = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let tasks: Vec<_> = (0..workers)
            .map(|w| {
                let (raw, done) = (raw.clone(), done.clone());
                tokio::spawn(async move {
                    let owner: Arc<str> = Arc::from(format!("w{w}"));
                    loop {
                        let claimed = raw.claim(&owner, batch);
                        if claimed.is_empty() {
                            return true;
                        }
                        let accepted = raw.finalize(&claimed);
                        done.fetch_add(accepted, Ordering::Relaxed);
                        if accepted != claimed.len() as u64 {
                            return false;
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            if !t.await? {
                return Err("a raw finalize refused an item just claimed".into());
            }
        }
        let elapsed = start.elapsed();
        check_done(&done, n)?;
        Ok(elapsed)
    }
}

fn check_done(done: &AtomicU64, n: usize) -> Res<()> {
    let finished = done.load(Ordering::Relaxed);
    if finished != n as u64 {
        return Err(format!("{finished} of {n} raw items finished").into());
    }
    Ok(())
}

// ------------------------------------------------------------------------- SQLite

struct Sqlite {
    dir: TempDir,
    files: usize,
}

impl Sqlite {
    fn new() -> Res<Self> {
        Ok(Sqlite {
            dir: TempDir::new()?,
            files: 0,
        })
    }

    fn next_path(&mut self, name: &str) -> PathBuf {
        self.files += 1;
        self.dir.path().join(format!("{name}{}.db", self.files))
    }
}

fn remove_sqlite_files(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

impl Backend for Sqlite {
    type Store = SqliteStore;
    const NAME: &'static str = "SQLite";
    const SIZES: Sizes = Sizes {
        claim_single: 10_000,
        claim_batched: 200_000,
        burndown: 600_000,
        backlog: 200_000,
        stream: 50_000,
    };

    async fn open(&mut self, _: usize) -> Res<SqliteStore> {
        let path = self.next_path("store");
        Ok(SqliteStore::open(SqliteConfig::new(path)).await?)
    }

    async fn close(&mut self, store: SqliteStore) -> Res<()> {
        let path = store.path().to_owned();
        store.close().await?;
        remove_sqlite_files(&path);
        Ok(())
    }

    async fn raw(&mut self, n: usize, batch: usize, workers: usize) -> Res<Duration> {
        let path = self.next_path("raw");
        raw_sqlite::seed(&path, n)?;
        let done = AtomicU64::new(0);
        let barrier = Barrier::new(workers + 1);
        let failed = AtomicU64::new(0);
        let start = std::thread::scope(|s| {
            for w in 0..workers {
                let (path, done, barrier, failed) = (&path, &done, &barrier, &failed);
                s.spawn(move || {
                    let Ok(mut conn) = raw_sqlite::connect(path, false) else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        barrier.wait();
                        return;
                    };
                    barrier.wait();
                    let owner = format!("w{w}");
                    loop {
                        let claimed = match raw_sqlite::claim(&mut conn, &owner, batch) {
                            Ok(c) if c.is_empty() => return,
                            Ok(c) => c,
                            Err(_) => break,
                        };
                        match raw_sqlite::finalize(&mut conn, &claimed) {
                            Ok(f) if f == claimed.len() => {
                                done.fetch_add(f as u64, Ordering::Relaxed);
                            }
                            _ => break,
                        }
                    }
                    failed.fetch_add(1, Ordering::Relaxed);
                });
            }
            barrier.wait();
            // The scope joins every thread before it returns.
            Instant::now()
        });
        let elapsed = start.elapsed();
        remove_sqlite_files(&path);
        if failed.load(Ordering::Relaxed) > 0 {
            return Err("a raw SQLite loop failed".into());
        }
        check_done(&done, n)?;
        Ok(elapsed)
    }
}

// --------------------------------------------------------------------- PostgreSQL

struct Postgres {
    url: String,
    admin: PgConnection,
}

/// The pool of the Worker cells' stores: enough for 4 claimers, or for a worker's
/// claim, finalize, renewal and heartbeat at once.
const CELL_POOL: usize = 8;

impl Postgres {
    async fn connect() -> Res<Self> {
        let url = std::env::var("TENURE_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let admin = PgConnection::connect(&url)
            .await
            .map_err(|e| format!("PostgreSQL at {url} is unreachable: {e}"))?;
        Ok(Postgres { url, admin })
    }

    async fn exec(&mut self, sql: &str) -> Res<()> {
        sqlx::Executor::execute(&mut self.admin, sql).await?;
        Ok(())
    }

    async fn store(&mut self, pool: usize, listen: bool) -> Res<PgStore> {
        let schema = format!("bench_{}", uuid::Uuid::now_v7().simple());
        Ok(PgStore::connect(
            PgConfig::new(self.url.clone())
                .schema(&schema)
                .max_connections(u32::try_from(pool)?)
                .listen(listen),
        )
        .await?)
    }
}

impl Backend for Postgres {
    type Store = PgStore;
    const NAME: &'static str = "PostgreSQL";
    const SIZES: Sizes = Sizes {
        claim_single: 5_000,
        claim_batched: 100_000,
        burndown: 200_000,
        backlog: 100_000,
        stream: 5_000,
    };

    async fn open(&mut self, pool: usize) -> Res<PgStore> {
        self.store(pool, false).await
    }

    async fn open_live(&mut self) -> Res<PgStore> {
        self.store(CELL_POOL, true).await
    }

    async fn seeded(&mut self, store: &PgStore) -> Res<()> {
        // One statement each: VACUUM cannot run inside a multi-statement query.
        for table in ["items", "streams"] {
            self.exec(&format!("VACUUM ANALYZE {}.{table}", store.schema()))
                .await?;
        }
        Ok(())
    }

    async fn close(&mut self, store: PgStore) -> Res<()> {
        let schema = store.schema().to_owned();
        store.close().await;
        self.exec(&format!("DROP SCHEMA {schema} CASCADE")).await
    }

    async fn raw(&mut self, n: usize, batch: usize, workers: usize) -> Res<Duration> {
        // The raw loop runs on the store's own table: seeded through the store.
        let store = self.store(2, false).await?;
        seed(&store, &bench_queue()?, n).await?;
        self.seeded(&store).await?;
        let mut conns = Vec::with_capacity(workers);
        for _ in 0..workers {
            conns.push(PgConnection::connect(&self.url).await?);
        }
        let raw = PgRaw::new(store.schema());
        let drained = raw_pg::drain(&raw, conns, n, batch).await;
        self.close(store).await?;
        let (elapsed, conns) = drained?;
        for c in conns {
            c.close().await?;
        }
        Ok(elapsed)
    }

    async fn version(&mut self) -> Res<Option<String>> {
        let (v,): (String,) = sqlx::query_as("SHOW server_version")
            .fetch_one(&mut self.admin)
            .await?;
        Ok(Some(format!("PostgreSQL {v}")))
    }
}

// -------------------------------------------------------------------------- Redis

struct Redis {
    url: String,
    admin: MultiplexedConnection,
}

impl Redis {
    async fn connect() -> Res<Self> {
        let url =
            std::env::var("TENURE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let client = redis::Client::open(url.clone())?;
        let admin = tokio::time::timeout(
            Duration::from_secs(3),
            client.get_multiplexed_async_connection(),
        )
        .await
        .map_err(|_| format!("Redis at {url}: connecting timed out"))?
        .map_err(|e| format!("Redis at {url} is unreachable: {e}"))?;
        Ok(Redis { url, admin })
    }

    fn prefix() -> String {
        format!("bench_{}", uuid::Uuid::now_v7().simple())
    }

    /// Deletes every key under `{prefix}:`.
    async fn delete_prefix(&mut self, prefix: &str) -> Res<()> {
        let pattern = format!("{{{prefix}}}:*");
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut self.admin)
                .await?;
            if !keys.is_empty() {
                let _: i64 = redis::cmd("UNLINK")
                    .arg(&keys)
                    .query_async(&mut self.admin)
                    .await?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }
}

impl Backend for Redis {
    type Store = RedisStore;
    const NAME: &'static str = "Redis";
    const SIZES: Sizes = Sizes {
        claim_single: 20_000,
        claim_batched: 200_000,
        burndown: 200_000,
        backlog: 100_000,
        stream: 20_000,
    };

    async fn open(&mut self, _: usize) -> Res<RedisStore> {
        Ok(RedisStore::connect(
            RedisConfig::new(self.url.clone())
                .prefix(&Self::prefix())
                .listen(false)
                .response_timeout(Duration::from_secs(120)),
        )
        .await?)
    }

    async fn open_live(&mut self) -> Res<RedisStore> {
        Ok(RedisStore::connect(RedisConfig::new(self.url.clone()).prefix(&Self::prefix())).await?)
    }

    async fn close(&mut self, store: RedisStore) -> Res<()> {
        store.remove_prefix().await?;
        Ok(())
    }

    async fn raw(&mut self, n: usize, batch: usize, workers: usize) -> Res<Duration> {
        let prefix = Self::prefix();
        let raw = RedisRaw::new(&prefix);
        raw.seed(&mut self.admin, n).await?;
        let client = redis::Client::open(self.url.clone())?;
        let mut conns = Vec::with_capacity(workers);
        for _ in 0..workers {
            conns.push(client.get_multiplexed_async_connection().await?);
        }
        let drained = raw_redis::drain(&raw, conns, n, batch).await;
        self.delete_prefix(&prefix).await?;
        Ok(drained?)
    }

    async fn version(&mut self) -> Res<Option<String>> {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut self.admin)
            .await?;
        Ok(info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .map(|v| format!("Redis {}", v.trim())))
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

// --------------------------------------------------------------------------- page

fn thousands(n: f64) -> String {
    let digits = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn rate(r: &Rounds, label: &str) -> String {
    r.median(label).map_or_else(|| "-".into(), thousands)
}

fn ratio(r: &Rounds, num: &str, den: &str) -> String {
    match r.ratio(num, den) {
        Some((median, low, high)) if (high - low) > 0.005 => {
            format!("{median:.2} ({low:.2}-{high:.2})")
        }
        Some((median, _, _)) => format!("{median:.2}"),
        None => "-".into(),
    }
}

struct Run {
    started: u64,
    load_before: String,
    load_after: String,
    elapsed: Duration,
    scale: f64,
    rounds: usize,
    command: String,
}

fn page(run: &Run, stores: &[Measured]) -> String {
    let mut p = String::new();
    let versions: Vec<&str> = stores.iter().filter_map(|m| m.version.as_deref()).collect();
    let servers = if versions.is_empty() {
        String::new()
    } else {
        format!("; {} on the same machine", versions.join(", "))
    };
    let w = &mut p;
    let _ = writeln!(w, "# Benchmarks\n");
    let _ = writeln!(
        w,
        "Measured {} at {} on {}{servers}; load average {} before and {} after, {} in all.\n",
        utc(run.started),
        commit(),
        machine(),
        run.load_before,
        run.load_after,
        humantime(run.elapsed),
    );
    let _ = writeln!(
        w,
        "Every table on this page comes from that one run of\n\n```sh\n{}\n```\n",
        run.command
    );
    let _ = writeln!(
        w,
        "at scale {} ({}; scale 1 runs each cell for about 3 s on a quiet 2-core machine). \
         The client and the servers share the machine's cores. Items/s move between runs; \
         the ratios, measured back to back in one run, are what to read. To measure your own \
         database, run `tenure bench <url>` (see [operating](operating.md#sizing)).\n",
        run.scale,
        if run.rounds == 1 {
            "each cell once".to_owned()
        } else {
            format!(
                "each cell {} times, medians, ratio ranges in brackets",
                run.rounds
            )
        },
    );

    let _ = writeln!(w, "## Claim + complete beside a raw loop\n");
    let _ = writeln!(
        w,
        "`W` tasks loop `claim(B)` then one `complete` of the batch until `N` ready items \
         have finished, each exactly once. Raw is the same claim and fenced finalize written \
         directly against the backend (`benches/src/raw.rs`): a `Mutex<VecDeque>` on memory; \
         threads with a connection each and prepared `BEGIN IMMEDIATE` statements on SQLite; \
         the same `SKIP LOCKED` claim and `(id, attempt)`-fenced `DELETE` on the store's own \
         table on PostgreSQL; a Lua claim over a list and a finalize fenced on \
         `owner:attempt` on Redis. The raw loops keep no order index, streams, scopes, dedup \
         keys or recovery.\n"
    );
    let _ = writeln!(
        w,
        "| store | B, W | N | tenure items/s | raw items/s | tenure / raw |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    for m in stores {
        for (batch, workers) in CLAIM_CELLS {
            let (t, r) = (
                claim_label("tenure", batch, workers),
                claim_label("raw", batch, workers),
            );
            let n = if batch == 1 {
                m.sizes.claim_single
            } else {
                m.sizes.claim_batched
            };
            let _ = writeln!(
                w,
                "| {} | {batch}, {workers} | {} | {} | {} | {} |",
                m.name,
                thousands(n as f64),
                rate(&m.claim, &t),
                rate(&m.claim, &r),
                ratio(&m.claim, &t, &r),
            );
        }
    }

    let _ = writeln!(w, "\n## Through the Worker\n");
    let _ = writeln!(
        w,
        "A `Worker` with a no-op handler and maintenance off drains `N` items, timed from \
         its spawn to the last accepted completion, beside the store loop on the same `N`: \
         the Worker at 16 slots against the loop with as many items in flight (B=16, W=1), \
         at 64 and 256 against B=100, W=4.\n"
    );
    let _ = writeln!(
        w,
        "| store | N | store B=100 W=4 items/s | store B=16 W=1 items/s | Worker 16 / store B=16 W=1 | Worker 64 / store B=100 W=4 | Worker 256 / store B=100 W=4 |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    let b100 = Drainer::Store {
        batch: 100,
        workers: 4,
    }
    .label();
    let b16 = Drainer::Store {
        batch: 16,
        workers: 1,
    }
    .label();
    for m in stores {
        let r = &m.burndown;
        let ratios: Vec<String> = cells::burndown_ratios()
            .iter()
            .map(|(num, den)| ratio(r, num, den))
            .collect();
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} |",
            m.name,
            thousands(m.sizes.burndown as f64),
            rate(r, &b100),
            rate(r, &b16),
            ratios.join(" | "),
        );
    }

    let _ = writeln!(w, "\n## The top of a large backlog\n");
    let _ = writeln!(
        w,
        "The same drains of `N` items from the top of a backlog of {} and of a big one \
         (items scheduled a week out, in the same queue and indexes); the ratio big / small \
         is 1.0 when a claim costs the same on a full table as on an empty one.\n",
        thousands(SMALL_BACKLOG as f64)
    );
    let _ = writeln!(
        w,
        "| store | N | big backlog | store B=100 W=4 items/s (small) | store loop big / small | Worker 64 items/s (small) | Worker 64 big / small |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    for m in stores {
        let r = &m.backlog;
        let [store, worker] = BACKLOG;
        let cell = |d: &Drainer, backlog: usize| backlog_label(d, backlog);
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} | {} |",
            m.name,
            thousands(m.sizes.backlog as f64),
            thousands(m.big_backlog as f64),
            rate(r, &cell(&store, SMALL_BACKLOG)),
            ratio(
                r,
                &cell(&store, m.big_backlog),
                &cell(&store, SMALL_BACKLOG)
            ),
            rate(r, &cell(&worker, SMALL_BACKLOG)),
            ratio(
                r,
                &cell(&worker, m.big_backlog),
                &cell(&worker, SMALL_BACKLOG)
            ),
        );
    }

    let _ = writeln!(w, "\n## Stream runs\n");
    let _ = writeln!(
        w,
        "One task claiming 100 at a time drains `N` items without a stream, then `N` items \
         of one stream (G9): with runs off a claim takes only the stream's head, with \
         `stream_runs(100)` the head and up to 99 items behind it.\n"
    );
    let _ = writeln!(
        w,
        "| store | N | unstreamed items/s | one stream, runs off | one stream, runs of 100 | runs on / off | runs on / unstreamed |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    for m in stores {
        let r = &m.streams;
        let [unstreamed, off, on] = STREAM_CELLS.map(|c| c.label());
        let ratios: Vec<String> = streams::stream_ratios()
            .iter()
            .map(|(num, den)| ratio(r, num, den))
            .collect();
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} |",
            m.name,
            thousands(m.sizes.stream as f64),
            rate(r, &unstreamed),
            rate(r, &off),
            rate(r, &on),
            ratios.join(" | "),
        );
    }

    let _ = writeln!(w, "\n## Sustained pickup latency\n");
    let _ = writeln!(
        w,
        "A producer enqueues one item per call at {RATE} items/s (a {} s warm-up, then {} s \
         that count) while the items are worked; pickup latency is the handler's start \
         minus the start of the item's enqueue call. The Worker runs {SUSTAINED_SLOTS} \
         slots with its default poll policy on a store set up as an application runs it \
         (LISTEN/NOTIFY and pub/sub wake-ups on), the producer on the same handle. \
         Beside it, {} store loops claim {} item at a time and sleep {} ms after an empty \
         claim: a lower bound for polling, not a setting to run. Items/s is the items counted \
         over the time from the first one's enqueue to the last one's pickup: the \
         producer's rate while enqueues and pickups keep up. Every run checks that each \
         item was picked up exactly once.\n",
        WARMUP.as_secs(),
        sustained_length(run.scale).as_secs_f64(),
        LOOPS.0,
        LOOPS.1,
        LOOP_POLL.as_millis(),
    );
    let _ = writeln!(
        w,
        "| store | consumer | p50 ms | p99 ms | max ms | items/s |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    for m in stores {
        for (who, run) in &m.sustained {
            let ms = |us: u64| format!("{:.2}", us as f64 / 1000.0);
            let _ = match run {
                Ok(s) => writeln!(
                    w,
                    "| {} | {who} | {} | {} | {} | {} |",
                    m.name,
                    ms(s.latency.p50),
                    ms(s.latency.p99),
                    ms(s.latency.max),
                    thousands(s.per_sec),
                ),
                Err(e) => writeln!(
                    w,
                    "| {} | {who} | failed: {} | | | |",
                    m.name,
                    e.replace('|', "/")
                ),
            };
        }
    }
    let _ = writeln!(
        w,
        "\nThe cells are defined in `benches/src/` (`cells.rs`, `streams.rs`, `sustained.rs`, \
         `raw.rs`) and the page in `benches/examples/bench_page.rs`."
    );
    p
}

fn humantime(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{s} s")
    }
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
