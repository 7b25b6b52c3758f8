//! The library side of the claim-throughput benches, shared by every store's bench.
//!
//! Each bench in `benches/` measures the same thing for its store: [`seed`] a queue with
//! `N` ready items (not timed), then [`drain`] it with `W` tokio tasks that each loop
//! `claim(B)` then `complete(tokens)`, checking every answer is `Accepted` and that every
//! item finished exactly once. The time from the first claim to the last worker's
//! return is the measurement. What stays in each bench file is store-specific: opening
//! the store, anything done between seeding and draining, and the raw loop it is
//! compared with.
//!
//! Beside it: [`worker`] drains the same seeded queue through a `Worker` with a no-op
//! handler; [`cells`] runs both side by side, and on top of small and large backlogs
//! ([`seed_backlog`]), in rounds; [`tally`] counts every `complete` answer per item
//! for an exactly-once check of any run; [`sustained`] measures pickup latency under
//! a steady enqueue rate; [`raw`] holds the raw loops. The `tenure bench` command
//! (crate `tenure-cli`) is built on these same functions.
//!
//! ```no_run
//! # async fn run() -> Result<(), tenure_benches::BenchError> {
//! use tenure_benches::{bench_queue, drain, seed, DrainSpec};
//! use tenure_memory::MemoryStore;
//!
//! let store = MemoryStore::default();
//! seed(&store, &bench_queue()?, 1_000).await?;
//! let run = drain(&store, &DrainSpec::new(bench_queue()?, 1_000, 100, 4)).await?;
//! println!("{} items in {:?}", 1_000, run.elapsed);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod cells;
pub mod page;
pub mod raw;
pub mod streams;
pub mod sustained;
pub mod tally;
pub mod worker;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tenure_core::{
    ClaimParams, CompleteParams, EnqueueParams, ItemId, NewItem, OwnerId, QueueName, Store,
    StreamKey, TokenOutcome,
};

/// The queue every bench seeds and drains, raw loops included.
pub const QUEUE: &str = "bench";

/// The lease every claim asks for; long enough that no lease expires during a drain.
pub const LEASE: Duration = Duration::from_secs(60);

/// How many items one `enqueue` call carries while seeding.
pub const SEED_CHUNK: usize = 10_000;

/// How far in the future [`seed_backlog`] schedules its items: far enough that none
/// becomes claimable during a run.
pub const BACKLOG_DELAY: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Why a seed or a drain could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The store refused an operation.
    #[error("{op} failed: {source}")]
    Store {
        /// The operation (`"enqueue"`, `"claim"`, `"complete"`).
        op: &'static str,
        /// The store's answer.
        #[source]
        source: tenure_core::Error,
    },
    /// `complete` refused a token that the same worker had just claimed.
    #[error("complete answered {outcome:?} for a token just claimed")]
    NotAccepted {
        /// The answer given instead of `Accepted`.
        outcome: TokenOutcome,
    },
    /// The drain ended with a number of finished items other than the number seeded.
    #[error("{finished} items finished, expected each of {expected} exactly once")]
    Unfinished {
        /// Items whose `complete` was accepted.
        finished: u64,
        /// Items seeded.
        expected: usize,
    },
    /// A drain worker panicked or was cancelled.
    #[error("a drain worker stopped: {0}")]
    Worker(#[from] tokio::task::JoinError),
    /// A raw loop's driver (rusqlite, sqlx) refused an operation.
    #[error("raw {op} failed: {source}")]
    Raw {
        /// The operation (`"claim"`, `"finalize"`, `"insert"`, ...).
        op: &'static str,
        /// The driver's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A bench's closing check found items lost, handled twice, or left behind.
    #[error("check failed: {0}")]
    Check(String),
}

fn store_err(op: &'static str) -> impl FnOnce(tenure_core::Error) -> BenchError {
    move |source| BenchError::Store { op, source }
}

/// The queue named [`QUEUE`].
pub fn bench_queue() -> Result<QueueName, BenchError> {
    QueueName::new(QUEUE).map_err(store_err("queue name"))
}

/// A multi-thread tokio runtime with one worker thread per core and every driver on,
/// as every bench uses.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// How many items a bench drains per measured iteration: fewer at `B = 1`, where each
/// item costs a round trip, than for batched claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Items {
    /// Items drained when each claim takes one item.
    pub single: usize,
    /// Items drained when claims take more than one item.
    pub batched: usize,
}

impl Items {
    /// The item count for claims of `batch` items.
    pub const fn for_batch(&self, batch: usize) -> usize {
        if batch == 1 {
            self.single
        } else {
            self.batched
        }
    }
}

/// Enqueues `n` ready items on `queue`, [`SEED_CHUNK`] per call; item `i` carries
/// `i` as eight little-endian bytes.
pub async fn seed<S: Store>(store: &S, queue: &QueueName, n: usize) -> Result<(), BenchError> {
    seed_items(store, (0..n).map(|i| item(queue, i))).await
}

