//! Claim + complete on SQLite: the library beside a raw rusqlite loop on the same
//! machine, in the same run, so the library's overhead reads as a ratio.
//!
//! Each measured iteration drains a fresh file of `N` ready items with `W` workers
//! claiming `B` items at a time and completing each claimed batch (fenced on the
//! attempt). Seeding is not timed. Both sides use WAL and `synchronous=NORMAL` (the
//! store's default).
//!
//! - `tenure`: one `SqliteStore` (one writer thread), seeded and drained by
//!   `tenure_benches::{seed, drain}`: `W` tokio tasks each looping `claim(B)` then
//!   `complete(tokens)`, checking every answer is `Accepted`.
//! - `raw`: `W` OS threads, each with its own connection, each looping one
//!   `BEGIN IMMEDIATE` claim (`UPDATE .. WHERE id IN (SELECT .. ORDER BY priority,
//!   run_at, id LIMIT B) RETURNING`) and one `BEGIN IMMEDIATE` transaction of fenced
//!   deletes (`DELETE .. WHERE id = ? AND state = 'running' AND attempt = ?`): the
//!   statements of `tenure_benches::raw::sqlite`, every one of them (`BEGIN
//!   IMMEDIATE` and `COMMIT` included) prepared once per connection, with a busy
//!   handler that yields the core before it sleeps.
//!
//! A second group, `sqlite_contention_full`, runs 16 claimers at B=1 with
//! `synchronous=FULL` on both sides and prints claim-latency percentiles: the case in
//! which `shared/research/limits.md` saw a 3.5 s p99 claim wait with raw connections.
//!
//! Two more groups run their own rounds (`tenure_benches::cells`), each cell on a
//! fresh file: `sqlite_burndown`, the store loop beside a `Worker` with a no-op
//! handler at concurrency 16, 64 and 256 on the same `N` (`TENURE_BENCH_N`, default
//! 600,000, so that even the fastest cell runs about 3 s), with the Worker/store
//! ratios; and `sqlite_backlog`, the store loop and a worker at 64 draining
//! `TENURE_BENCH_BACKLOG_N` (default 200,000) items from the top of a backlog of 1,000
//! and of 1,000,000 (`TENURE_BENCH_BACKLOG`), with the big/small ratios.
//!
//! Run: `cargo bench -p tenure-benches --bench sqlite` (about four minutes for the
//! criterion groups; add `-- burndown` or `-- backlog` for one group alone).

// criterion_group! generates an undocumented pub fn.
#![allow(missing_docs)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tempfile::TempDir;
use tenure_benches::cells::{self, Rounds, BACKLOG, BURNDOWN, SMALL_BACKLOG};
use tenure_benches::raw::sqlite as raw;
use tenure_benches::{
    bench_queue, drain, runtime, seed, seed_backlog, streams, DrainSpec, Items, Percentiles,
};
use tenure_core::Store;
use tenure_sqlite::{SqliteConfig, SqliteStore, Synchronous};

const ITEMS: Items = Items {
    single: 3_000,
    batched: 30_000,
};

/// How a run is set up: durability, and where to record claim latencies (µs).
#[derive(Clone, Copy)]
struct Mode<'a> {
    full: bool,
    latencies: Option<&'a Mutex<Vec<u64>>>,
}

const NORMAL: Mode<'static> = Mode {
    full: false,
    latencies: None,
};

// ----------------------------------------------------------------------------- tenure

fn tenure_iteration(
    rt: &tokio::runtime::Runtime,
    n: usize,
    batch: usize,
    workers: usize,
    mode: Mode<'_>,
) -> Duration {
    let dir = TempDir::new().expect("temp dir");
    rt.block_on(async {
        let sync = if mode.full {
            Synchronous::Full
        } else {
            Synchronous::Normal
        };
        let store =
            SqliteStore::open(SqliteConfig::new(dir.path().join("bench.db")).synchronous(sync))
                .await
                .expect("open");
        let queue = bench_queue().expect("queue");
        seed(&store, &queue, n).await.expect("seed");
        let spec =
            DrainSpec::new(queue, n, batch, workers).record_latency(mode.latencies.is_some());
        let run = drain(&store, &spec).await.expect("drain");
        if let Some(out) = mode.latencies {
            out.lock().expect("latencies").extend(run.latencies);
        }
        run.elapsed
    })
}

