//! In-memory Tenure store: every guarantee, no server, for tests and single-process use.
//!
//! [`MemoryStore`] keeps G1..G18, the optional G14 partitioned claiming and G16..G18
//! queue limits and fair shares included, by
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
//! # Layout of this crate
//!
//! Every store crate has the same shape, so reading one means reading all:
//!
//! - `lib.rs`: the crate docs and the public exports, no logic;
//! - `config.rs`: what configures the store;
//! - `error.rs`: the backend's errors mapped into [`tenure_core::Error`];
//! - `store/`: the contract. `store/mod.rs` holds the store type and its
//!   [`Base`](tenure_core::contract::Base) impl (name, capabilities, limits, wake
//!   signal); each group of [`tenure_core::contract`] is implemented in a file of its
//!   own: `store/claim.rs` ([`Claims`](tenure_core::contract::Claims): enqueue and
//!   claim), `store/finalize.rs` (renew, complete, fail, release), `store/recovery.rs`
//!   (expired leases, purge), `store/instances.rs` (instances and leader),
//!   `store/inspect.rs` (dead items, reads, listings, cancel, pause) and
//!   `store/limits.rs` (queue limits). Core's [`Store`](tenure_core::Store) validates
//!   every params struct before these see it;
//! - the schema or scripts, in files of their own;
//! - `tx.rs`, where the store runs inside the application's own transaction.
//!
//! Here:
//!
//! | file | holds |
//! |---|---|
//! | `lib.rs` | these docs and the exports |
//! | `config.rs` | [`MemoryStore`]'s constructors, which are its configuration: a clock, the [`Limits`](tenure_core::Limits), [`MemoryStore::keep_done`] |
//! | `error.rs` | no mapping: with no backend, every error is one of [`tenure_core::Error`]'s own, made where it arises. It holds the store's name in errors and the two errors of its own conditions (a lock poisoned by a panic, the store switched off) |
//! | `store/mod.rs` | [`MemoryStore`], [`MemorySnapshot`], the test aids, and the `Base` impl |
//! | `store/claim.rs`, `store/finalize.rs`, `store/recovery.rs`, `store/instances.rs`, `store/inspect.rs` | one impl per contract group (`Claims`, `Finalize`, `Recovery`, `Instances`, `Inspect`): each method makes one call into the state under the lock |
//! | `state/mod.rs` | the schema: the data and its indexes |
//! | `state/claim.rs`, `state/finalize.rs`, `state/recovery.rs`, `state/instances.rs`, `state/inspect.rs` | every operation as a synchronous function on the data, by the same groups |
//! | `state/ready.rs`, `state/running.rs` | the claim index of ready items, and the lazy indexes of running items (by expiry, by owner) |
//! | `store/limits.rs`, `state/limits.rs` | queue limits and fair shares (G16, G17, G18): the gate every claim passes candidates through, the candidates it parks, the fair-share tags |
//! | `tests.rs` | tests that read the internals |
//!
//! There is no `tx.rs`: a memory store has no transaction of the application's to join.
#![deny(missing_docs)]

mod config;
mod error;
mod state;
mod store;

pub use config::URL_SCHEMES;
pub use store::{MemorySnapshot, MemoryStore};

#[cfg(test)]
mod tests;
