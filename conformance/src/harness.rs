//! How the suite opens stores: the one trait a store author implements.

use tenure_core::{async_trait, ManualClock, Result, Store};

/// Builds fresh, isolated stores for the suite.
///
/// Every call to [`Harness::open`] must return a store that shares no data with any
/// other call (a new schema, a new temporary file, a new memory store), so cases run in
/// parallel without seeing each other.
#[async_trait]
pub trait Harness: Send + Sync + 'static {
    /// The store under test.
    type Store: Store;

    /// A fresh, empty, isolated store whose every comparison reads `clock`.
    async fn open(&self, clock: ManualClock) -> Result<Self::Store>;

    /// A second handle onto the same data as `store` (another connection pool, another
    /// open of the same file), reading the same `clock`. Race cases claim through both.
    async fn open_peer(&self, store: &Self::Store, clock: ManualClock) -> Result<Self::Store>;

    /// A store whose backend cannot be reached (a closed port, a database taken away),
    /// so the suite can check that calls answer [`Error::Unavailable`](tenure_core::Error)
    /// and never a wrong answer such as `Follower` (G13). `Ok(None)` when the store has
    /// no backend that can go away; the report then says the case did not apply.
    async fn open_unreachable(&self, clock: ManualClock) -> Result<Option<Self::Store>>;
}
