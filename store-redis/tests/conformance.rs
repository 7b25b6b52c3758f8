//! The shared conformance suite against the redis store, every case on a fresh, isolated
//! store: the harness is `tenure_test_support::conformance::redis`.
//!
//! `cargo test -p tenure-redis --test conformance` runs every case as its own test.

fn main() -> std::process::ExitCode {
    tenure_test_support::conformance::redis::run(false)
}
