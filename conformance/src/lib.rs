//! The Tenure conformance suite: proves a store, ours or yours, keeps every guarantee.
//!
//! Every guarantee of the `Store` contract (G1..G13, G15; see `tenure_core`) is a group
//! of named cases, one per behaviour: `g09_stream_fifo::retry_scheduled_item_blocks_later_items`.
//! A [`Harness`] opens a fresh, isolated store for each case and peer handles onto the
//! same data for the race cases. Cases drive time only through the [`ManualClock`] the
//! harness hands the store, so expiry is tested without sleeping.
//!
//! # Run it against your store
//!
//! In your store crate's `Cargo.toml`:
//!
//! ```toml
//! [dev-dependencies]
//! tenure-conformance = "0.1"
//!
//! [[test]]
//! name = "conformance"
//! harness = false
//! ```
//!
//! and in `tests/conformance.rs` (here with the memory store standing in for yours):
//!
//! ```no_run
//! use tenure_conformance::Unreachable;
//! use tenure_core::{async_trait, ManualClock, Result};
//! use tenure_memory::MemoryStore;
//!
//! struct MyHarness;
//!
//! #[async_trait]
//! impl tenure_conformance::Harness for MyHarness {
//!     type Store = MemoryStore;
//!     async fn open(&self, clock: ManualClock) -> Result<MemoryStore> {
//!         Ok(MemoryStore::new(clock)) // a new schema, a new temp file: nothing shared
//!     }
//!     async fn open_peer(&self, store: &MemoryStore, _: ManualClock) -> Result<MemoryStore> {
//!         Ok(store.clone()) // another pool onto the same data
//!     }
//!     async fn open_unreachable(&self, _: ManualClock) -> Result<Unreachable<MemoryStore>> {
//!         // Better: a store pointed at a closed port, `Unreachable::Store(store)`.
//!         Ok(Unreachable::not_offered("no backend that can go away"))
//!     }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     tenure_conformance::main(MyHarness)
//! }
//! ```
//!
//! Then `cargo test --test conformance` runs every case as its own test,
//! `cargo test --test conformance g03` runs one group, and `-- --list` lists them.
//! To get one [`Report`] instead (every failure, never only the first), call
//! [`run_all`] from a multi-thread `#[tokio::test]`.
//!
//! # What the report says
//!
//! - A failure names the case, what the guarantee expected and what the store did.
//! - Cases for optional features (G14 partitioned claiming, G16 and G17 queue limits,
//!   G18 fair shares) run only when
//!   [`Store::capabilities`](tenure_core::Store::capabilities) declares them; otherwise
//!   they are reported as skipped, with the missing capability. Mandatory guarantees
//!   have no such switch, and one mandatory G14 case holds a store to its declaration:
//!   without the capability a partitioned claim must answer `Unsupported`, with it the
//!   claim must be served.
//! - A case that needs something the harness cannot give (an unreachable store, when
//!   [`Harness::open_unreachable`] answers [`Unreachable::NotOffered`] with its
//!   reason) reports "did not apply": it is neither a pass nor a silent skip.
//! - Every run ends with a [`Certificate`]: the store's name, the groups passed, the
//!   cases, the capabilities declared, and one line per group not certified and why
//!   (a failure, a skip for an undeclared capability, a case that did not apply, cases
//!   filtered out). [`main`] prints it; [`Report::certificate`] builds it.
//!
//! Each group is one module named after its guarantee (`g09_stream_fifo`, a folder when
//! it holds several files) that owns its cases and lists them once; the registry names
//! every group, in order. Cases that cut across guarantees live with the one they test:
//! the keyed guarantees across queues with G9, G10, G11 and G14, one mixed batch per
//! finalize operation with G3, every behaviour-changing input varied with G2, G4, G7,
//! G8, G11, G12 and G13, and the bounds of time and of a claim's queue list with G15.
//!
//! The suite is itself tested against deliberately broken stores (this crate's
//! `tests/self_test/`, a file per guarantee): each must fail the group of the guarantee
//! it breaks.
//!
//! [`ManualClock`]: tenure_core::ManualClock
#![deny(missing_docs)]

mod case;
mod certificate;
mod check;
mod fixtures;
mod guarded;
mod harness;
mod registry;
mod run;

mod g01_exclusive_claim;
mod g02_expiry;
mod g03_fenced_finalize;
mod g04_renewal_cap;
mod g05_retry;
mod g06_stalls;
mod g07_schedule;
mod g08_order;
mod g09_stream_fifo;
mod g10_scope;
mod g11_dedup;
mod g12_instances;
mod g13_leader;
mod g14_partitioned_claiming;
mod g15_bad_input;
mod g16_concurrency_limits;
mod g17_rate_limits;
mod g18_fair_shares;
mod op_control;
mod op_history;
mod op_inspection;

pub use case::{
    Capability, Case, CaseFn, CaseFuture, CaseResult, Entry, Env, Failure, Report, Status, Verdict,
};
pub use certificate::{Certificate, StoreInfo};
pub use guarded::Guarded;
pub use harness::{Harness, Restore, Snapshot, Unreachable};
pub use registry::cases;
pub use run::{main, run_all, run_case, CASE_TIME_LIMIT};
