//! One measurement: open the store, seed, drain or sustain, check exactly-once, close.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection};

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

/// What `--hold-snapshot` does around one measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Snapshot {
    /// Nothing (a run without `--hold-snapshot`).
    None,
    /// Sample the schema's dead tuples, holding nothing: the free run.
    Watch,
    /// Hold an idle REPEATABLE READ transaction open in another session, and sample.
    Hold,
}

/// How often the dead tuples are sampled.
const DEAD_TUPLE_EVERY: Duration = Duration::from_millis(250);

/// The snapshot held and the dead-tuple sampler of one measurement.
struct Watch {
    held: Option<PgConnection>,
    peaks: Arc<Mutex<BTreeMap<String, i64>>>,
    sampler: tokio::task::JoinHandle<()>,
}

impl Watch {
    /// Takes the snapshot (if `how` says so) and starts sampling, on `target`'s
    /// PostgreSQL server. `None` for other stores and for [`Snapshot::None`].
    async fn start(target: &Target, how: Snapshot) -> Result<Option<Watch>, CliError> {
        let Some((driver_url, schema)) = target.postgres_schema() else {
            return Ok(None);
        };
        if how == Snapshot::None {
            return Ok(None);
        }
        let held = if how == Snapshot::Hold {
            let mut conn = PgConnection::connect(driver_url)
                .await
                .map_err(CliError::db("connecting to hold a snapshot"))?;
            // `SELECT 1` takes the snapshot and locks no table, so nothing the store
            // does (a TRUNCATE included) waits for this session.
            sqlx::Executor::execute(
                &mut conn,
                "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1;",
            )
            .await
            .map_err(CliError::db("taking the snapshot"))?;
            Some(conn)
        } else {
            None
        };
        let mut conn = PgConnection::connect(driver_url)
            .await
            .map_err(CliError::db("connecting to sample dead tuples"))?;
        let peaks = Arc::new(Mutex::new(BTreeMap::new()));
        let into = Arc::clone(&peaks);
        let schema = schema.to_owned();
        let sampler = tokio::spawn(async move {
            loop {
                let rows: Result<Vec<(String, i64)>, _> = sqlx::query_as(
                    "SELECT relname::text, n_dead_tup FROM pg_stat_user_tables \
                     WHERE schemaname = $1",
                )
                .bind(&schema)
                .fetch_all(&mut conn)
                .await;
                if let Ok(rows) = rows {
                    let mut peaks = into.lock().unwrap_or_else(|p| p.into_inner());
                    for (table, dead) in rows {
                        let peak = peaks.entry(table).or_insert(0);
                        *peak = (*peak).max(dead);
                    }
                }
                tokio::time::sleep(DEAD_TUPLE_EVERY).await;
            }
        });
        Ok(Some(Watch {
            held,
            peaks,
            sampler,
        }))
    }

    /// Stops sampling, rolls the held transaction back, and answers the peaks
    /// (tables that had none left out).
    async fn finish(mut self) -> BTreeMap<String, i64> {
        // One last sample's worth of time: the server publishes counts about once a
        // second.
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        self.sampler.abort();
        if let Some(mut conn) = self.held.take() {
            let _ = sqlx::Executor::execute(&mut conn, "ROLLBACK").await;
            let _ = conn.close().await;
        }
        let peaks = self.peaks.lock().unwrap_or_else(|p| p.into_inner());
        peaks
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(t, n)| (t.clone(), *n))
            .collect()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // A run that failed: stop sampling; the held connection closes with its
        // transaction when dropped.
        self.sampler.abort();
    }
}

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
    /// `(seconds since the measurement started, wall time in microseconds)` of every
    /// non-empty claim.
    pub(crate) claims: Vec<(f64, u64)>,
    /// Whether another session held a snapshot throughout (`--hold-snapshot`).
    pub(crate) snapshot_held: bool,
    /// The peak dead tuples of each table of the schema during the run, when sampled.
    pub(crate) peak_dead_tuples: Option<BTreeMap<String, i64>>,
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
    snapshot: Snapshot,
) -> Result<Measured, CliError> {
    let store: DynStore = tenure::open(target.url()).await?;
    // Several producers enqueue through a handle of their own, as application
    // processes beside the workers would: on PostgreSQL they get a pool of their own
    // and do not queue for the worker's connections.
    let producer = match (args.mode, args.producers) {
        (Mode::Sustained, n) if n > 1 => Some(tenure::open(target.url()).await?),
        _ => None,
    };
    let queue = QueueName::new(format!("bench_{}", fresh_suffix()))?;
    let tallied = Tallied::new(store);
    let on = On {
        store: &tallied,
        producer: producer.as_ref(),
        queue: &queue,
    };
    let outcome = measure_on(target, args, progress, on, snapshot).await;
    drop(tallied);
    drop(producer);
    outcome
}

/// The handles and queue of one run.
#[derive(Clone, Copy)]
struct On<'a> {
    store: &'a Tallied<DynStore>,
    /// The sustained producers' own handle, when they have one.
    producer: Option<&'a DynStore>,
    queue: &'a QueueName,
}

async fn measure_on(
    target: &Target,
    args: &BenchArgs,
    progress: &Progress,
    on: On<'_>,
    snapshot: Snapshot,
) -> Result<Measured, CliError> {
    let (store, queue) = (on.store, on.queue);
    let seeding = Instant::now();
    if args.backlog > 0 {
        progress.spin(format!("seeding a backlog of {} items", args.backlog));
        seed_backlog(store, queue, args.backlog).await?;
    }
    let watch;
    let (ids, drained) = match args.mode {
        Mode::BurnDown => {
            progress.spin(format!("seeding {} items", args.items));
            let ids = seed_ids(store, queue, args.items).await?;
            target.analyze().await?;
            let seed_time = seeding.elapsed();
            watch = Watch::start(target, snapshot).await?;
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
            watch = Watch::start(target, snapshot).await?;
            let plan = Plan::new(args.rate, args.warmup, args.duration).producers(args.producers);
            progress.count("enqueued and worked", plan.items(), store.tally().clone());
            let start_us = store.tally().now_us();
            let run = match args.through {
                Through::Worker => match on.producer {
                    Some(producer) => {
                        sustained::run_worker(
                            store,
                            producer,
                            queue,
                            &plan,
                            args.concurrency,
                            SETTLE,
                        )
                        .await?
                    }
                    None => {
                        sustained::run_worker(store, store, queue, &plan, args.concurrency, SETTLE)
                            .await?
                    }
                },
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
    let peak_dead_tuples = match watch {
        Some(w) => Some(w.finish().await),
        None => None,
    };
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
    let claims = tally
        .claim_samples()
        .into_iter()
        .filter(|(at, _)| *at >= start_us)
        .map(|(at, took)| ((at - start_us) as f64 / 1e6, took))
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
        claims,
        snapshot_held: snapshot == Snapshot::Hold,
        peak_dead_tuples,
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
