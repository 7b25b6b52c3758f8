//! The shared conformance suite against the Redis store again, keeping finished items
//! as `done` instead of deleting them: the cases that read finished items (counts,
//! listings, cancel, purge) see them only this way.

fn main() -> std::process::ExitCode {
    tenure_test_support::conformance::redis::run(true)
}
