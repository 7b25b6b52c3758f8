//! The shared conformance suite against the postgres store, every case on a fresh, isolated
//! store: the harness is `tenure_test_support::conformance::postgres`.
//!
//! `cargo test -p tenure-postgres --test conformance` runs every case as its own test.

fn main() -> std::process::ExitCode {
    tenure_test_support::conformance::postgres::run(false)
}
