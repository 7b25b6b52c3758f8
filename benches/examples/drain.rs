//! One measured drain, without criterion: for profiling (`valgrind --tool=callgrind`)
//! and for the backlog (flatness) figures.
//!
//! ```sh
//! cargo run --release -p tenure-benches --example drain -- <target> <take> <batch> <workers> [backlog]
//! ```
//!
//! `target` is `sqlite`, `sqlite-raw`, `sqlite-worker`, `memory`, `memory-raw`,
//! `memory-worker`, `redis`, `redis-raw` or `redis-worker` (Redis at
//! `TENURE_REDIS_URL`, default `redis://127.0.0.1:6379`, under a fresh key prefix whose
//! keys are deleted afterwards; `redis-raw`'s are left behind). A `-worker` target drains through one `Worker` with a no-op
//! handler (`tenure_benches::worker::drain_worker`): `workers` is its concurrency and
//! `batch` its claim batch (0 keeps the worker's default). The queue is seeded
//! with `backlog` ready items (default `take`, not timed), then `workers` workers claim
//! `batch` at a time and complete each batch until `take` items have finished; prints
//! items/s over that drain. With `backlog` far above `take`, the figure is the cost of
//! claiming from the top of a large queue.
//!
//! `TENURE_DRAIN_AFTER_SEED` and `TENURE_DRAIN_AFTER_DRAIN`, when set, are shell
//! commands run between the seed and the drain and right after the drain, so a profile
//! or a server's counters cover the drain alone (for example `redis-cli config
//! resetstat` before and `redis-cli info commandstats` after, or `callgrind_control -z`
//! and `callgrind_control -d` for a server under callgrind).
//! `TENURE_DRAIN_REDIS_CONNECTIONS` sets how many connections the Redis store's calls
//! take turns on (unset: the store's own default).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tenure_benches::raw::memory::RawMemory;
use tenure_benches::raw::redis::RedisRaw;
use tenure_benches::raw::sqlite as raw;
use tenure_benches::worker::{drain_worker, WorkerSpec};
use tenure_benches::{bench_queue, runtime, seed, LEASE};
use tenure_core::{ClaimParams, CompleteParams, OwnerId, Store, TokenOutcome};

