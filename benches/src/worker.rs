//! Burn-down through the worker runtime: what users run, beside the store-level
//! [`drain`](crate::drain) loop.
//!
//! [`drain_worker`] starts one [`Worker`] with a no-op handler on a seeded queue, times
//! it from the spawn until the store has accepted a completion for every item, then
//! shuts it down and checks that every item was claimed once and completed, with
//! nothing failed, lost, released or abandoned. Maintenance is off, so the measurement
//! is the claim, handler and finalize path alone.
//!
//! ```no_run
//! # async fn run() -> Result<(), tenure_benches::BenchError> {
//! use tenure_benches::worker::{drain_worker, WorkerSpec};
//! use tenure_benches::{bench_queue, seed};
//! use tenure_memory::MemoryStore;
//!
//! let store = MemoryStore::default();
//! seed(&store, &bench_queue()?, 10_000).await?;
//! let run = drain_worker(&store, &WorkerSpec::new(bench_queue()?, 10_000, 64)).await?;
//! println!("10000 items in {:?}", run.elapsed);
//! # Ok(())
//! # }
//! ```

use std::time::{Duration, Instant};

use tenure_core::{QueueName, Store};
use tenure_runtime::{Job, JobError, Worker};

use crate::{BenchError, Drain};

/// How often the drain looks at the worker's counters.
const WATCH: Duration = Duration::from_millis(1);

/// One burn-down through a worker.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WorkerSpec {
    /// The queue drained.
    pub queue: QueueName,
    /// Items seeded and ready; the drain ends when this many are completed.
    pub items: usize,
    /// The worker's handler slots (`concurrency`).
    pub concurrency: usize,
    /// Most items per claim; `None` keeps the worker's default (its concurrency,
    /// capped by the store's batch limit).
    pub claim_batch: Option<usize>,
    /// The drain fails when no completion is accepted for this long.
    pub stall_after: Duration,
}

impl WorkerSpec {
    /// Drain `items` items of `queue` with one worker of `concurrency` slots; the
    /// worker's default claim batch; fails after 60 s without progress.
    pub fn new(queue: QueueName, items: usize, concurrency: usize) -> Self {
        WorkerSpec {
            queue,
            items,
            concurrency,
            claim_batch: None,
            stall_after: Duration::from_secs(60),
        }
    }

    /// Sets the most items per claim.
    pub fn claim_batch(mut self, batch: Option<usize>) -> Self {
        self.claim_batch = batch;
        self
    }
}

/// Drains `spec.queue` through one [`Worker`] on a clone of `store` whose handler does
/// nothing and succeeds.
///
/// [`Drain::elapsed`] runs from just before the spawn to the moment the worker's
/// counters show `spec.items` completions accepted (read every millisecond); the
/// shutdown that follows is not timed. Fails when the worker cannot start, when it
/// makes no progress for [`WorkerSpec::stall_after`], or when the shutdown report
/// shows any item claimed more than once, failed, lost, released or abandoned, or the
/// worker not drained. With `TENURE_BENCH_VERBOSE` set, prints the worker's counters
/// and its average claim size to stderr. [`Drain::latencies`] stays empty: time claims by wrapping the
/// store in a [`Tallied`](crate::tally::Tallied). Must run inside a tokio runtime.
pub async fn drain_worker<S: Store + Clone>(
    store: &S,
    spec: &WorkerSpec,
) -> Result<Drain, BenchError> {
    let mut builder = Worker::builder(store.clone())
        .queue(spec.queue.clone())
        .concurrency(spec.concurrency)
        .maintenance(false)
        .handler(|_job: Job| async { Ok::<(), JobError>(()) });
    if let Some(batch) = spec.claim_batch {
        builder = builder.claim_batch(batch);
    }
    let target = spec.items as u64;
    let start = Instant::now();
    let worker = builder.spawn().map_err(|source| BenchError::Store {
        op: "worker spawn",
        source,
    })?;
    let mut last = (0u64, Instant::now());
    let outcome = loop {
        let m = worker.metrics();
        if m.completed >= target {
            break Ok(start.elapsed());
        }
        if m.completed > last.0 {
            last = (m.completed, Instant::now());
        } else if last.1.elapsed() > spec.stall_after {
            break Err(BenchError::Check(format!(
                "the worker completed {} of {target} items and then nothing for {:?} ({m:?})",
                m.completed, spec.stall_after
            )));
        }
        tokio::time::sleep(WATCH).await;
    };
    let report = worker.shutdown(Duration::from_secs(10)).await;
    let elapsed = outcome?;
    let m = report.metrics;
    if std::env::var_os("TENURE_BENCH_VERBOSE").is_some() {
        eprintln!(
            "worker c{}: {} claims, {:.1} leases a claim; {m:?}",
            spec.concurrency,
            m.polls,
            m.claimed as f64 / m.polls.max(1) as f64
        );
    }
    if !report.drained
        || report.released > 0
        || report.abandoned > 0
        || m.claimed != target
        || m.completed != target
        || m.failed > 0
        || m.lost > 0
        || m.self_stopped > 0
    {
        return Err(BenchError::Check(format!(
            "the worker should have claimed and completed each of {target} items once: {report:?}"
        )));
    }
    Ok(Drain {
        elapsed,
        latencies: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tally::Tallied;
    use crate::{bench_queue, seed_backlog, seed_ids};
    use tenure_memory::MemoryStore;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_worker_drains_the_top_of_a_backlog_and_every_item_finishes_once() {
        let store = Tallied::new(MemoryStore::default());
        let queue = bench_queue().expect("queue");
        seed_backlog(&store, &queue, 300).await.expect("backlog");
        let ids = seed_ids(&store, &queue, 1_000).await.expect("seed");
        drain_worker(&store, &WorkerSpec::new(queue.clone(), 1_000, 16))
            .await
            .expect("drain");
        let check = store.tally().check(&ids);
        assert!(check.holds(), "{check}");
        let counts = store.queue_counts(&queue).await.expect("counts");
        assert_eq!(
            (counts.ready, counts.running, counts.scheduled),
            (0, 0, 300)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_drain_of_more_items_than_seeded_fails_instead_of_waiting_forever() {
        let store = MemoryStore::default();
        let queue = bench_queue().expect("queue");
        seed_ids(&store, &queue, 10).await.expect("seed");
        let mut spec = WorkerSpec::new(queue, 11, 4);
        spec.stall_after = Duration::from_millis(200);
        let err = drain_worker(&store, &spec)
            .await
            .expect_err("one item never comes");
        assert!(err.to_string().contains("completed 10 of 11"), "{err}");
    }
}
