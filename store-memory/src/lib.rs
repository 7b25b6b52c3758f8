//! In-memory Tenure store: every guarantee, no server, for tests and single-process use.
//!
//! [`MemoryStore`] keeps G1..G15, the optional G14 partitioned claiming included, by
//! running the pure state machine of [`tenure_core::machine`] directly: every transition a store method
//! makes is one call to the machine function of the same name, under one lock.
//!
//! ```
//! # async fn demo() -> tenure_core::Result<()> {
//! use std::time::Duration;
//! use tenure_core::{NewItem, OwnerId, QueueName, StoreExt};
//! use tenure_memory::MemoryStore;
//!
//! let store = MemoryStore::default();
//! let queue = QueueName::new("emails")?;
//! store.enqueue_one(NewItem::new(queue.clone(), b"hi".to_vec())).await?;
//! let me = OwnerId::new("worker-1")?;
//! let lease = store.claim_one(queue, me, Duration::from_secs(30)).await?;
//! if let Some(lease) = lease {
//!     store.complete_one(lease.token).await?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Cost
//!
//! Claims never scan. Claimable items are indexed by `(priority, run_at, enqueue
//! order)`; items waiting for their `run_at`, behind their stream's head or behind a
//! busy scope sit in other indexes and are not looked at, so claiming `B` items costs
//! about `O(B log n)`, plus `O(log n)` for each expired lease the claim recovers and
//! each scheduled item that has come due since the last claim (each is moved once).
//! Recovering `k` expired leases costs `O(k log n)`; evicting an instance costs its
//! running items. `queue_counts` visits the queue's own items, as a SQL count would.
//!
//! Keys that arrive in claim order (due items at one priority) are pushed and popped
//! at the ends of a deque rather than kept in a tree. The running items' indexes (by
//! expiry, by owner) are lazy: a claim writes a record into each and a finalize
//! touches neither; records of finished leases are skipped when met and swept once
//! they outnumber twice the running items, which costs `O(1)` per claim amortized and
//! keeps their memory `O(running)`. `lease_list` sorts the queue's live records per
//! page, as `item_list` sorts its items.
//!
//! # Concurrency
//!
//! All data sits behind one [`std::sync::Mutex`]. Every method does all its work
//! synchronously inside the lock and never holds it across an `.await`, so a claim,
//! a recovery and a complete are each atomic (G1, G3). Clones of a store are handles
//! onto the same data.
//!
//! # Finished items
//!
//! By default a completed item is deleted at once, as the SQL stores do, so
//! [`Store::item_get`](tenure_core::Store::item_get) answers `None` for it.
//! [`MemoryStore::keep_done`] keeps finished items as
//! [`ItemState::Done`](tenure_core::ItemState::Done) until
//! [`Store::purge`](tenure_core::Store::purge).
//!
//! # Keys
//!
//! Stream and scope keys are global, as the contract states them: a stream spans
//! queues, and one running item of a scope blocks that scope in every queue. Dedup keys
//! are per queue.
//!
//! # Files
//!
//! The store crates share one shape (crate docs, config, errors, the `Store` impl, the
//! schema), so reading one means reading all. Here:
//!
//! | file | holds |
//! |---|---|
//! | `lib.rs` | these docs and the [`MemoryStore`] type |
//! | `store.rs` | [`MemoryStore`]'s constructors, which are its configuration (a clock, the [`Limits`]), and its `Store` impl, the operations in contract order |
//! | `state.rs` | the schema: the data and its indexes, and every operation as a synchronous function on them |
//! | `state/operate.rs` | the operator's operations on the same data |
//! | `state/ready.rs`, `state/running.rs` | the claim index of ready items, and the lazy indexes of running items (by expiry, by owner) |
//! | `tests.rs` | tests that read the internals |
//!
//! There is no `error.rs`: with no backend, every error is one of
//! [`tenure_core::Error`]'s own.
#![deny(missing_docs)]

mod state;
mod store;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tenure_core::{Limits, SharedClock, WakeSignal};

use crate::state::State;

/// The backend name in errors and reports.
const NAME: &str = "memory";

/// An in-memory [`Store`](tenure_core::Store): every guarantee of G1..G13 and G15, no
/// server.
///
/// Cloning gives a second handle onto the same data (the conformance suite's peer
/// handle). Every comparison reads the one [`Clock`](tenure_core::Clock) given at
/// construction.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

/// Everything a [`MemoryStore`] held at one instant: see [`MemoryStore::snapshot`].
pub struct MemorySnapshot(Box<State>);

impl std::fmt::Debug for MemorySnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySnapshot").finish_non_exhaustive()
    }
}

struct Inner {
    clock: SharedClock,
    limits: Limits,
    available: AtomicBool,
    wake: WakeSignal,
    state: Mutex<State>,
}

#[cfg(test)]
mod tests;