fn redis_url() -> String {
    std::env::var("TENURE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

fn usage() -> ! {
    eprintln!(
        "usage: drain <sqlite|sqlite-raw|sqlite-worker|memory|memory-raw|memory-worker|redis|redis-raw|redis-worker> <take> <batch> <workers> [backlog]"
    );
    std::process::exit(2)
}

/// Runs the shell command in the environment variable `var` (see the top), if set,
/// and waits for it.
fn hook(var: &str) {
    if let Ok(cmd) = std::env::var(var) {
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .status()
            .unwrap_or_else(|e| panic!("run {var}: {e}"));
        assert!(status.success(), "{var} failed: {status}");
    }
}

fn arg(args: &[String], i: usize) -> Option<usize> {
    args.get(i)
        .map(|a| a.replace('_', "").parse().unwrap_or_else(|_| usage()))
}

async fn store_drain<S: Store + Clone>(
    store: S,
    take: usize,
    batch: usize,
    workers: usize,
) -> (Duration, u64) {
    let queue = bench_queue().expect("queue");
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (store, queue, done) = (store.clone(), queue.clone(), done.clone());
            tokio::spawn(async move {
                let owner = OwnerId::new(format!("w{w}")).expect("owner");
                while done.load(Ordering::Relaxed) < take as u64 {
                    let leases = store
                        .claim(ClaimParams::new(
                            queue.clone(),
                            owner.clone(),
                            batch as u32,
                            LEASE,
                        ))
                        .await
                        .expect("claim");
                    if leases.is_empty() {
                        return;
                    }
                    let tokens = leases.iter().map(|l| l.token).collect();
                    let out = store
                        .complete(CompleteParams::new(tokens))
                        .await
                        .expect("complete");
                    assert!(out.iter().all(|o| *o == TokenOutcome::Accepted));
                    done.fetch_add(out.len() as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("worker");
    }
    (start.elapsed(), done.load(Ordering::Relaxed))
}

/// Drains `take` items through one worker of `concurrency` slots claiming `batch` at a
/// time (0: the worker's default).
async fn worker_drain<S: Store + Clone>(
    store: S,
    take: usize,
    batch: usize,
    concurrency: usize,
) -> (Duration, u64) {
    let spec = WorkerSpec::new(bench_queue().expect("queue"), take, concurrency)
        .claim_batch((batch > 0).then_some(batch));
    let run = drain_worker(&store, &spec).await.expect("worker drain");
    (run.elapsed, take as u64)
}

/// Seeds `backlog` ready items into `store`, then drains `take` of them through a
/// worker or the store loop; prints the CPU time the process spent in the drain.
async fn seeded_drain<S: Store + Clone>(
    store: S,
    through_worker: bool,
    take: usize,
    batch: usize,
    workers: usize,
    backlog: usize,
) -> (Duration, u64) {
    seed(&store, &bench_queue().expect("queue"), backlog)
        .await
        .expect("seed");
    hook("TENURE_DRAIN_AFTER_SEED");
    let cpu = process_cpu();
    let drained = if through_worker {
        worker_drain(store, take, batch, workers).await
    } else {
        store_drain(store, take, batch, workers).await
    };
    hook("TENURE_DRAIN_AFTER_DRAIN");
    if let (Some(before), Some(after)) = (cpu, process_cpu()) {
        let spent = after.saturating_sub(before);
        eprintln!(
            "cpu in the drain: {spent:?}, {:.0} ns an item (all threads; the worker's start and shutdown included)",
            spent.as_nanos() as f64 / drained.1.max(1) as f64
        );
    }
    drained
}

/// CPU time the process has used (user and system, all threads), from
/// `/proc/self/stat` in clock ticks of 10 ms; None where that file is missing. Less
/// sensitive than the wall clock to other load on a shared machine.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // After the command: state is field 3, utime 14 and stime 15.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// A raw drain's elapsed time and count, taken before `TENURE_DRAIN_AFTER_DRAIN` runs.
fn finished(start: Instant, done: &AtomicU64) -> (Duration, u64) {
    let drained = (start.elapsed(), done.load(Ordering::Relaxed));
    hook("TENURE_DRAIN_AFTER_DRAIN");
    drained
}

fn redis_store_config(prefix: &str) -> tenure_redis::RedisConfig {
    let config = tenure_redis::RedisConfig::new(redis_url())
        .prefix(&format!("{prefix}_{}", uuid::Uuid::now_v7().simple()))
        .listen(false)
        // Room for a server run under valgrind.
        .response_timeout(Duration::from_secs(600));
    match std::env::var("TENURE_DRAIN_REDIS_CONNECTIONS") {
        Ok(n) => config.connections(n.parse().unwrap_or_else(|_| usage())),
        Err(_) => config,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let target = args.get(1).cloned().unwrap_or_else(|| usage());
    let (Some(take), Some(batch), Some(workers)) = (arg(&args, 2), arg(&args, 3), arg(&args, 4))
    else {
        usage()
    };
    let backlog = arg(&args, 5).unwrap_or(take).max(take);
    let through_worker = target.ends_with("-worker");
    let rt = runtime().expect("runtime");
    let dir = tempfile::TempDir::new().expect("temp dir");
    let (elapsed, items) = match target.as_str() {
        "sqlite" | "sqlite-worker" => rt.block_on(async {
            let store = tenure_sqlite::SqliteStore::open(tenure_sqlite::SqliteConfig::new(
                dir.path().join("drain.db"),
            ))
            .await
            .expect("open");
            seeded_drain(store, through_worker, take, batch, workers, backlog).await
        }),
        "memory" | "memory-worker" => rt.block_on(async {
            let store = tenure_memory::MemoryStore::default();
            seeded_drain(store, through_worker, take, batch, workers, backlog).await
        }),
        "redis" | "redis-worker" => rt.block_on(async {
            let store = tenure_redis::RedisStore::connect(redis_store_config("drain"))
                .await
                .expect("connect");
            let drained =
                seeded_drain(store.clone(), through_worker, take, batch, workers, backlog).await;
            store
                .remove_prefix()
                .await
                .expect("delete the prefix's keys");
            drained
        }),
        "sqlite-raw" => {
            let path = dir.path().join("raw.db");
            raw::seed(&path, backlog).expect("seed");
            hook("TENURE_DRAIN_AFTER_SEED");
            let done = AtomicU64::new(0);
            let start = Instant::now();
            std::thread::scope(|s| {
                for w in 0..workers {
                    let (path, done) = (&path, &done);
                    s.spawn(move || {
                        let mut conn = raw::connect(path, false).expect("open");
                        let owner = format!("w{w}");
                        while done.load(Ordering::Relaxed) < take as u64 {
                            let c = raw::claim(&mut conn, &owner, batch).expect("claim");
                            if c.is_empty() {
                                return;
                            }
                            assert_eq!(raw::finalize(&mut conn, &c).expect("finalize"), c.len());
                            done.fetch_add(c.len() as u64, Ordering::Relaxed);
                        }
                    });
                }
            });
            finished(start, &done)
        }
        "redis-raw" => rt.block_on(async {
            let raw = RedisRaw::new(&format!("drain_raw_{}", uuid::Uuid::now_v7().simple()));
            let client = redis::Client::open(redis_url()).expect("url");
            let mut admin = client
                .get_multiplexed_async_connection()
                .await
                .expect("connect");
            raw.seed(&mut admin, backlog).await.expect("seed");
            hook("TENURE_DRAIN_AFTER_SEED");
            let done = Arc::new(AtomicU64::new(0));
            let start = Instant::now();
            let mut tasks = Vec::new();
            for w in 0..workers {
                let mut conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .expect("connect");
                let (raw, done) = (raw.clone(), done.clone());
                tasks.push(tokio::spawn(async move {
                    let owner = format!("w{w}");
                    while done.load(Ordering::Relaxed) < take as u64 {
                        let c = raw.claim(&mut conn, &owner, batch).await.expect("claim");
                        if c.is_empty() {
                            return;
                        }
                        let f = raw.finalize(&mut conn, &owner, &c).await.expect("finalize");
                        assert_eq!(f, c.len());
                        done.fetch_add(c.len() as u64, Ordering::Relaxed);
                    }
                }));
            }
            for t in tasks {
                t.await.expect("worker");
            }
            finished(start, &done)
        }),
        "memory-raw" => {
            let q = Arc::new(RawMemory::with_items(backlog));
            hook("TENURE_DRAIN_AFTER_SEED");
            let done = AtomicU64::new(0);
            let start = Instant::now();
            std::thread::scope(|s| {
                for w in 0..workers {
                    let (q, done) = (&q, &done);
                    s.spawn(move || {
                        let owner: Arc<str> = Arc::from(format!("w{w}"));
                        while done.load(Ordering::Relaxed) < take as u64 {
                            let c = q.claim(&owner, batch);
                            if c.is_empty() {
                                return;
                            }
                            assert_eq!(q.finalize(&c), c.len() as u64);
                            done.fetch_add(c.len() as u64, Ordering::Relaxed);
                        }
                    });
                }
            });
            finished(start, &done)
        }
        _ => usage(),
    };
    println!(
        "{target} take={take} batch={batch} workers={workers} backlog={backlog}: {:.0} items/s ({:?})",
        items as f64 / elapsed.as_secs_f64(),
        elapsed
    );
}
