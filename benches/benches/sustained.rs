//! Sustained load: enqueue and work at once, and read the pickup latency (handler start
//! minus the enqueue call's start) beside a raw polling loop on the same database, in
//! the same run.
//!
//! Each run: a producer enqueues single items at [`RATE`] items/s, one call each, for a
//! 1 s warm-up and then 5 s that count, while a consumer works them. Each payload
//! carries its sequence number and its enqueue time (`tenure_benches::sustained`).
//! Reported over the counted items: p50, p99 and max pickup latency, and items/s
//! (counted items over the time from the first one's enqueue to the last one's pickup).
//! Every run ends by checking that each item was picked up exactly once and, for the
//! library, that the worker shut down drained, with every item completed and nothing
//! failed, lost, released or left in the queue.
//!
//! - `tenure`: a `tenure_runtime::Worker` with concurrency 16, the default poll
//!   policy (250 ms doubling to 10 s, ended at once by the store's wake signal), the
//!   default finalize batching (128 outcomes or 10 ms) and maintenance off; the handler
//!   records the pickup and returns. The producer enqueues through the same store
//!   handle, so the in-process wake signal wakes the claim loop.
//! - `tenure, LISTEN` (PostgreSQL only): the producer on a second `PgStore` (its own
//!   pool), both with LISTEN/NOTIFY on, so the only wake-up is the NOTIFY of the
//!   enqueue's commit, as between processes.
//! - `raw`: [`RAW_WORKERS`] loops, each with its own connection (a thread per loop on
//!   SQLite, a task on the others), each claiming one item at a time and finalizing it
//!   fenced, with the statements of `tenure_benches::raw`; an empty claim sleeps
//!   [`RAW_POLL`] and claims again. A loop polling that often is a lower bound on what
//!   polling can reach, not a setting anyone would run: it costs an empty claim per
//!   loop per millisecond while idle. The producer on PostgreSQL enqueues through a
//!   `PgStore` with LISTEN off into the store's table the raw loops claim from; on
//!   SQLite it inserts one row per transaction into the raw table.
//!
//! SQLite runs on a temporary file (WAL, `synchronous=NORMAL` on both sides). PostgreSQL
//! runs at `TENURE_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`) in
//! a fresh schema dropped at the end; without a server that part prints why and is
//! skipped.
//!
//! Run: `cargo bench -p tenure-benches --bench sustained` (about a minute); add a word
//! after `--` (`memory`, `sqlite`, `postgres`) to run only the stores whose name has it.
//! Without `--bench` (as `cargo test --benches` runs it) it measures nothing.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tempfile::TempDir;
use tenure_benches::raw::memory::RawMemory;
use tenure_benches::raw::pg::PgRaw;
use tenure_benches::raw::sqlite as raw_sqlite;
use tenure_benches::sustained::{produce, run_worker, Epoch, Pickups, Plan, Summary};
use tenure_benches::{bench_queue, runtime, BenchError};
use tenure_core::{NewItem, Store, StoreExt};
use tenure_memory::MemoryStore;
use tenure_postgres::{PgConfig, PgStore};
use tenure_sqlite::{SqliteConfig, SqliteStore};

/// Items enqueued per second.
const RATE: u32 = 500;
/// Worked, not counted.
const WARMUP: Duration = Duration::from_secs(1);
/// Counted.
const MEASURE: Duration = Duration::from_secs(5);
/// The library worker's handler slots.
const CONCURRENCY: usize = 16;
/// Raw polling loops per run.
const RAW_WORKERS: usize = 4;
/// The raw loops' sleep after an empty claim (on tokio's timer for the memory and
/// PostgreSQL loops, which rounds up to the next millisecond tick).
const RAW_POLL: Duration = Duration::from_millis(1);
/// How long a run may take to pick up its last items after the producer stops.
const SETTLE: Duration = Duration::from_secs(30);

fn plan() -> Plan {
    Plan::new(RATE, WARMUP, MEASURE)
}

