//! The conformance harness of the memory store: every case on a new, empty store. The
//! smallest harness, and the model for a store of your own.
//!
//! `cargo test -p tenure-memory --test conformance` runs every case as its own test.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use tenure_conformance::{Restore, Snapshot, Unreachable};
use tenure_core::{async_trait, ManualClock, Result};
use tenure_memory::{MemorySnapshot, MemoryStore};

/// Opens a new, empty memory store per case; peers are clones onto the same data.
struct MemoryHarness;

#[async_trait]
impl tenure_conformance::Harness for MemoryHarness {
    type Store = MemoryStore;

    async fn open(&self, clock: ManualClock) -> Result<MemoryStore> {
        Ok(MemoryStore::new(clock).keep_done(KEEP_DONE.load(Ordering::Relaxed)))
    }

    async fn open_peer(&self, store: &MemoryStore, _clock: ManualClock) -> Result<MemoryStore> {
        // A clone reads the clock the store was opened with, which is this clock.
        Ok(store.clone())
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<MemoryStore>> {
        let store = MemoryStore::new(clock);
        store.set_available(false);
        Ok(Unreachable::Store(store))
    }

    async fn snapshot(&self, store: &MemoryStore) -> Result<Snapshot> {
        Ok(Snapshot::taken(Rewind {
            store: store.clone(),
            to: store.snapshot()?,
        }))
    }
}

/// Puts a memory store back to a snapshot, as a failover to a lagging replica would.
struct Rewind {
    store: MemoryStore,
    to: MemorySnapshot,
}

#[async_trait]
impl Restore for Rewind {
    async fn restore(self: Box<Self>) -> Result<()> {
        self.store.restore(&self.to)
    }
}

/// Whether finished items are kept as `done` instead of deleted: the
/// `conformance_keep_done` target runs the suite again with them kept.
static KEEP_DONE: AtomicBool = AtomicBool::new(false);

/// Runs the suite, keeping finished items when `keep_done`.
pub fn run(keep_done: bool) -> ExitCode {
    KEEP_DONE.store(keep_done, Ordering::Relaxed);
    tenure_conformance::main(MemoryHarness)
}
