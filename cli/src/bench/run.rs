//! One measurement: open the store, seed, drain or sustain, check exactly-once, close.

use std::time::{Duration, Instant};

use tenure::{DynStore, QueueCounts, QueueName, Store};
use tenure_benches::sustained::{self, Plan, Summary};
use tenure_benches::tally::{ExactlyOnce, Tallied};
use tenure_benches::worker::{drain_worker, WorkerSpec};
use tenure_benches::{drain, seed_backlog, seed_ids, DrainSpec, OnEmpty, Percentiles};

use super::progress::Progress;
use super::target::{fresh_suffix, Target};
use super::{BenchArgs, Mode, Through};
use crate::error::CliError;

/// The store loop's claim size when --batch is not given.
pub(crate) const DEFAULT_STORE_BATCH: usize = 100;
/// How long a sustained run waits for its last pickups after the producer stops.
const SETTLE: Duration = Duration::from_secs(60);
/// The store loop's sleep after an empty claim in a sustained run.
const STORE_POLL: Duration = Duration::from_millis(1);

/// What one run measured.
#[derive(Debug)]
pub(crate) struct Measured {
    /// The store's own name (`sqlite`, `postgres`, ...).
    pub(crate) store: &'static str,
    /// The run's queue.
    pub(crate) queue: String,
    /// Items the run finished (drained, or enqueued and worked).
    pub(crate) items: u64,
    /// Burn-down: from the first claim to the last completion. Sustained: from the
    /// first counted enqueue to the last counted pickup.
    pub(crate) elapsed: Duration,
    /// Items per second over `elapsed`.
    pub(crate) per_sec: f64,
    /// Seeding time (not measured).
    pub(crate) seed_time: Duration,
    /// The wall time of every non-empty claim call, in microseconds.
    pub(crate) claim_latency: Option<Percentiles>,
    /// Sustained: handler start (worker) or claim return (store) minus enqueue call.
    pub(crate) pickup_latency: Option<Percentiles>,
    /// The exactly-once check over every item the run made.
    pub(crate) exactly_once: ExactlyOnce,
    /// The queue after the run: all zero but `scheduled`, which holds the backlog.
    pub(crate) left: QueueCounts,
    /// `(seconds since the measurement started, items finished)` per accepted
    /// `complete` call.
    pub(crate) timeline: Vec<(f64, u32)>,
}

fn percentiles(mut samples: Vec<u64>) -> Option<Percentiles> {
    Percentiles::of(&mut samples)
}

/// Opens `target`'s store, runs the bench `args` describe on a fresh queue, checks
/// it, and closes the store (dropping every handle) before returning.
pub(crate) async fn measure(
    target: &Target,
    args: &BenchArgs,
    progress: &Progress,
) -> Result<Measured, CliError> {
    let store: DynStore = tenure::open(target.url()).await?;
    let queue = QueueName::new(format!("bench_{}", fresh_suffix()))?;
    let tallied = Tallied::new(store);
    let outcome = measure_on(target, args, progress, &tallied, &queue).await;
    drop(tallied);
    outcome
}

async fn measure_on(
    target: &Target,
    args: &BenchArgs,
    progress: &Progress,
    store: &Tallied<DynStore>,
    queue: &QueueName,
) -> Result<Measured, CliError> {
    let seeding = Instant::now();
    if args.backlog > 0 {
        progress.spin(format!("seeding a backlog of {} items", args.backlog));
        seed_backlog(store, queue, args.backlog).await?;
    }
    let (ids, drained) = match args.mode {
        Mode::BurnDown => {
            progress.spin(format!("seeding {} items", args.items));
            let ids = seed_ids(store, queue, args.items).await?;
            target.analyze().await?;
            let seed_time = seeding.elapsed();
            progress.count("draining", args.items as u64, store.tally().clone());
            let start_us = store.tally().now_us();
            let elapsed = burn_down(store, queue, args).await?;
            (
                ids,
                Run::BurnDown {
                    elapsed,
                    seed_time,
                    start_us,
                },
            )
        }
        Mode::Sustained => {
            target.analyze().await?;
            let seed_time = seeding.elapsed();
            let plan = Plan::new(args.rate, args.warmup, args.duration);
            progress.count("enqueued and worked", plan.items(), store.tally().clone());
            let start_us = store.tally().now_us();
            let run = match args.through {
                Through::Worker => {
                    sustained::run_worker(store, store, queue, &plan, args.concurrency, SETTLE)
                        .await?
                }
                Through::Store => {
                    let batch = args.batch.unwrap_or(1);
                    let batch = u32::try_from(batch)
                        .map_err(|_| CliError::Usage("--batch is too large".to_owned()))?;
                    sustained::run_store(
                        store,
                        queue,
                        &plan,
                        (args.workers, batch),
                        STORE_POLL,
                        SETTLE,
                    )
                    .await?
                }
            };
            (
                run.enqueued,
                Run::Sustained {
                    summary: run.summary,
                    seed_time,
                    start_us,
                },
            )
        }
    };
    progress.finish();
    let tally = store.tally();
    let exactly_once = tally.check(&ids);
    let left = store.queue_counts(queue).await?;
    if left.ready + left.running + left.dead > 0 || left.scheduled != args.backlog as u64 {
        return Err(CliError::ExactlyOnce(format!(
            "the queue should hold only the backlog of {} scheduled items after the run, \
             but holds {left:?}",
            args.backlog
        )));
    }
    let (elapsed, per_sec, seed_time, pickup, start_us) = match drained {
        Run::BurnDown {
            elapsed,
            seed_time,
            start_us,
        } => (
            elapsed,
            ids.len() as f64 / elapsed.as_secs_f64().max(1e-9),
            seed_time,
            None,
            start_us,
        ),
        Run::Sustained {
            summary,
            seed_time,
            start_us,
        } => (
            Duration::from_secs_f64(summary.items as f64 / summary.per_sec.max(1e-9)),
            summary.per_sec,
            seed_time,
            Some(summary.latency),
            start_us,
        ),
    };
    let timeline = tally
        .timeline()
        .into_iter()
        .filter(|(at, _)| *at >= start_us)
        .map(|(at, n)| ((at - start_us) as f64 / 1e6, n))
        .collect();
    Ok(Measured {
        store: store.name(),
        queue: queue.as_str().to_owned(),
        items: ids.len() as u64,
        elapsed,
        per_sec,
        seed_time,
        claim_latency: percentiles(tally.claim_latencies()),
        pickup_latency: pickup,
        exactly_once,
        left,
        timeline,
    })
}

enum Run {
    BurnDown {
        elapsed: Duration,
        seed_time: Duration,
        start_us: u64,
    },
    Sustained {
        summary: Summary,
        seed_time: Duration,
        start_us: u64,
    },
}

async fn burn_down(
    store: &Tallied<DynStore>,
    queue: &QueueName,
    args: &BenchArgs,
) -> Result<Duration, CliError> {
    let run = match args.through {
        Through::Worker => {
            let spec = WorkerSpec::new(queue.clone(), args.items, args.concurrency)
                .claim_batch(args.batch);
            drain_worker(store, &spec).await?
        }
        Through::Store => {
            let batch = args.batch.unwrap_or(DEFAULT_STORE_BATCH);
            // Another claimer may hold the last items for a moment; a loop stops once
            // every item has finished.
            let spec = DrainSpec::new(queue.clone(), args.items, batch, args.workers).on_empty(
                OnEmpty::Retry {
                    pause: Duration::from_millis(1),
                    give_up_after: 1_000,
                },
            );
            drain(store, &spec).await?
        }
    };
    Ok(run.elapsed)
}
