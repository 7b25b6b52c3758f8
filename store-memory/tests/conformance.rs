//! The shared conformance suite against the memory store: every case of G1..G13, G15.
//!
//! `cargo test -p tenure-memory --test conformance` runs every case as its own test.

use tenure_conformance::{Restore, Snapshot, Unreachable};
use tenure_core::{async_trait, ManualClock, Result};
use tenure_memory::{MemorySnapshot, MemoryStore};

/// Opens a new, empty memory store per case; peers are clones onto the same data.
struct MemoryHarness;

#[async_trait]
impl tenure_conformance::Harness for MemoryHarness {
    type Store = MemoryStore;

    async fn open(&self, clock: ManualClock) -> Result<MemoryStore> {
        Ok(MemoryStore::new(clock))
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

fn main() -> std::process::ExitCode {
    tenure_conformance::main(MemoryHarness)
}