fn url() -> String {
    std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn report(rows: &mut Vec<(String, Summary)>, name: &str, summary: Summary) {
    println!("{name:<28} {summary}");
    rows.push((name.to_owned(), summary));
}

// ----------------------------------------------------------------------------- tenure

/// Runs the worker on `store` while the producer enqueues through `producer`
/// (`tenure_benches::sustained::run_worker`, which checks that every item was claimed
/// once and completed), then checks that nothing is left in the queue.
async fn tenure_run<S, P>(store: S, producer: &P) -> Summary
where
    S: Store + Clone,
    P: Store,
{
    let queue = bench_queue().expect("queue");
    let run = run_worker(&store, producer, &queue, &plan(), CONCURRENCY, SETTLE)
        .await
        .expect("sustained run");
    let counts = store.queue_counts(&queue).await.expect("counts");
    assert_eq!(
        counts.pending() + counts.dead,
        0,
        "queue left with {counts:?}"
    );
    run.summary
}

// ----------------------------------------------------------------------------- raw

/// Runs the producer and waits for every pickup, then tells the raw loops to stop, on
/// success or not (so a failed run ends instead of polling on). Returns the items sent.
async fn raw_finish<F, Fut>(
    pickups: &Pickups,
    epoch: Epoch,
    stop: &AtomicBool,
    enqueue: F,
) -> Result<u64, BenchError>
where
    F: FnMut(Vec<u8>) -> Fut,
    Fut: std::future::Future<Output = Result<(), BenchError>>,
{
    let outcome = async {
        let sent = produce(&plan(), epoch, enqueue).await?;
        pickups.wait_for(sent, SETTLE).await?;
        Ok(sent)
    }
    .await;
    stop.store(true, Ordering::Relaxed);
    outcome
}

/// Waits for the raw tasks, checks every item produced was finalized, and summarises.
async fn raw_summary(
    loops: Vec<tokio::task::JoinHandle<()>>,
    sent: Result<u64, BenchError>,
    finalized: &AtomicU64,
    pickups: &Pickups,
) -> Summary {
    for l in loops {
        l.await.expect("raw loop");
    }
    let sent = sent.expect("produce and pick up");
    assert_eq!(
        finalized.load(Ordering::Relaxed),
        sent,
        "every item finalized"
    );
    pickups.summary(&plan(), sent).expect("summary")
}

async fn memory_raw() -> Summary {
    let epoch = Epoch::new();
    let pickups = Arc::new(Pickups::new(epoch));
    let raw = Arc::new(RawMemory::new());
    let stop = Arc::new(AtomicBool::new(false));
    let finalized = Arc::new(AtomicU64::new(0));
    let loops: Vec<_> = (0..RAW_WORKERS)
        .map(|w| {
            let (raw, pickups, stop, finalized) = (
                raw.clone(),
                pickups.clone(),
                stop.clone(),
                finalized.clone(),
            );
            tokio::spawn(async move {
                let owner: Arc<str> = Arc::from(format!("w{w}"));
                while !stop.load(Ordering::Relaxed) {
                    let claimed = raw.claim(&owner, 1);
                    let Some(lease) = claimed.first() else {
                        tokio::time::sleep(RAW_POLL).await;
                        continue;
                    };
                    pickups.record(&lease.payload).expect("record");
                    assert_eq!(raw.finalize(&claimed), 1, "fenced finalize");
                    finalized.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let sent = raw_finish(&pickups, epoch, &stop, |p| {
        raw.push(p);
        std::future::ready(Ok(()))
    })
    .await;
    raw_summary(loops, sent, &finalized, &pickups).await
}

fn sqlite_raw(rt: &tokio::runtime::Runtime) -> Summary {
    let dir = TempDir::new().expect("temp dir");
    let path = dir.path().join("raw.db");
    raw_sqlite::seed(&path, 0).expect("schema");
    let epoch = Epoch::new();
    let pickups = Pickups::new(epoch);
    let stop = AtomicBool::new(false);
    let finalized = AtomicU64::new(0);
    let sent = std::thread::scope(|s| {
        for w in 0..RAW_WORKERS {
            let (path, pickups, stop, finalized) = (&path, &pickups, &stop, &finalized);
            s.spawn(move || {
                let mut conn = raw_sqlite::connect(path, false).expect("open");
                let owner = format!("w{w}");
                while !stop.load(Ordering::Relaxed) {
                    let claimed = raw_sqlite::claim(&mut conn, &owner, 1).expect("claim");
                    let Some(lease) = claimed.first() else {
                        std::thread::sleep(RAW_POLL);
                        continue;
                    };
                    pickups.record(&lease.payload).expect("record");
                    let done = raw_sqlite::finalize(&mut conn, &claimed).expect("finalize");
                    assert_eq!(done, 1, "fenced finalize");
                    finalized.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let outcome = raw_sqlite::connect(&path, false).and_then(|producer| {
            // A blocking insert inside `block_on`: it holds up only this thread, on
            // which nothing else runs.
            rt.block_on(raw_finish(&pickups, epoch, &stop, |p| {
                std::future::ready(raw_sqlite::insert(&producer, &p))
            }))
        });
        stop.store(true, Ordering::Relaxed);
        outcome
    });
    let sent = sent.expect("produce and pick up");
    assert_eq!(
        finalized.load(Ordering::Relaxed),
        sent,
        "every item finalized"
    );
    pickups.summary(&plan(), sent).expect("summary")
}

async fn postgres_raw(schema: &str, producer: &PgStore) -> Summary {
    let raw = Arc::new(PgRaw::new(schema));
    let epoch = Epoch::new();
    let pickups = Arc::new(Pickups::new(epoch));
    let stop = Arc::new(AtomicBool::new(false));
    let finalized = Arc::new(AtomicU64::new(0));
    let mut loops = Vec::with_capacity(RAW_WORKERS);
    for w in 0..RAW_WORKERS {
        let mut conn = PgConnection::connect(&url()).await.expect("connect");
        let (raw, pickups, stop, finalized) = (
            raw.clone(),
            pickups.clone(),
            stop.clone(),
            finalized.clone(),
        );
        loops.push(tokio::spawn(async move {
            let owner = format!("w{w}");
            while !stop.load(Ordering::Relaxed) {
                let claimed = raw.claim(&mut conn, &owner, 1).await.expect("claim");
                let Some(lease) = claimed.first() else {
                    tokio::time::sleep(RAW_POLL).await;
                    continue;
                };
                pickups.record(&lease.payload).expect("record");
                let done = raw.finalize(&mut conn, &claimed).await.expect("finalize");
                assert_eq!(done, 1, "fenced finalize");
                finalized.fetch_add(1, Ordering::Relaxed);
            }
            conn.close().await.expect("close");
        }));
    }
    let queue = bench_queue().expect("queue");
    let sent = raw_finish(&pickups, epoch, &stop, |p| {
        let item = NewItem::new(queue.clone(), p);
        async move {
            producer
                .enqueue_one(item)
                .await
                .map(drop)
                .map_err(|source| BenchError::Store {
                    op: "enqueue",
                    source,
                })
        }
    })
    .await;
    raw_summary(loops, sent, &finalized, &pickups).await
}

// ----------------------------------------------------------------------------- stores

fn sqlite_tenure(rt: &tokio::runtime::Runtime) -> Summary {
    let dir = TempDir::new().expect("temp dir");
    rt.block_on(async {
        let store = SqliteStore::open(SqliteConfig::new(dir.path().join("bench.db")))
            .await
            .expect("open");
        tenure_run(store.clone(), &store).await
    })
}

async fn pg_store(schema: &str, listen: bool) -> PgStore {
    PgStore::connect(PgConfig::new(url()).schema(schema).listen(listen))
        .await
        .expect("store")
}

async fn vacuum(admin: &mut PgConnection, schema: &str) {
    for table in ["items", "streams"] {
        let sql = format!("VACUUM ANALYZE {schema}.{table}");
        sqlx::Executor::execute(&mut *admin, sql.as_str())
            .await
            .expect("vacuum");
    }
}

async fn postgres(rows: &mut Vec<(String, Summary)>) {
    let mut admin = match PgConnection::connect(&url()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "postgres skipped: PostgreSQL at {} is unreachable: {e}",
                url()
            );
            return;
        }
    };
    let schema = format!("bench_{}", uuid::Uuid::now_v7().simple());

    let store = pg_store(&schema, false).await;
    vacuum(&mut admin, &schema).await;
    let s = tenure_run(store.clone(), &store).await;
    report(rows, "postgres tenure", s);
    store.close().await;

    let worker_store = pg_store(&schema, true).await;
    let producer = pg_store(&schema, true).await;
    vacuum(&mut admin, &schema).await;
    let s = tenure_run(worker_store.clone(), &producer).await;
    report(rows, "postgres tenure, LISTEN", s);
    producer.close().await;
    worker_store.close().await;

    let producer = pg_store(&schema, false).await;
    vacuum(&mut admin, &schema).await;
    let s = postgres_raw(&schema, &producer).await;
    report(rows, "postgres raw", s);
    producer.close().await;

    tenure_test_support::postgres::drop_schema(&mut admin, &schema).await;
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("sustained: measures only under `cargo bench`");
        return;
    }
    let words: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let wanted = |store: &str| words.is_empty() || words.iter().any(|w| store.contains(w));
    let rt = runtime().expect("runtime");
    println!(
        "sustained: {RATE} items/s, one enqueue call each, {WARMUP:?} warm-up then \
         {MEASURE:?} counted; tenure = Worker (concurrency {CONCURRENCY}, default poll, \
         maintenance off); raw = {RAW_WORKERS} loops claiming one item and finalizing it \
         fenced, sleeping {RAW_POLL:?} after an empty claim (a lower bound for polling)"
    );
    let mut rows = Vec::new();
    if wanted("memory") {
        let store = MemoryStore::default();
        let s = rt.block_on(tenure_run(store.clone(), &store));
        report(&mut rows, "memory tenure", s);
        let s = rt.block_on(memory_raw());
        report(&mut rows, "memory raw", s);
    }
    if wanted("sqlite") {
        let s = sqlite_tenure(&rt);
        report(&mut rows, "sqlite tenure", s);
        let s = sqlite_raw(&rt);
        report(&mut rows, "sqlite raw", s);
    }
    if wanted("postgres") {
        rt.block_on(postgres(&mut rows));
    }
    println!();
    println!("| run | p50 ms | p99 ms | max ms | items/s |");
    println!("|---|---|---|---|---|");
    for (name, s) in &rows {
        let ms = |us: u64| us as f64 / 1000.0;
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.0} |",
            ms(s.latency.p50),
            ms(s.latency.p99),
            ms(s.latency.max),
            s.per_sec
        );
    }
}
