//! The shared server's URL and stores on fresh prefixes; the throwaway servers of
//! `support` (the fault, failover and durability tests).
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
pub mod support;

#[allow(unused_imports)]
pub use support::{admin, required, TempRedis};

/// `TENURE_REDIS_URL`, or the local default.
pub fn url() -> String {
    std::env::var("TENURE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A store on the shared server under a fresh prefix `<kind>_<uuid>`, on `clock`, with
/// the listener off, and its prefix; `None` as [`on_shared_server`] answers it.
pub async fn on_fresh_prefix(
    kind: &str,
    clock: &tenure_core::ManualClock,
) -> Option<(tenure_redis::RedisStore, String)> {
    let prefix = format!("{kind}_{}", uuid::Uuid::now_v7().simple());
    let store = on_shared_server(
        tenure_redis::RedisConfig::new(url())
            .prefix(&prefix)
            .clock(clock.clone())
            .listen(false),
    )
    .await?;
    Some((store, prefix))
}

/// A store on the shared server (`TENURE_REDIS_URL`) with `config`'s settings, or
/// `None` (after printing why) when the server does not answer and none is required.
pub async fn on_shared_server(
    config: tenure_redis::RedisConfig,
) -> Option<tenure_redis::RedisStore> {
    let store = tenure_redis::RedisStore::connect(config).await.unwrap();
    if let Err(e) = store.ping().await {
        assert!(!required(), "Redis at {} is required: {e}", url());
        eprintln!("skipped: Redis at {} is unreachable ({e})", url());
        return None;
    }
    Some(store)
}
