//! The worker runtime, one test per behaviour, on MemoryStore with tokio's paused time
//! (and a manual store clock where the store's time must move on its own).

// Helpers outside #[test] functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod builder;
mod cancel;
mod drain;
mod exported;
mod finalize;
mod handler_finalized;
mod history;
mod instances;
mod limit_metrics;
mod limits;
mod lost_answer;
mod outcomes;
mod partitions;
mod periodic;
mod pipeline;
mod poll;
mod progress;
mod renewal;
mod self_stop;
mod shutdown;
mod stream_runs;
mod tasks;
mod timeout;
mod wake_health;
