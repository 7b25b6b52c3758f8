//! The shared conformance suite against the Redis store again, keeping finished items
//! as `done` instead of deleting them: the cases that read finished items (counts,
//! listings, cancel, purge) see them only this way.

use std::process::ExitCode;

// The suite's own `main` is the other target's.
#[allow(dead_code)]
#[path = "conformance.rs"]
mod suite;

fn main() -> ExitCode {
    suite::run(true)
}
