//! Redis fixtures: the shared server's URL, a fresh key prefix per test (its keys
//! deleted on drop) and stores on it; throwaway servers in [`servers`] and
//! [`cluster`].

pub mod cluster;
pub mod servers;

pub use cluster::TempCluster;
pub use servers::{
    admin, ask, eventually, free_port, have, info_field, wait_linked, SentinelSet, TempRedis,
};

use tenure_redis::{RedisConfig, RedisStore};

/// `TENURE_REDIS_URL`, or the local default.
pub fn url() -> String {
    std::env::var("TENURE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// `url` with `tenure_prefix=<prefix>` added, as `tenure::open` and the CLI read it.
pub fn url_with_prefix(url: &str, prefix: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}tenure_prefix={prefix}")
}

/// A fresh key prefix on the shared server; its keys (`{prefix}` and every key under
/// it) are deleted when the value is dropped, also when the test panics.
#[derive(Debug)]
pub struct RedisPrefix {
    name: String,
}

impl RedisPrefix {
    /// A fresh prefix `<kind>_<uuid>`, or `None` (after saying why) when the server
    /// does not answer and none is required.
    pub async fn new(kind: &str) -> Option<RedisPrefix> {
        let client = redis::Client::open(url()).expect("a Redis URL");
        let answer = tokio::time::timeout(std::time::Duration::from_secs(3), async {
            let mut conn = client.get_multiplexed_async_connection().await?;
            redis::cmd("PING").query_async::<String>(&mut conn).await
        })
        .await;
        match answer {
            Ok(Ok(_)) => Some(RedisPrefix {
                name: crate::fresh_name(kind),
            }),
            Ok(Err(e)) => unreachable_server(e),
            Err(_) => unreachable_server("connecting timed out"),
        }
    }

    /// The prefix.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's URL naming this prefix (`tenure_prefix=`).
    pub fn url(&self) -> String {
        url_with_prefix(&url(), &self.name)
    }
}

impl Drop for RedisPrefix {
    fn drop(&mut self) {
        let prefixes = vec![std::mem::take(&mut self.name)];
        crate::block_on_thread(move || async move {
            if let Err(e) = delete_prefixes(&url(), &prefixes).await {
                eprintln!("could not delete the keys of {prefixes:?}: {e}");
            }
        });
    }
}

fn unreachable_server<T>(e: impl std::fmt::Display) -> Option<T> {
    crate::skip(
        &format!("Redis at {}", url()),
        format!(
            "unreachable ({e}); set TENURE_REDIS_URL, or TENURE_REQUIRE_STORES=1 to fail instead"
        ),
    )
}

/// Deletes every key of the given prefixes on the server at `url`: SCAN over each
/// prefix's keys (a test aid, never on the store's own paths).
pub async fn delete_prefixes(url: &str, prefixes: &[String]) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    for prefix in prefixes {
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{{{prefix}}}*"))
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await?;
            if !keys.is_empty() {
                let _: i64 = redis::cmd("UNLINK")
                    .arg(&keys)
                    .query_async(&mut conn)
                    .await?;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(())
}

/// A store on the shared server under a fresh prefix `<kind>_<uuid>`, on `clock`,
/// with the listener off, and its prefix (deleted when dropped); `None` as
/// [`on_shared_server`] answers it.
pub async fn on_fresh_prefix(
    kind: &str,
    clock: &tenure_core::ManualClock,
) -> Option<(RedisStore, RedisPrefix)> {
    let prefix = RedisPrefix::new(kind).await?;
    let store = on_shared_server(
        RedisConfig::new(url())
            .prefix(prefix.name())
            .clock(clock.clone())
            .listen(false),
    )
    .await?;
    Some((store, prefix))
}

/// A store on the shared server (`TENURE_REDIS_URL`) with `config`'s settings, or
/// `None` (after printing why) when the server does not answer and none is required.
pub async fn on_shared_server(config: RedisConfig) -> Option<RedisStore> {
    let store = RedisStore::connect(config).await.expect("connect");
    if let Err(e) = store.ping().await {
        return unreachable_server(e);
    }
    Some(store)
}

impl std::ops::Deref for RedisPrefix {
    type Target = str;

    fn deref(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Display for RedisPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}
