//! Behaviour of the SQLite store beyond the shared conformance suite: opening, the
//! schema invariants, peers on one file, busy and missing files, transactional enqueue.
//!
//! This file holds the helpers; each test module is a file beside it.

// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::TransactionBehavior;
use tempfile::TempDir;
use tenure_core::{
    ClaimParams, DedupKey, EnqueueParams, ErrorKind, ItemState, LeaseId, LeaseToken, ManualClock,
    NewItem, OwnerId, QueueName, ScopeKey, Store, StoreExt, StreamKey, Timestamp,
};
use tenure_sqlite::{SqliteConfig, SqliteStore, SCHEMA_VERSION};

const LEASE: Duration = Duration::from_secs(30);

fn q() -> QueueName {
    QueueName::new("q").unwrap()
}

fn me(n: u32) -> OwnerId {
    OwnerId::new(format!("w{n}")).unwrap()
}

fn clock() -> ManualClock {
    ManualClock::new(Timestamp::from_micros(1_000_000_000))
}

fn db(dir: &TempDir) -> PathBuf {
    dir.path().join("work.db")
}

async fn open(path: &Path, clock: &ManualClock) -> SqliteStore {
    SqliteStore::open(SqliteConfig::new(path).clock(clock.clone()))
        .await
        .unwrap()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

mod faults;
mod g09_stream_head;
mod g10_scope_index;
mod limits;
mod migrations;
mod open;
mod partitioned;
mod peers;
mod transactional_enqueue;
mod transactional_finalize;
