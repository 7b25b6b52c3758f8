//! Claim + complete on Redis beside a raw Lua loop (LPOP + lease hash + expiry zset,
//! fenced finalize) in the same run, so the library's overhead reads as a ratio.
//!
//! Each measured iteration drains `N` ready items (N = 20,000 at B = 1 and at
//! B = 100) with `W` tokio tasks (multi-thread runtime, one worker thread per core),
//! each claiming `B` items at a time and completing each claimed batch in one call.
//! Seeding is not timed.
//!
//! - `tenure`: one `RedisStore` (its default 4 multiplexed connections, shared by
//!   the tasks), drained by `tenure_benches::drain`: each task loops `claim(B)` then
//!   `complete(tokens)` and checks every answer is `Accepted`.
//! - `raw`: one multiplexed connection per task; the claim script pops `B` ids off a
//!   list and records each lease in a hash and an expiry zset, the finalize script
//!   checks `owner:attempt` per id and deletes it (`tenure_benches::raw::redis`); no
//!   recovery, order, streams, scopes or counts.
//!
//! `redis_burndown` runs the store loop beside a `Worker` with a no-op handler at
//! concurrency 16, 64 and 256 on the same `N` (`TENURE_BENCH_N`, default 200,000),
//! with the Worker/store ratios (`tenure_benches::cells`); add `-- burndown` to run
//! it alone.
//!
//! Needs Redis at `TENURE_REDIS_URL` (default `redis://127.0.0.1:6379`); without it the
//! bench prints why and measures nothing. Each run uses fresh key prefixes and deletes
//! their keys at the end. Run: `cargo bench -p tenure-benches --bench redis`.

// criterion_group! generates an undocumented pub fn.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use redis::aio::MultiplexedConnection;
use tenure_benches::cells::{self, Rounds, BURNDOWN};
use tenure_benches::raw::redis::{self as raw, RedisRaw};
use tenure_benches::{bench_queue, drain, runtime, seed, streams, DrainSpec, Items};
use tenure_redis::{RedisConfig, RedisStore};

const ITEMS: Items = Items {
    single: 20_000,
    batched: 20_000,
};

fn url() -> String {
    std::env::var("TENURE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

async fn connection() -> MultiplexedConnection {
    redis::Client::open(url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// Deletes every key under `{prefix}:`.
async fn delete_prefix(conn: &mut MultiplexedConnection, prefix: &str) {
    let pattern = format!("{{{prefix}}}:*");
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .expect("scan");
        if !keys.is_empty() {
            let _: i64 = redis::cmd("UNLINK")
                .arg(&keys)
                .query_async(conn)
                .await
                .expect("unlink");
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
}

fn redis_bench(c: &mut Criterion) {
    let rt = runtime().expect("runtime");
    let reachable = rt.block_on(async {
        let client = redis::Client::open(url()).map_err(|e| e.to_string())?;
        let mut conn = tokio::time::timeout(
            Duration::from_secs(3),
            client.get_multiplexed_async_connection(),
        )
        .await
        .map_err(|_| "connecting timed out".to_owned())?
        .map_err(|e| e.to_string())?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .map_err(|e| e.to_string())
    });
    if let Err(e) = reachable {
        eprintln!("skipped: Redis at {} is unreachable: {e}", url());
        return;
    }
    let run = uuid::Uuid::now_v7().simple().to_string();
    let store_prefix = format!("bench_{run}");
    let raw_prefix = format!("bench_raw_{run}");
    let store = rt.block_on(async {
        RedisStore::connect(
            RedisConfig::new(url())
                .prefix(&store_prefix)
                .listen(false)
                .response_timeout(Duration::from_secs(120)),
        )
        .await
        .expect("store")
    });
    let raw = RedisRaw::new(&raw_prefix);

    let mut group = c.benchmark_group("redis_claim_complete");
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
            group.bench_function(BenchmarkId::new("tenure", &cell), |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            let queue = bench_queue().expect("queue");
                            seed(&store, &queue, n).await.expect("seed");
                            let spec = DrainSpec::new(queue, n, batch, workers);
                            total += drain(&store, &spec).await.expect("drain").elapsed;
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
                            let mut admin = connection().await;
                            raw.seed(&mut admin, n).await.expect("seed");
                            let mut conns = Vec::with_capacity(workers);
                            for _ in 0..workers {
                                conns.push(connection().await);
                            }
                            total += raw::drain(&raw, conns, n, batch).await.expect("raw drain");
                        }
                        total
                    })
                })
            });
        }
    }
    group.finish();

    rt.block_on(async {
        let mut admin = connection().await;
        delete_prefix(&mut admin, &store_prefix).await;
        delete_prefix(&mut admin, &raw_prefix).await;
    });
}