/// Like [`seed`], and answers the ids of the items, in order (for
/// [`Tally::check`](tally::Tally::check)).
pub async fn seed_ids<S: Store>(
    store: &S,
    queue: &QueueName,
    n: usize,
) -> Result<Vec<ItemId>, BenchError> {
    let mut ids = Vec::with_capacity(n);
    let items = (0..n).map(|i| {
        let item = item(queue, i);
        ids.push(item.id);
        item
    });
    seed_items(store, items).await?;
    Ok(ids)
}

/// Enqueues `n` items on `queue` that become claimable only [`BACKLOG_DELAY`] from
/// now: a backlog that shares the queue, table and indexes with the items a run
/// drains, sorts after all of them (G8: same priority, later `run_at`), and is never
/// claimed, so a drain stops at the top of it.
pub async fn seed_backlog<S: Store>(
    store: &S,
    queue: &QueueName,
    n: usize,
) -> Result<(), BenchError> {
    seed_items(store, (0..n).map(|i| item(queue, i).delay(BACKLOG_DELAY))).await
}

/// Like [`seed`], with item `i` in stream `s{i % streams}` (G9), so the `streams`
/// streams are filled round-robin; with `streams == 0`, exactly [`seed`].
pub async fn seed_streams<S: Store>(
    store: &S,
    queue: &QueueName,
    n: usize,
    streams: usize,
) -> Result<(), BenchError> {
    if streams == 0 {
        return seed(store, queue, n).await;
    }
    let mut items = Vec::with_capacity(n);
    for i in 0..n {
        let key = StreamKey::new(format!("s{}", i % streams)).map_err(store_err("stream key"))?;
        items.push(item(queue, i).stream(key));
    }
    seed_items(store, items).await
}

fn item(queue: &QueueName, i: usize) -> NewItem {
    NewItem::new(queue.clone(), (i as u64).to_le_bytes().to_vec())
}

async fn seed_items<S: Store>(
    store: &S,
    items: impl IntoIterator<Item = NewItem>,
) -> Result<(), BenchError> {
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        let chunk: Vec<NewItem> = items.by_ref().take(SEED_CHUNK).collect();
        store
            .enqueue(EnqueueParams::new(chunk))
            .await
            .map_err(store_err("enqueue"))?;
    }
    Ok(())
}

/// What a drain worker does when a claim comes back empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnEmpty {
    /// Return at once. Right when nothing can hide a ready item: an empty claim then
    /// means every item is claimed, and the workers still holding some will finish them.
    Stop,
    /// Sleep `pause` and claim again, until every item has finished or `give_up_after`
    /// empty claims in a row. Right with streams (G9), where every head may be held by
    /// another worker for a moment while items wait behind them.
    Retry {
        /// The sleep between two empty claims.
        pause: Duration,
        /// Empty claims in a row after which the worker gives up.
        give_up_after: u32,
    },
}

/// One drain: which queue, how many items it holds, and how the workers claim.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DrainSpec {
    /// The queue drained.
    pub queue: QueueName,
    /// Items seeded; the drain checks that exactly this many finished.
    pub items: usize,
    /// Items per claim (`B`); a claim limit, so at most `u32::MAX`.
    pub batch: usize,
    /// Concurrent worker tasks (`W`), each on its own clone of the store handle.
    pub workers: usize,
    /// Whether to time each non-empty claim (see [`Drain::latencies`]).
    pub record_latency: bool,
    /// What a worker does on an empty claim.
    pub on_empty: OnEmpty,
    /// Most items of one stream per claim (G9 stream runs); 1, the default, is off.
    pub stream_run: u32,
}

impl DrainSpec {
    /// Drain `items` items of `queue` with `workers` tasks claiming `batch` at a time;
    /// no latencies recorded, and a worker stops at its first empty claim.
    pub fn new(queue: QueueName, items: usize, batch: usize, workers: usize) -> Self {
        DrainSpec {
            queue,
            items,
            batch,
            workers,
            record_latency: false,
            on_empty: OnEmpty::Stop,
            stream_run: 1,
        }
    }

    /// Claims runs of up to `k` items of one stream ([`ClaimParams::stream_runs`]).
    pub fn stream_runs(mut self, k: u32) -> Self {
        self.stream_run = k;
        self
    }

    /// Records the latency of every non-empty claim.
    pub fn record_latency(mut self, record: bool) -> Self {
        self.record_latency = record;
        self
    }

    /// Sets what a worker does on an empty claim.
    pub fn on_empty(mut self, on_empty: OnEmpty) -> Self {
        self.on_empty = on_empty;
        self
    }
}

/// What a drain measured.
#[derive(Clone, Debug, Default)]
pub struct Drain {
    /// From just before the workers were spawned to the last worker's return.
    pub elapsed: Duration,
    /// With [`DrainSpec::record_latency`], the wall time of every non-empty claim call
    /// in microseconds, unordered; empty otherwise.
    pub latencies: Vec<u64>,
}

