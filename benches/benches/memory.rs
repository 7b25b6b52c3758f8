//! Claim + complete on the memory store beside a raw `Mutex<VecDeque>` loop doing the
//! same claim and fenced finalize, in the same run, so the library's overhead reads as
//! a ratio.
//!
//! Each measured iteration drains `N` ready items with `W` tokio tasks (on a
//! multi-thread runtime with one worker thread per core) claiming `B` items at a time
//! and completing each claimed batch in one call. Seeding is not timed.
//!
//! - `tenure`: one `MemoryStore` on the system clock, seeded and drained by
//!   `tenure_benches::{seed, drain}`: each task loops `claim(B)` then
//!   `complete(tokens)`, and checks every answer is `Accepted`.
//! - `raw`: `tenure_benches::raw::memory::RawMemory`, one `std::sync::Mutex` around a
//!   `VecDeque` of ready indexes and a vector of items; a claim pops `B` indexes, sets
//!   state, owner, attempt + 1 and expiry (one clock read) and copies each payload out;
//!   the finalize checks `(state, attempt)` of each token under the lock, as the
//!   store's fence does, and marks it done.
//!
//! Two more groups run their own rounds (`tenure_benches::cells`): `memory_burndown`,
//! the store loop beside a `Worker` with a no-op handler at concurrency 16, 64 and
//! 256 on the same `N` (`TENURE_BENCH_N`, default 5,000,000, so that even the
//! fastest cell runs about 3 s), with the Worker/store ratios; and `memory_backlog`, the store loop and a worker at 64 draining
//! `TENURE_BENCH_BACKLOG_N` (default 1,000,000) items from the top of a backlog of
//! 1,000 and of 1,000,000 (`TENURE_BENCH_BACKLOG`), with the big/small ratios.
//!
//! Run: `cargo bench -p tenure-benches --bench memory` (under a minute for the
//! criterion groups; add `-- burndown` or `-- backlog` for one group alone).

// criterion_group! generates an undocumented pub fn.
#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tenure_benches::cells::{self, Rounds, BACKLOG, BURNDOWN, SMALL_BACKLOG};
use tenure_benches::raw::memory::RawMemory;
use tenure_benches::{bench_queue, drain, runtime, seed, seed_backlog, streams, DrainSpec, Items};
use tenure_core::Store;
use tenure_memory::MemoryStore;

const ITEMS: Items = Items {
    single: 20_000,
    batched: 100_000,
};

// ----------------------------------------------------------------------------- tenure

fn tenure_iteration(
    rt: &tokio::runtime::Runtime,
    n: usize,
    batch: usize,
    workers: usize,
) -> Duration {
    rt.block_on(async {
        let store = MemoryStore::default();
        let queue = bench_queue().expect("queue");
        seed(&store, &queue, n).await.expect("seed");
        drain(&store, &DrainSpec::new(queue, n, batch, workers))
            .await
            .expect("drain")
            .elapsed
    })
}

// ----------------------------------------------------------------------------- raw

fn raw_iteration(rt: &tokio::runtime::Runtime, n: usize, batch: usize, workers: usize) -> Duration {
    rt.block_on(async {
        let raw = Arc::new(RawMemory::with_items(n));
        let done = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let tasks: Vec<_> = (0..workers)
            .map(|w| {
                let raw = raw.clone();
                let done = done.clone();
                tokio::spawn(async move {
                    let owner: Arc<str> = Arc::from(format!("w{w}"));
                    loop {
                        let claimed = raw.claim(&owner, batch);
                        if claimed.is_empty() {
                            return;
                        }
                        let accepted = raw.finalize(&claimed);
                        assert_eq!(accepted, claimed.len() as u64);
                        done.fetch_add(accepted, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("worker");
        }
        let elapsed = start.elapsed();
        assert_eq!(done.load(Ordering::Relaxed), n as u64, "every item once");
        elapsed
    })
}

// ----------------------------------------------------------------------------- groups

fn claim_complete(c: &mut Criterion) {
    let rt = runtime().expect("runtime");
    let mut group = c.benchmark_group("memory_claim_complete");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for batch in [1usize, 100] {
        for workers in [1usize, 4] {
            let n = ITEMS.for_batch(batch);
            group.throughput(Throughput::Elements(n as u64));
            let cell = format!("b{batch}_w{workers}");
            group.bench_function(BenchmarkId::new("tenure", &cell), |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| tenure_iteration(&rt, n, batch, workers))
                        .sum()
                })
            });
            group.bench_function(BenchmarkId::new("raw", &cell), |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| raw_iteration(&rt, n, batch, workers))
                        .sum()
                })
            });
        }
    }
    group.finish();
}

