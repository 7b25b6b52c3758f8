//! PostgreSQL-specific behaviour beyond the conformance suite: faults, transactional
//! enqueue, migrations, wake-ups, the stream-head write path under concurrency and
//! the stream pins of partitioned claims.
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used)]
#[path = "../common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Ctx;
use tenure_core::*;
use tenure_postgres::{PgConfig, PgStore};

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
mod transactional_enqueue;
mod transactional_finalize;
mod wakeups;
