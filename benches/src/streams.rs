//! The stream-run cells every store's bench runs: one stream of [`STREAM_N`] items
//! drained with stream runs off and on, beside the same number of unstreamed items, in
//! one run, so what runs buy a hot stream reads as a ratio.
//!
//! Each cell seeds its items just before it (not timed) and drains them with one task
//! looping `claim(100)` then `complete(tokens)`:
//!
//! - `unstreamed b100`: items without a stream, 100 per claim.
//! - `one stream b100 runs off`: one stream; a claim takes only its head (G9), so the
//!   stream moves at one claim and one complete per item.
//! - `one stream b100 runs 100`: one stream, `stream_runs(100)`: a claim leases the
//!   head and the 99 items behind it.
//!
//! Environment: `TENURE_BENCH_STREAM_N` (items per cell, default [`STREAM_N`]),
//! `TENURE_BENCH_ROUNDS` (default 1).

use std::time::Duration;

use tenure_core::{QueueName, Store};

use crate::{drain, seed_streams, BenchError, DrainSpec};

/// Items per stream-run cell.
pub const STREAM_N: usize = 20_000;
/// Items per claim in every stream-run cell.
pub const STREAM_BATCH: usize = 100;

/// One stream-run cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamCell {
    /// Items without a stream.
    Unstreamed,
    /// Every item in one stream, claimed with runs of up to `run` items (1: off).
    OneStream {
        /// Most items of the stream per claim.
        run: u32,
    },
}

/// The cells, in the order each round runs them.
pub const STREAM_CELLS: [StreamCell; 3] = [
    StreamCell::Unstreamed,
    StreamCell::OneStream { run: 1 },
    StreamCell::OneStream { run: 100 },
];

impl StreamCell {
    /// `unstreamed b100`, `one stream b100 runs off`, `one stream b100 runs 100`.
    pub fn label(&self) -> String {
        match self {
            StreamCell::Unstreamed => format!("unstreamed b{STREAM_BATCH}"),
            StreamCell::OneStream { run: 1 } => format!("one stream b{STREAM_BATCH} runs off"),
            StreamCell::OneStream { run } => format!("one stream b{STREAM_BATCH} runs {run}"),
        }
    }

    /// Seeds `n` items of this cell on `queue` (not timed).
    pub async fn seed<S: Store>(
        &self,
        store: &S,
        queue: &QueueName,
        n: usize,
    ) -> Result<(), BenchError> {
        let streams = match self {
            StreamCell::Unstreamed => 0,
            StreamCell::OneStream { .. } => 1,
        };
        seed_streams(store, queue, n, streams).await
    }

    /// Drains the `n` seeded items of `queue` with one task and answers the time it
    /// took; fails unless every item finished exactly once.
    pub async fn drain<S: Store + Clone>(
        &self,
        store: &S,
        queue: &QueueName,
        n: usize,
    ) -> Result<Duration, BenchError> {
        let run = match self {
            StreamCell::Unstreamed => 1,
            StreamCell::OneStream { run } => *run,
        };
        let spec = DrainSpec::new(queue.clone(), n, STREAM_BATCH, 1).stream_runs(run);
        Ok(drain(store, &spec).await?.elapsed)
    }
}

/// The ratio lines of the stream-run group: runs on over runs off, and runs on over
/// the unstreamed drain.
pub fn stream_ratios() -> Vec<(String, String)> {
    let [unstreamed, off, on] = STREAM_CELLS.map(|c| c.label());
    vec![(on.clone(), off), (on, unstreamed)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_read_against_the_head_only_drain_and_the_unstreamed_one() {
        assert_eq!(
            stream_ratios(),
            vec![
                (
                    "one stream b100 runs 100".into(),
                    "one stream b100 runs off".into()
                ),
                ("one stream b100 runs 100".into(), "unstreamed b100".into()),
            ]
        );
    }

    #[tokio::test]
    async fn every_cell_drains_its_items_on_the_memory_store() {
        for cell in STREAM_CELLS {
            let store = tenure_memory::MemoryStore::default();
            let queue = crate::bench_queue().unwrap();
            cell.seed(&store, &queue, 250).await.unwrap();
            cell.drain(&store, &queue, 250).await.unwrap();
            let counts = store.queue_counts(&queue).await.unwrap();
            assert_eq!(
                counts.ready + counts.running,
                0,
                "{}: {counts:?}",
                cell.label()
            );
        }
    }
}