// ----------------------------------------------------------------------------- cells

/// Items per burn-down cell: the store loop at B=100 W=4 drains this in about 3 s.
const BURNDOWN_N: usize = 5_000_000;
/// Items per backlog cell.
const BACKLOG_N: usize = 1_000_000;

fn burndown(_: &mut Criterion) {
    if !cells::wanted("memory_burndown") {
        return;
    }
    let rt = runtime().expect("runtime");
    let n = cells::env_count("TENURE_BENCH_N", BURNDOWN_N);
    let rounds = cells::env_count("TENURE_BENCH_ROUNDS", 3);
    println!("memory_burndown: N = {n}, {rounds} rounds, a fresh store per cell");
    let mut r = Rounds::new();
    for _ in 0..rounds {
        for d in BURNDOWN {
            let elapsed = rt.block_on(async {
                let store = MemoryStore::default();
                let queue = bench_queue().expect("queue");
                seed(&store, &queue, n).await.expect("seed");
                d.drain(&store, &queue, n).await.expect("drain")
            });
            r.record(&d.label(), n, elapsed);
        }
    }
    println!("{}", r.table("memory burn-down", &cells::burndown_ratios()));
}

fn backlog(_: &mut Criterion) {
    if !cells::wanted("memory_backlog") {
        return;
    }
    let rt = runtime().expect("runtime");
    let big = cells::env_count("TENURE_BENCH_BACKLOG", cells::BIG_BACKLOG);
    let n = cells::env_count("TENURE_BENCH_BACKLOG_N", BACKLOG_N);
    let rounds = cells::env_count("TENURE_BENCH_ROUNDS", 3);
    println!("memory_backlog: N = {n} from the top of {SMALL_BACKLOG} and {big}, {rounds} rounds");
    let queue = bench_queue().expect("queue");
    let stores: Vec<(usize, MemoryStore)> = [SMALL_BACKLOG, big]
        .into_iter()
        .map(|m| (m, MemoryStore::default()))
        .collect();
    for (m, store) in &stores {
        rt.block_on(seed_backlog(store, &queue, *m))
            .expect("backlog");
    }
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
    println!("{}", r.table("memory backlog", &cells::backlog_ratios(big)));
}

/// The stream-run cells (`tenure_benches::streams`): one stream of 20,000 items
/// drained with runs off and on, beside the unstreamed drain. A fresh store per cell.
fn stream_runs(_: &mut Criterion) {
    if !cells::wanted("memory_stream_runs") {
        return;
    }
    let rt = runtime().expect("runtime");
    let n = cells::env_count("TENURE_BENCH_STREAM_N", streams::STREAM_N);
    let rounds = cells::env_count("TENURE_BENCH_ROUNDS", 1);
    println!("memory_stream_runs: N = {n}, {rounds} rounds");
    let queue = bench_queue().expect("queue");
    let mut r = Rounds::new();
    for _ in 0..rounds {
        for cell in streams::STREAM_CELLS {
            let elapsed = rt.block_on(async {
                let store = MemoryStore::default();
                cell.seed(&store, &queue, n).await.expect("seed");
                cell.drain(&store, &queue, n).await.expect("drain")
            });
            r.record(&cell.label(), n, elapsed);
        }
    }
    println!(
        "{}",
        r.table("memory stream runs", &streams::stream_ratios())
    );
}

criterion_group!(benches, claim_complete, burndown, backlog, stream_runs);
criterion_main!(benches);
