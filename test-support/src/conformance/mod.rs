//! The conformance harness of each store: how a case opens a fresh, isolated store, a
//! peer on its data, an unreachable one and a snapshot. Each store's tests
//! `conformance` and `conformance_keep_done` are one line: `run(false)` and
//! `run(true)`, the second keeping finished items as `done` instead of deleting them
//! (the cases that read finished items see them only then).

#[cfg(feature = "memory")]
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "sqlite")]
pub mod sqlite;

/// What a harness answers when its server (`what` at `url`, set with `var`) does not:
/// a failure under `TENURE_REQUIRE_STORES=1`, otherwise success after saying why the
/// suite was skipped.
#[cfg(any(feature = "postgres", feature = "redis"))]
pub(crate) fn server_missing(what: &str, url: &str, var: &str, e: &str) -> std::process::ExitCode {
    if crate::required() {
        eprintln!("{what} at {url} is required (TENURE_REQUIRE_STORES=1): {e}");
        return std::process::ExitCode::FAILURE;
    }
    eprintln!(
        "skipped: {what} at {url} is unreachable ({e}); set {var}, or \
         TENURE_REQUIRE_STORES=1 to fail instead"
    );
    std::process::ExitCode::SUCCESS
}