/// The stream-run cells (`tenure_benches::streams`): one stream of 20,000 items
/// drained with runs off and on, beside the unstreamed drain. A fresh key prefix per
/// run, deleted at the end.
fn stream_runs(_: &mut Criterion) {
    if !cells::wanted("redis_stream_runs") {
        return;
    }
    let rt = runtime().expect("runtime");
    let n = cells::env_count("TENURE_BENCH_STREAM_N", streams::STREAM_N);
    let rounds = cells::env_count("TENURE_BENCH_ROUNDS", 1);
    println!("redis_stream_runs: N = {n}, {rounds} rounds");
    let prefix = format!("bench_{}", uuid::Uuid::now_v7().simple());
    let connected = rt.block_on(async {
        RedisStore::connect(
            RedisConfig::new(url())
                .prefix(&prefix)
                .listen(false)
                .response_timeout(Duration::from_secs(120)),
        )
        .await
    });
    let store = match connected {
        Ok(store) => store,
        Err(e) => {
            eprintln!("skipped: Redis at {} is unreachable: {e}", url());
            return;
        }
    };
    let mut r = Rounds::new();
    rt.block_on(async {
        for _ in 0..rounds {
            for cell in streams::STREAM_CELLS {
                let queue = bench_queue().expect("queue");
                cell.seed(&store, &queue, n).await.expect("seed");
                let elapsed = cell.drain(&store, &queue, n).await.expect("drain");
                r.record(&cell.label(), n, elapsed);
            }
        }
        let mut admin = connection().await;
        delete_prefix(&mut admin, &prefix).await;
    });
    println!(
        "{}",
        r.table("redis stream runs", &streams::stream_ratios())
    );
}

/// Items per burn-down cell, unless `TENURE_BENCH_N` says otherwise: enough that the
/// fastest cell (the store loop at B = 100, W = 4) runs about 3 s here.
const BURNDOWN_N: usize = 200_000;

/// The burn-down cells (`tenure_benches::cells::BURNDOWN`): the store loop beside a
/// `Worker` with a no-op handler at concurrency 16, 64 and 256 on the same `N`, each
/// cell on a fresh queue of one store (its own key prefix, deleted at the end), with
/// the Worker/store ratios.
fn burndown(_: &mut Criterion) {
    if !cells::wanted("redis_burndown") {
        return;
    }
    let rt = runtime().expect("runtime");
    let n = cells::env_count("TENURE_BENCH_N", BURNDOWN_N);
    let rounds = cells::env_count("TENURE_BENCH_ROUNDS", 3);
    println!("redis_burndown: N = {n}, {rounds} rounds, a fresh queue per cell");
    let prefix = format!("bench_{}", uuid::Uuid::now_v7().simple());
    let connected = rt.block_on(async {
        let store = RedisStore::connect(
            RedisConfig::new(url())
                .prefix(&prefix)
                .listen(false)
                .response_timeout(Duration::from_secs(120)),
        )
        .await?;
        store.ping().await.map(|()| store)
    });
    let store = match connected {
        Ok(store) => store,
        Err(e) => {
            eprintln!("skipped: Redis at {} is unreachable: {e}", url());
            return;
        }
    };
    let mut r = Rounds::new();
    rt.block_on(async {
        for _ in 0..rounds {
            for d in BURNDOWN {
                let queue = bench_queue().expect("queue");
                seed(&store, &queue, n).await.expect("seed");
                let elapsed = d.drain(&store, &queue, n).await.expect("drain");
                r.record(&d.label(), n, elapsed);
            }
        }
        let mut admin = connection().await;
        delete_prefix(&mut admin, &prefix).await;
    });
    println!("{}", r.table("redis burn-down", &cells::burndown_ratios()));
}

criterion_group!(benches, redis_bench, burndown, stream_runs);
criterion_main!(benches);
