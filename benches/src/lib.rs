//! Criterion benches of claim throughput; see the `benches/` folder.
#![deny(missing_docs)]
