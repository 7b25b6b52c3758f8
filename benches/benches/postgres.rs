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
//! Two more groups run their own rounds (`tenure_benches::cells`), each in a schema
//! of its own, every seed followed by `VACUUM ANALYZE` (not timed):
//! `postgres_burndown`, the store loop beside a `Worker` with a no-op handler at
//! concurrency 16, 64 and 256 on the same `N` (`TENURE_BENCH_N`, default 200,000),
//! with the Worker/store ratios; and `postgres_backlog`, the store loop and a worker at
//! 64 draining `TENURE_BENCH_BACKLOG_N` (default 100,000) items from the top of a
//! backlog of 1,000 and of 1,000,000 (`TENURE_BENCH_BACKLOG`), with the big/small
//! ratios. Both use one `PgStore` per schema with a pool of 8, LISTEN off.
//!
//! Needs PostgreSQL at `TENURE_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); without it the bench prints why and
//! measures nothing. Run: `cargo bench -p tenure-benches --bench postgres` (about
//! four minutes for the criterion groups; add `-- burndown` or `-- backlog` for one
//! group alone).

// criterion_group! generates an undocumented pub fn.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use sqlx::{Connection, PgConnection};
use tenure_benches::cells::{self, Rounds, BACKLOG, BURNDOWN, SMALL_BACKLOG};
use tenure_benches::raw::pg::{self as raw, PgRaw};
use tenure_benches::{
    bench_queue, drain, runtime, seed_backlog, seed_streams, streams, DrainSpec, Items, OnEmpty,
};
use tenure_core::Store;
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
    /// A new schema name and an admin connection, or `None` (printed) without a
    /// server.
    async fn connect() -> Option<Bench> {
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
    }

    /// `VACUUM ANALYZE` of the store's tables.
    async fn vacuum(&mut self) {
        // One statement each: VACUUM cannot run inside the implicit transaction of a
        // multi-statement query.
        for table in ["items", "streams"] {
            let sql = format!("VACUUM ANALYZE {}.{table}", self.schema);
            sqlx::Executor::execute(&mut self.admin, sql.as_str())
                .await
                .expect("vacuum");
        }
    }

    async fn drop_schema(&mut self) {
        tenure_test_support::postgres::drop_schema(&mut self.admin, &self.schema).await;
    }

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
        self.vacuum().await;
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
    let bench = rt.block_on(Bench::connect());
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

    rt.block_on(async { bench.lock().await.drop_schema().await });
}

// ----------------------------------------------------------------------------- cells

/// Items per burn-down cell: the store loop at B=100 W=4 drains this in about 3 s.
const BURNDOWN_N: usize = 200_000;
/// Items per backlog cell.
const BACKLOG_N: usize = 100_000;
/// The pool of the cells' stores: enough for 4 claimers, or for a worker's claim,
/// finalize, renewal and heartbeat at once.
const CELL_POOL: usize = 8;

fn burndown(_: &mut Criterion) {
    if !cells::wanted("postgres_burndown") {
        return;
    }
    let rt = runtime().expect("runtime");
    let Some(mut bench) = rt.block_on(Bench::connect()) else {
        return;
    };
    let n = cells::env_count("TENURE_BENCH_N", BURNDOWN_N);
    let rounds = cells::env_count("TENURE_BENCH_ROUNDS", 3);
    println!(
        "postgres_burndown: N = {n}, {rounds} rounds, one schema, VACUUM ANALYZE after each seed"
    );
    let queue = bench_queue().expect("queue");
    let mut r = Rounds::new();
    rt.block_on(async {
        let store = bench.store(CELL_POOL).await;
        for _ in 0..rounds {
            for d in BURNDOWN {
                bench.seed(&store, n, 0).await;
                let elapsed = d.drain(&store, &queue, n).await.expect("drain");
                r.record(&d.label(), n, elapsed);
            }
        }
        store.close().await;
        bench.drop_schema().await;
    });
    println!(
        "{}",
        r.table("postgres burn-down", &cells::burndown_ratios())
    );
}

fn backlog(_: &mut Criterion) {
    if !cells::wanted("postgres_backlog") {
        return;
    }
    let rt = runtime().expect("runtime");
    let big = cells::env_count("TENURE_BENCH_BACKLOG", cells::BIG_BACKLOG);
    let n = cells::env_count("TENURE_BENCH_BACKLOG_N", BACKLOG_N);
    let rounds = cells::env_count("TENURE_BENCH_ROUNDS", 3);
    println!(
        "postgres_backlog: N = {n} from the top of {SMALL_BACKLOG} and {big}, {rounds} rounds, \
         VACUUM ANALYZE after each seed"
    );
    let queue = bench_queue().expect("queue");
    let mut r = Rounds::new();
    rt.block_on(async {
        let mut benches = Vec::new();
        for m in [SMALL_BACKLOG, big] {
            let Some(mut bench) = Bench::connect().await else {
                return;
            };
            let store = bench.store(CELL_POOL).await;
            seed_backlog(&store, &queue, m).await.expect("backlog");
            bench.vacuum().await;
            benches.push((m, bench, store));
        }
        for _ in 0..rounds {
            for d in BACKLOG {
                for (m, bench, store) in &mut benches {
                    bench.seed(store, n, 0).await;
                    let elapsed = d.drain(&*store, &queue, n).await.expect("drain");
                    r.record(&cells::backlog_label(&d, *m), n, elapsed);
                }
            }
        }
        for (m, mut bench, store) in benches {
            let counts = store.queue_counts(&queue).await.expect("counts");
            assert_eq!(counts.scheduled, m as u64, "the backlog stays: {counts:?}");
            store.close().await;
            bench.drop_schema().await;
        }
    });
    println!(
        "{}",
        r.table("postgres backlog", &cells::backlog_ratios(big))
    );
}

/// The stream-run cells (`tenure_benches::streams`): one stream of 20,000 items
/// drained with runs off and on, beside the unstreamed drain. One schema, VACUUM ANALYZE after each seed.
fn stream_runs(_: &mut Criterion) {
    if !cells::wanted("postgres_stream_runs") {
        return;
    }
    let rt = runtime().expect("runtime");
    let n = cells::env_count("TENURE_BENCH_STREAM_N", streams::STREAM_N);
    let rounds = cells::env_count("TENURE_BENCH_ROUNDS", 1);
    println!("postgres_stream_runs: N = {n}, {rounds} rounds");
    let queue = bench_queue().expect("queue");
    let mut r = Rounds::new();
    let Some(mut bench) = rt.block_on(Bench::connect()) else {
        return;
    };
    rt.block_on(async {
        let store = bench.store(CELL_POOL).await;
        for _ in 0..rounds {
            for cell in streams::STREAM_CELLS {
                cell.seed(&store, &queue, n).await.expect("seed");
                bench.vacuum().await;
                let elapsed = cell.drain(&store, &queue, n).await.expect("drain");
                r.record(&cell.label(), n, elapsed);
            }
        }
        store.close().await;
        bench.drop_schema().await;
    });
    println!(
        "{}",
        r.table("postgres stream runs", &streams::stream_ratios())
    );
}

criterion_group!(benches, postgres, burndown, backlog, stream_runs);
criterion_main!(benches);