// ----------------------------------------------------------------------------- raw

fn record(mode: Mode<'_>, started: Instant) {
    if let Some(l) = mode.latencies {
        let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        l.lock().expect("latencies").push(us);
    }
}

fn raw_worker(path: &Path, owner: &str, batch: usize, done: &AtomicU64, mode: Mode<'_>) {
    let mut conn = raw::connect(path, mode.full).expect("open");
    loop {
        let started = Instant::now();
        let claimed = raw::claim(&mut conn, owner, batch).expect("claim");
        if claimed.is_empty() {
            return;
        }
        record(mode, started);
        let finished = raw::finalize(&mut conn, &claimed).expect("finalize");
        assert_eq!(finished, claimed.len());
        done.fetch_add(claimed.len() as u64, Ordering::Relaxed);
    }
}

fn raw_iteration(n: usize, batch: usize, workers: usize, mode: Mode<'_>) -> Duration {
    let dir = TempDir::new().expect("temp dir");
    let path = dir.path().join("raw.db");
    raw::seed(&path, n).expect("seed");
    let done = AtomicU64::new(0);
    let barrier = Barrier::new(workers + 1);
    let elapsed = std::thread::scope(|s| {
        for w in 0..workers {
            let (path, done, barrier) = (&path, &done, &barrier);
            s.spawn(move || {
                barrier.wait();
                raw_worker(path, &format!("w{w}"), batch, done, mode);
            });
        }
        barrier.wait();
        let start = Instant::now();
        // The scope joins every worker before it returns.
        start
    })
    .elapsed();
    assert_eq!(
        done.load(Ordering::Relaxed),
        n as u64,
        "every item finished once"
    );
    elapsed
}

// ----------------------------------------------------------------------------- groups

fn claim_complete(c: &mut Criterion) {
    let rt = runtime().expect("runtime");
    let mut group = c.benchmark_group("sqlite_claim_complete");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4));
    for batch in [1usize, 100] {
        for workers in [1usize, 4] {
            let n = ITEMS.for_batch(batch);
            group.throughput(Throughput::Elements(n as u64));
            let cell = format!("b{batch}_w{workers}");
            group.bench_function(BenchmarkId::new("tenure", &cell), |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| tenure_iteration(&rt, n, batch, workers, NORMAL))
                        .sum()
                })
            });
            group.bench_function(BenchmarkId::new("raw", &cell), |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| raw_iteration(n, batch, workers, NORMAL))
                        .sum()
                })
            });
        }
    }
    group.finish();
}

fn percentiles(name: &str, lat: &Mutex<Vec<u64>>) {
    let mut v = std::mem::take(&mut *lat.lock().expect("latencies"));
    if let Some(p) = Percentiles::of(&mut v) {
        println!("{name}: claim latency {p}");
    }
}

/// 16 claimers at `synchronous=FULL`, B=1: the case where limits.md saw a 3.5 s p99
/// claim wait with 16 raw connections. Prints claim-latency percentiles.
fn contention(c: &mut Criterion) {
    let rt = runtime().expect("runtime");
    let mut group = c.benchmark_group("sqlite_contention_full");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(4));
    let (n, batch, workers) = (600, 1, 16);
    group.throughput(Throughput::Elements(n as u64));
    let cell = format!("b{batch}_w{workers}");
    let lat = Mutex::new(Vec::new());
    group.bench_function(BenchmarkId::new("tenure", &cell), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let mode = Mode {
                        full: true,
                        latencies: Some(&lat),
                    };
                    tenure_iteration(&rt, n, batch, workers, mode)
                })
                .sum()
        })
    });
    percentiles("tenure b1_w16 FULL", &lat);
    group.bench_function(BenchmarkId::new("raw", &cell), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let mode = Mode {
                        full: true,
                        latencies: Some(&lat),
                    };
                    raw_iteration(n, batch, workers, mode)
                })
                .sum()
        })
    });
    percentiles("raw b1_w16 FULL", &lat);
    group.finish();
}

// ----------------------------------------------------------------------------- cells

/// Items per burn-down cell: the store loop at B=100 W=4 drains this in about 3 s.
const BURNDOWN_N: usize = 600_000;
/// Items per backlog cell.
const BACKLOG_N: usize = 200_000;

