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
    /// and never a wrong answer such as `Follower` (G13).
    ///
    /// A harness that cannot offer one says so, with its reason:
    /// [`Unreachable::not_offered`]. The cases that need it then do not apply, and every
    /// run lists them at its end as not certified, with that reason.
    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<Self::Store>>;
}

/// What [`Harness::open_unreachable`] gives the suite.
#[derive(Debug)]
pub enum Unreachable<S> {
    /// A store whose backend cannot be reached.
    Store(S),
    /// The harness has no such store. Not a pass: the cases that need one are reported
    /// as not certified, with this reason.
    NotOffered {
        /// Why the harness cannot offer one (for example: "the store has no backend
        /// that can go away").
        reason: String,
    },
}

impl<S> Unreachable<S> {
    /// The harness cannot offer an unreachable store, for this reason.
    pub fn not_offered(reason: impl Into<String>) -> Self {
        Unreachable::NotOffered {
            reason: reason.into(),
        }
    }
}
