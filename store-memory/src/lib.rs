//! In-memory Tenure store: every guarantee, no server, for tests and single-process use.
#![deny(missing_docs)]
