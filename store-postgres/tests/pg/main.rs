//! PostgreSQL-specific behaviour beyond the conformance suite: faults, transactional
//! enqueue, migrations, wake-ups, the stream-head write path under concurrency and
//! the stream pins of partitioned claims.
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tenure_core::*;
use tenure_postgres::{PgConfig, PgStore};
use tenure_test_support::postgres::{self as common, Ctx};

const LEASE: Duration = Duration::from_secs(30);

fn q() -> QueueName {
    QueueName::new("q").unwrap()
}

fn owner(n: usize) -> OwnerId {
    OwnerId::new(format!("w{n}")).unwrap()
}

mod claim_cursors;
mod faults;
mod g09_stream_fifo;
mod limits;
mod migrations;
mod partitioned;
mod privileges;
mod schema;
mod transactional_enqueue;
mod transactional_finalize;
mod wakeups;
