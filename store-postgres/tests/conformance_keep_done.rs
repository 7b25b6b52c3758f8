//! The shared conformance suite against the PostgreSQL store again, keeping finished items
//! as `done` instead of deleting them: the cases that read finished items (counts,
//! listings, cancel, purge) see them only this way.

fn main() -> std::process::ExitCode {
    tenure_test_support::conformance::postgres::run(true)
}
