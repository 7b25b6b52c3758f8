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
//! Run: `cargo bench -p tenure-benches --bench sqlite` (about four minutes).

// criterion_group! generates an undocumented pub fn.
#![allow(missing_docs)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tempfile::TempDir;
use tenure_benches::raw::sqlite as raw;
use tenure_benches::{bench_queue, drain, runtime, seed, DrainSpec, Items, Percentiles};
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

criterion_group!(benches, claim_complete, contention);
criterion_main!(benches);
