//! Test fixtures shared by Tenure's crates, as a dev-dependency (never published).
//!
//! | module | feature | holds |
//! |---|---|---|
//! | `postgres` | `postgres` | the server's URL, a fresh schema per test (`postgres::PgSchema`, dropped on drop), a store on it (`postgres::Ctx`) |
//! | `redis` | `redis` | the server's URL, a fresh key prefix per test (`redis::RedisPrefix`, its keys deleted on drop), throwaway `redis-server`s: one, a primary with a replica and three sentinels, a Redis Cluster |
//! | `memory` | `memory` | a fresh memory store on a manual clock, a runner for its calls (they never wait), short constructors of names |
//! | `sqlite` | `sqlite` | a fresh database file in a temporary directory, removed on drop |
//! | [`pg_cluster`] | | throwaway PostgreSQL servers (`initdb`, a streaming standby, promotion), standard library only |
//! | [`ledger`] | | store wrappers that record what every `complete` was told |
//! | [`every`] | one per store | [`every::Place`], a fresh store of any kind named by a URL, and [`on_every_store!`], one test per store and case |
//! | [`conformance`] | one per store | the conformance harness of each store, run by its `conformance` and `conformance_keep_done` tests |
//!
//! **Servers.** Fixtures that need PostgreSQL or Redis read `TENURE_POSTGRES_URL`
//! (default `postgres://postgres@127.0.0.1:5432/test`) and `TENURE_REDIS_URL` (default
//! `redis://127.0.0.1:6379`). When a server or a server binary is missing they answer
//! `None` after printing why the test is skipped, or panic when
//! `TENURE_REQUIRE_STORES=1` (as CI sets it): [`skip`].
//!
//! A crate's tests name the stores they need:
//!
//! ```toml
//! [dev-dependencies]
//! tenure-test-support = { workspace = true, features = ["postgres"] }
//! ```
//!
//! The store modules exist with their features, so the table names them without links.
//!
//! Helpers here are test code: they panic with a message when something they set up
//! fails.
#![deny(missing_docs)]
#![allow(clippy::expect_used)]

pub mod conformance;
pub mod every;
pub mod ledger;
#[cfg(feature = "memory")]
pub mod memory;
pub mod pg_cluster;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "sqlite")]
pub mod sqlite;

/// True when a missing server must fail the run (CI sets `TENURE_REQUIRE_STORES=1`).
pub fn required() -> bool {
    std::env::var("TENURE_REQUIRE_STORES").is_ok_and(|v| v == "1")
}

/// What a fixture does when `what` (a server, a binary) is missing: panics with `why`
/// under `TENURE_REQUIRE_STORES=1`, otherwise prints that the test is skipped and
/// answers `None`.
pub fn skip<T>(what: &str, why: impl std::fmt::Display) -> Option<T> {
    assert!(
        !required(),
        "{what} is required (TENURE_REQUIRE_STORES=1): {why}"
    );
    eprintln!("skipped: {what}: {why}");
    None
}

/// A name no other run uses: `<kind>_<uuid v7>` (a schema, a key prefix).
pub fn fresh_name(kind: &str) -> String {
    format!("{kind}_{}", uuid::Uuid::now_v7().simple())
}

/// Keeps the test output free of the panics a test causes on purpose (their message
/// says "on purpose").
pub fn quiet_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
                .unwrap_or("");
            if !msg.contains("on purpose") {
                default(info);
            }
        }));
    });
}

/// Runs `f` to completion on a current-thread runtime of its own, on a thread of its
/// own: how a `Drop` cleans up a server's data from inside a test's runtime.
#[cfg(any(feature = "postgres", feature = "redis"))]
pub(crate) fn block_on_thread<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let done = std::thread::spawn(move || {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt.block_on(f()),
            Err(e) => eprintln!("cleanup: no runtime: {e}"),
        }
    })
    .join();
    if done.is_err() {
        eprintln!("cleanup panicked");
    }
}
