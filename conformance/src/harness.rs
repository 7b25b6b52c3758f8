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

    /// A snapshot of `store`'s data that [`Restore::restore`] puts back later: the
    /// suite's model of a failover to a replica that had not yet received the latest
    /// writes (asynchronous replication), so a claim the old primary acknowledged is
    /// lost and its attempt number is handed out again (G3:
    /// `g03_fenced_finalize::a_claim_lost_in_a_failover_leaves_its_token_refused`).
    ///
    /// Restoring must put back the data the store reads (items, their indexes) as they
    /// were, on every handle; it need not put back anything a real replica would not
    /// have either. A backend that copies its data offers it simply: copy the schema's
    /// tables, the key prefix's keys, the file's pages. The default answers
    /// [`Snapshot::NotOffered`]: the case then does not apply, and every run lists it
    /// as not certified, with the reason.
    async fn snapshot(&self, store: &Self::Store) -> Result<Snapshot> {
        let _ = store;
        Ok(Snapshot::not_offered(
            "the harness does not implement Harness::snapshot",
        ))
    }
}

/// What [`Harness::snapshot`] gives the suite.
pub enum Snapshot {
    /// The data as it was, ready to be put back.
    Taken(Box<dyn Restore>),
    /// The harness cannot take one. Not a pass: the cases that need one are reported as
    /// not certified, with this reason.
    NotOffered {
        /// Why the harness cannot take a snapshot.
        reason: String,
    },
}

impl Snapshot {
    /// A snapshot that [`Restore::restore`] puts back.
    pub fn taken(restore: impl Restore + 'static) -> Self {
        Snapshot::Taken(Box::new(restore))
    }

    /// The harness cannot take a snapshot, for this reason.
    pub fn not_offered(reason: impl Into<String>) -> Self {
        Snapshot::NotOffered {
            reason: reason.into(),
        }
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Snapshot::Taken(_) => f.write_str("Snapshot::Taken(..)"),
            Snapshot::NotOffered { reason } => f
                .debug_struct("Snapshot::NotOffered")
                .field("reason", reason)
                .finish(),
        }
    }
}

/// Puts a store's data back as a [`Snapshot`] took it.
#[async_trait]
pub trait Restore: Send + Sync {
    /// Puts the data back, replacing everything written since the snapshot.
    async fn restore(self: Box<Self>) -> Result<()>;
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
