//! The shared conformance suite against the sqlite store, every case on a fresh, isolated
//! store: the harness is `tenure_test_support::conformance::sqlite`.
//!
//! `cargo test -p tenure-sqlite --test conformance` runs every case as its own test.

fn main() -> std::process::ExitCode {
    tenure_test_support::conformance::sqlite::run(false)
}
