//! The whole conformance suite against the memory store, one test per case:
//! `cargo test -p tenure-conformance --test memory` (add a filter such as `g03`).

use tenure_core::{async_trait, ManualClock, Result};
use tenure_memory::MemoryStore;

/// Fresh memory stores; a peer is a clone; the unreachable store is switched off.
struct MemoryHarness;

#[async_trait]
impl tenure_conformance::Harness for MemoryHarness {
    type Store = MemoryStore;

    async fn open(&self, clock: ManualClock) -> Result<MemoryStore> {
        Ok(MemoryStore::new(clock))
    }

    async fn open_peer(&self, store: &MemoryStore, _clock: ManualClock) -> Result<MemoryStore> {
        Ok(store.clone())
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Option<MemoryStore>> {
        let store = MemoryStore::new(clock);
        store.set_available(false);
        Ok(Some(store))
    }
}

fn main() -> std::process::ExitCode {
    tenure_conformance::main(MemoryHarness)
}
