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
//! - `raw`: one `std::sync::Mutex` around a `VecDeque` of ready indexes and a vector of
//!   items; a claim pops `B` indexes, sets state, owner, attempt + 1 and expiry (one
//!   clock read) and copies each payload out; the finalize checks `(state, attempt)`
//!   of each token under the lock, as the store's fence does, and marks it done.
//!
//! Run: `cargo bench -p tenure-benches --bench memory` (under a minute).

// criterion_group! generates an undocumented pub fn.
#![allow(missing_docs)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tenure_benches::{bench_queue, drain, runtime, seed, DrainSpec, Items, LEASE};
use tenure_core::{Clock, SystemClock, Timestamp};
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum RawState {
    Ready,
    Running,
    Done,
}

struct RawItem {
    payload: Vec<u8>,
    state: RawState,
    attempt: u32,
    owner: Option<Arc<str>>,
    lease_until: Timestamp,
}

struct Raw {
    ready: VecDeque<usize>,
    items: Vec<RawItem>,
}

fn raw_iteration(rt: &tokio::runtime::Runtime, n: usize, batch: usize, workers: usize) -> Duration {
    rt.block_on(async {
        let raw = Arc::new(Mutex::new(Raw {
            ready: (0..n).collect(),
            items: (0..n)
                .map(|i| RawItem {
                    payload: (i as u64).to_le_bytes().to_vec(),
                    state: RawState::Ready,
                    attempt: 0,
                    owner: None,
                    lease_until: Timestamp::EPOCH,
                })
                .collect(),
        }));
        let done = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let tasks: Vec<_> = (0..workers)
            .map(|w| {
                let raw = raw.clone();
                let done = done.clone();
                tokio::spawn(async move {
                    let owner: Arc<str> = Arc::from(format!("w{w}"));
                    loop {
                        let claimed: Vec<(usize, u32, Vec<u8>)> = {
                            let mut g = raw.lock().expect("lock");
                            let now = SystemClock.now();
                            let take = batch.min(g.ready.len());
                            let mut out = Vec::with_capacity(take);
                            for _ in 0..take {
                                let Some(i) = g.ready.pop_front() else { break };
                                let it = &mut g.items[i];
                                it.state = RawState::Running;
                                it.attempt += 1;
                                it.owner = Some(owner.clone());
                                it.lease_until = now + LEASE;
                                out.push((i, it.attempt, it.payload.clone()));
                            }
                            out
                        };
                        if claimed.is_empty() {
                            return;
                        }
                        let accepted = {
                            let mut g = raw.lock().expect("lock");
                            let mut accepted = 0u64;
                            for (i, attempt, _) in &claimed {
                                let it = &mut g.items[*i];
                                if it.state == RawState::Running && it.attempt == *attempt {
                                    it.state = RawState::Done;
                                    it.owner = None;
                                    accepted += 1;
                                }
                            }
                            accepted
                        };
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
