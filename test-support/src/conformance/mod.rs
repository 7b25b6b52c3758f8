//! The conformance harness of each store: how a case opens a fresh, isolated store, a
//! peer on its data, an unreachable one and a snapshot. Each store's tests
//! `conformance` and `conformance_keep_done` are one line: `run(false)` and
//! `run(true)`, the second keeping finished items as `done` instead of deleting them
//! (the cases that read finished items see them only then).

#[cfg(feature = "memory")]
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "sqlite")]
pub mod sqlite;