async fn open(path: &Path) -> SqliteStore {
    SqliteStore::open(SqliteConfig::new(path))
        .await
        .expect("open")
}

fn burndown(_: &mut Criterion) {
    if !cells::wanted("sqlite_burndown") {
        return;
    }
    let rt = runtime().expect("runtime");
    let n = cells::env_count("TENURE_BENCH_N", BURNDOWN_N);
    let rounds = cells::env_count("TENURE_BENCH_ROUNDS", 3);
    println!("sqlite_burndown: N = {n}, {rounds} rounds, a fresh file per cell");
    let mut r = Rounds::new();
    for _ in 0..rounds {
        for d in BURNDOWN {
            let dir = TempDir::new().expect("temp dir");
            let elapsed = rt.block_on(async {
                let store = open(&dir.path().join("bench.db")).await;
                let queue = bench_queue().expect("queue");
                seed(&store, &queue, n).await.expect("seed");
                d.drain(&store, &queue, n).await.expect("drain")
            });
            r.record(&d.label(), n, elapsed);
        }
    }
    println!("{}", r.table("sqlite burn-down", &cells::burndown_ratios()));
}

fn backlog(_: &mut Criterion) {
    if !cells::wanted("sqlite_backlog") {
        return;
    }
    let rt = runtime().expect("runtime");
    let big = cells::env_count("TENURE_BENCH_BACKLOG", cells::BIG_BACKLOG);
    let n = cells::env_count("TENURE_BENCH_BACKLOG_N", BACKLOG_N);
    let rounds = cells::env_count("TENURE_BENCH_ROUNDS", 3);
    println!("sqlite_backlog: N = {n} from the top of {SMALL_BACKLOG} and {big}, {rounds} rounds");
    let dir = TempDir::new().expect("temp dir");
    let queue = bench_queue().expect("queue");
    let stores: Vec<(usize, SqliteStore)> = rt.block_on(async {
        let mut stores = Vec::new();
        for m in [SMALL_BACKLOG, big] {
            let store = open(&dir.path().join(format!("backlog{m}.db"))).await;
            seed_backlog(&store, &queue, m).await.expect("backlog");
            stores.push((m, store));
        }
        stores
    });
    let mut r = Rounds::new();
    for _ in 0..rounds {
        for d in BACKLOG {
            for (m, store) in &stores {
                let elapsed = rt.block_on(async {
                    seed(store, &queue, n).await.expect("seed");
                    d.drain(store, &queue, n).await.expect("drain")
                });
                r.record(&cells::backlog_label(&d, *m), n, elapsed);
            }
        }
    }
    for (m, store) in &stores {
        let counts = rt.block_on(store.queue_counts(&queue)).expect("counts");
        assert_eq!(counts.scheduled, *m as u64, "the backlog stays: {counts:?}");
    }
    println!("{}", r.table("sqlite backlog", &cells::backlog_ratios(big)));
}

/// The stream-run cells (`tenure_benches::streams`): one stream of 20,000 items
/// drained with runs off and on, beside the unstreamed drain. A fresh file per cell.
fn stream_runs(_: &mut Criterion) {
    if !cells::wanted("sqlite_stream_runs") {
        return;
    }
    let rt = runtime().expect("runtime");
    let n = cells::env_count("TENURE_BENCH_STREAM_N", streams::STREAM_N);
    let rounds = cells::env_count("TENURE_BENCH_ROUNDS", 1);
    println!("sqlite_stream_runs: N = {n}, {rounds} rounds");
    let queue = bench_queue().expect("queue");
    let mut r = Rounds::new();
    for _ in 0..rounds {
        for cell in streams::STREAM_CELLS {
            let dir = TempDir::new().expect("temp dir");
            let elapsed = rt.block_on(async {
                let store = open(&dir.path().join("bench.db")).await;
                cell.seed(&store, &queue, n).await.expect("seed");
                cell.drain(&store, &queue, n).await.expect("drain")
            });
            r.record(&cell.label(), n, elapsed);
        }
    }
    println!(
        "{}",
        r.table("sqlite stream runs", &streams::stream_ratios())
    );
}

criterion_group!(
    benches,
    claim_complete,
    contention,
    burndown,
    backlog,
    stream_runs
);
criterion_main!(benches);
