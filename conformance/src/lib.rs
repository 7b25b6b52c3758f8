//! The Tenure conformance suite: proves a store, ours or yours, keeps every guarantee.
#![deny(missing_docs)]

mod harness;

pub use harness::Harness;
