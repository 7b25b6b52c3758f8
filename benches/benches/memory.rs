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
//! Run: `cargo bench -p tenure-benches --bench memory` (under a minute).

// criterion_group! generates an undocumented pub fn.
#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tenure_benches::raw::memory::RawMemory;
use tenure_benches::{bench_queue, drain, runtime, seed, DrainSpec, Items};
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

criterion_group!(benches, claim_complete);
criterion_main!(benches);
