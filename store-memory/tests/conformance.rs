//! The shared conformance suite against the memory store, every case on a fresh, isolated
//! store: the harness is `tenure_test_support::conformance::memory`.
//!
//! `cargo test -p tenure-memory --test conformance` runs every case as its own test.

fn main() -> std::process::ExitCode {
    tenure_test_support::conformance::memory::run(false)
}
