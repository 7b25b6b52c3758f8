//! Claim + complete on PostgreSQL beside a raw-SQL loop doing the same claim and
//! fenced delete with sqlx directly, in the same run, so the library's overhead reads
//! as a ratio.
//!
//! Each measured iteration drains `N` ready items (N = 2,000 at B = 1, 20,000 at
//! B = 100) with `W` tokio tasks (multi-thread runtime, one worker thread per core),
//! each claiming `B` items at a time and completing each claimed batch in one call.
//! Seeding (through the store's enqueue) and a `VACUUM ANALYZE` after it are not timed.
//!
//! - `tenure`: one `PgStore` with a pool of `W` connections, drained by
//!   `tenure_benches::drain`: each task loops `claim(B)` then `complete(tokens)` and
//!   checks every answer is `Accepted`; on an empty claim it sleeps 1 ms and claims
//!   again until every item has finished (or 1,000 empty claims in a row).
//! - `raw`: one dedicated `PgConnection` per task on the same table; the claim is one
//!   `UPDATE ... WHERE id = ANY(ARRAY(SELECT ... FOR UPDATE SKIP LOCKED))` over the
//!   same partial index, the finalize one `DELETE` fenced on `(id, attempt)` over
//!   `unnest` (`tenure_benches::raw::pg`); no recovery guard, no scope rule, no pool.
//! - `streams`: 100,000 items over 1,000 streams (G9, strict FIFO per stream) at
//!   W = 4, B = 100, drained by the library and by a raw head-marker loop (the raw
//!   claim, and a finalize that promotes each stream's next item in the same
//!   statement: `PgRaw::with_stream_heads`).
//!
//! Needs PostgreSQL at `TENURE_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); without it the bench prints why and
//! measures nothing. Run: `cargo bench -p tenure-benches --bench postgres` (about
//! four minutes).

// criterion_group! generates an undocumented pub fn.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use sqlx::{Connection, PgConnection};
use tenure_benches::raw::pg::{self as raw, PgRaw};
use tenure_benches::{bench_queue, drain, runtime, seed_streams, DrainSpec, Items, OnEmpty};
use tenure_postgres::{PgConfig, PgStore};

const ITEMS: Items = Items {
    single: 2_000,
    batched: 20_000,
};

fn url() -> String {
    std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// One schema for the whole run, dropped at the end.
struct Bench {
    schema: String,
    admin: PgConnection,
}

impl Bench {
    async fn store(&self, workers: usize) -> PgStore {
        PgStore::connect(
            PgConfig::new(url())
                .schema(&self.schema)
                .max_connections(u32::try_from(workers).expect("workers"))
                .listen(false),
        )
        .await
        .expect("store")
    }

    /// Seeds `n` ready items (streams round-robin when `streams > 0`), then vacuums.
    async fn seed(&mut self, store: &PgStore, n: usize, streams: usize) {
        seed_streams(store, &bench_queue().expect("queue"), n, streams)
            .await
            .expect("seed");
        // One statement each: VACUUM cannot run inside the implicit transaction of a
        // multi-statement query.
        for table in ["items", "streams"] {
            let sql = format!("VACUUM ANALYZE {}.{table}", self.schema);
            sqlx::Executor::execute(&mut self.admin, sql.as_str())
                .await
                .expect("vacuum");
        }
    }
}

// ----------------------------------------------------------------------------- tenure

async fn tenure_drain(store: &PgStore, n: usize, batch: usize, workers: usize) -> Duration {
    // With streams, every head may be held by another worker for a moment; a worker
    // stops once the queue is really drained.
    let spec =
        DrainSpec::new(bench_queue().expect("queue"), n, batch, workers).on_empty(OnEmpty::Retry {
            pause: Duration::from_millis(1),
            give_up_after: 1_000,
        });
    drain(store, &spec).await.expect("drain").elapsed
}

// ----------------------------------------------------------------------------- raw

async fn raw_drain(schema: &str, n: usize, batch: usize, workers: usize) -> Duration {
    raw_drain_with(&PgRaw::new(schema), n, batch, workers).await
}

async fn raw_drain_with(raw: &PgRaw, n: usize, batch: usize, workers: usize) -> Duration {
    let mut conns = Vec::with_capacity(workers);
    for _ in 0..workers {
        conns.push(PgConnection::connect(&url()).await.expect("connect"));
    }
    let (elapsed, _conns) = raw::drain(raw, conns, n, batch).await.expect("raw drain");
    elapsed
}

// ----------------------------------------------------------------------------- groups

fn postgres(c: &mut Criterion) {
    let rt = runtime().expect("runtime");
    let bench = rt.block_on(async {
        match PgConnection::connect(&url()).await {
            Ok(admin) => Some(Bench {
                schema: format!("bench_{}", uuid::Uuid::now_v7().simple()),
                admin,
            }),
            Err(e) => {
                eprintln!("skipped: PostgreSQL at {} is unreachable: {e}", url());
                None
            }
        }
    });
    let Some(bench) = bench else { return };
    let bench = Arc::new(tokio::sync::Mutex::new(bench));

    let mut group = c.benchmark_group("postgres_claim_complete");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(2));
    for batch in [1usize, 100] {
        for workers in [1usize, 4, 16] {
            let n = ITEMS.for_batch(batch);
            group.throughput(Throughput::Elements(n as u64));
            let cell = format!("b{batch}_w{workers}");
            let store = rt.block_on(async { bench.lock().await.store(workers).await });
            group.bench_function(BenchmarkId::new("tenure", &cell), |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            bench.lock().await.seed(&store, n, 0).await;
                            total += tenure_drain(&store, n, batch, workers).await;
                        }
                        total
                    })
                })
            });
            group.bench_function(BenchmarkId::new("raw", &cell), |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            bench.lock().await.seed(&store, n, 0).await;
                            let schema = bench.lock().await.schema.clone();
                            total += raw_drain(&schema, n, batch, workers).await;
                        }
                        total
                    })
                })
            });
            rt.block_on(store.close());
        }
    }
    group.finish();

    let mut group = c.benchmark_group("postgres_streams");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(5));
    let n = 100_000;
    group.throughput(Throughput::Elements(n as u64));
    let store = rt.block_on(async { bench.lock().await.store(4).await });
    group.bench_function(BenchmarkId::new("tenure", "s1000_b100_w4"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    bench.lock().await.seed(&store, n, 1_000).await;
                    total += tenure_drain(&store, n, 100, 4).await;
                }
                total
            })
        })
    });
    group.bench_function(BenchmarkId::new("raw", "s1000_b100_w4"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    bench.lock().await.seed(&store, n, 1_000).await;
                    let schema = bench.lock().await.schema.clone();
                    let raw = PgRaw::with_stream_heads(&schema);
                    total += raw_drain_with(&raw, n, 100, 4).await;
                    // The raw finalize keeps no stream counts: clear them so the next
                    // enqueue makes heads again.
                    let mut b = bench.lock().await;
                    let sql = format!("DELETE FROM {}.streams", b.schema);
                    sqlx::Executor::execute(&mut b.admin, sql.as_str())
                        .await
                        .expect("clear streams");
                }
                total
            })
        })
    });
    rt.block_on(store.close());
    group.finish();

    rt.block_on(async {
        let mut b = bench.lock().await;
        let sql = format!("DROP SCHEMA {} CASCADE", b.schema);
        sqlx::Executor::execute(&mut b.admin, sql.as_str())
            .await
            .expect("drop schema");
    });
}

criterion_group!(benches, postgres);
criterion_main!(benches);