/// Drains `spec.queue` with `spec.workers` tokio tasks, each on its own clone of
/// `store` with owner `w{index}`, looping `claim(spec.batch)` then one
/// `complete(tokens)` of the whole batch, until the queue is empty (see [`OnEmpty`]).
///
/// Every `complete` answer must be `Accepted` and exactly `spec.items` items must
/// finish, else the drain fails; the first error of any worker is returned once all
/// workers have returned. A `batch` beyond `u32::MAX` fails before any claim. Must run
/// inside a tokio runtime.
pub async fn drain<S: Store + Clone>(store: &S, spec: &DrainSpec) -> Result<Drain, BenchError> {
    let limit = u32::try_from(spec.batch).map_err(|_| BenchError::Store {
        op: "claim",
        source: tenure_core::Error::invalid("limit", "the batch does not fit in a u32"),
    })?;
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..spec.workers)
        .map(|w| tokio::spawn(worker(store.clone(), spec.clone(), limit, w, done.clone())))
        .collect();
    let mut outcomes = Vec::with_capacity(tasks.len());
    for task in tasks {
        outcomes.push(task.await);
    }
    let elapsed = start.elapsed();
    let mut latencies = Vec::new();
    for outcome in outcomes {
        latencies.extend(outcome??);
    }
    let finished = done.load(Ordering::Relaxed);
    if finished != spec.items as u64 {
        return Err(BenchError::Unfinished {
            finished,
            expected: spec.items,
        });
    }
    Ok(Drain { elapsed, latencies })
}

/// One drain worker; returns the latencies it recorded.
async fn worker<S: Store>(
    store: S,
    spec: DrainSpec,
    limit: u32,
    index: usize,
    done: Arc<AtomicU64>,
) -> Result<Vec<u64>, BenchError> {
    let owner = OwnerId::new(format!("w{index}")).map_err(store_err("owner id"))?;
    let mut latencies = Vec::new();
    let mut idle = 0u32;
    loop {
        let started = Instant::now();
        let leases = store
            .claim(
                ClaimParams::new(spec.queue.clone(), owner.clone(), limit, LEASE)
                    .stream_runs(spec.stream_run),
            )
            .await
            .map_err(store_err("claim"))?;
        if leases.is_empty() {
            match spec.on_empty {
                OnEmpty::Stop => return Ok(latencies),
                OnEmpty::Retry {
                    pause,
                    give_up_after,
                } => {
                    if done.load(Ordering::Relaxed) >= spec.items as u64 || idle > give_up_after {
                        return Ok(latencies);
                    }
                    idle += 1;
                    tokio::time::sleep(pause).await;
                    continue;
                }
            }
        }
        idle = 0;
        if spec.record_latency {
            latencies.push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        }
        let tokens = leases.iter().map(|l| l.token).collect();
        let outcomes = store
            .complete(CompleteParams::new(tokens))
            .await
            .map_err(store_err("complete"))?;
        if let Some(outcome) = outcomes.iter().find(|o| **o != TokenOutcome::Accepted) {
            return Err(BenchError::NotAccepted { outcome: *outcome });
        }
        done.fetch_add(outcomes.len() as u64, Ordering::Relaxed);
    }
}

/// Percentiles of a set of latency samples, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Percentiles {
    /// Samples counted.
    pub count: usize,
    /// Median: the sample at rank `⌊(count - 1) · 0.5⌋` in ascending order.
    pub p50: u64,
    /// The sample at rank `⌊(count - 1) · 0.9⌋`.
    pub p90: u64,
    /// The sample at rank `⌊(count - 1) · 0.99⌋`.
    pub p99: u64,
    /// The largest sample.
    pub max: u64,
}

impl Percentiles {
    /// Sorts `samples` and reads its percentiles; `None` when there are none.
    pub fn of(samples: &mut [u64]) -> Option<Self> {
        samples.sort_unstable();
        let max = *samples.last()?;
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
        Some(Percentiles {
            count: samples.len(),
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            max,
        })
    }
}

/// `over N claims: p50 .. us, p99 .. us, max .. us`.
impl fmt::Display for Percentiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "over {} claims: p50 {} us, p90 {} us, p99 {} us, max {} us",
            self.count, self.p50, self.p90, self.p99, self.max
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_read_ranks_of_the_sorted_samples() {
        let mut samples: Vec<u64> = (1..=200).rev().collect();
        let p = Percentiles::of(&mut samples).expect("samples");
        assert_eq!(
            p,
            Percentiles {
                count: 200,
                p50: 100,
                p90: 180,
                p99: 198,
                max: 200
            }
        );
        assert_eq!(Percentiles::of(&mut []), None);
    }

    #[test]
    fn items_for_batch_one_is_the_single_count() {
        let items = Items {
            single: 3,
            batched: 30,
        };
        assert_eq!((items.for_batch(1), items.for_batch(100)), (3, 30));
    }
}
