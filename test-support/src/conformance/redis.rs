//! The conformance harness of the Redis store: every case on a fresh key prefix
//! (random), peers as second stores (their own connections) on that prefix,
//! unreachable as a store aimed at a closed port. The prefixes' keys are deleted when
//! the run ends.
//!
//! The server comes from `TENURE_REDIS_URL` (default `redis://127.0.0.1:6379`). When
//! it is missing the run fails if `TENURE_REQUIRE_STORES=1` and is otherwise skipped
//! with a message.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_conformance::{Restore, Snapshot, Unreachable};
use tenure_core::{async_trait, ManualClock, Result};
use tenure_redis::{RedisConfig, RedisStore};

use crate::redis::url;

/// Finished items are kept as `done` when the run keeps them ([`run`]).
fn configured(config: RedisConfig) -> RedisConfig {
    config.keep_done(KEEP_DONE.load(Ordering::Relaxed))
}

struct RedisHarness {
    prefixes: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl tenure_conformance::Harness for RedisHarness {
    type Store = RedisStore;

    async fn open(&self, clock: ManualClock) -> Result<RedisStore> {
        let prefix = format!("c_{}", uuid::Uuid::now_v7().simple());
        if let Ok(mut p) = self.prefixes.lock() {
            p.push(prefix.clone());
        }
        RedisStore::connect(configured(
            RedisConfig::new(url()).prefix(&prefix).clock(clock),
        ))
        .await
    }

    async fn open_peer(&self, store: &RedisStore, clock: ManualClock) -> Result<RedisStore> {
        RedisStore::connect(configured(
            RedisConfig::new(url())
                .prefix(store.prefix())
                .clock(clock)
                .listen(false),
        ))
        .await
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<RedisStore>> {
        // Port 1 refuses connections: every call answers Unavailable at once.
        let store = RedisStore::connect(
            RedisConfig::new("redis://127.0.0.1:1")
                .clock(clock)
                .connect_timeout(Duration::from_millis(500))
                .listen(false),
        )
        .await?;
        Ok(Unreachable::Store(store))
    }

    async fn snapshot(&self, store: &RedisStore) -> Result<Snapshot> {
        // Every key of the prefix, as DUMP serialises it.
        let mut conn = admin().await?;
        let mut keys = Vec::new();
        for key in prefix_keys(&mut conn, store.prefix()).await? {
            let dump: Vec<u8> = redis::cmd("DUMP")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .map_err(internal)?;
            keys.push((key, dump));
        }
        Ok(Snapshot::taken(Rewind {
            prefix: store.prefix().to_owned(),
            keys,
        }))
    }
}

fn internal(e: impl std::fmt::Display) -> tenure_core::Error {
    tenure_core::Error::internal("redis", e.to_string())
}

async fn admin() -> Result<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(url()).map_err(internal)?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(internal)
}

/// The keys of `prefix` (`{prefix}` and the keys under it), by SCAN.
async fn prefix_keys(
    conn: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
) -> Result<Vec<String>> {
    let root = format!("{{{prefix}}}");
    let mut out = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{root}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .map_err(internal)?;
        out.extend(keys);
        if next == 0 {
            return Ok(out);
        }
        cursor = next;
    }
}

/// Puts a prefix's keys back as DUMP took them, in one MULTI, after deleting every key
/// written since.
struct Rewind {
    prefix: String,
    keys: Vec<(String, Vec<u8>)>,
}

#[async_trait]
impl Restore for Rewind {
    async fn restore(self: Box<Self>) -> Result<()> {
        let mut conn = admin().await?;
        let now = prefix_keys(&mut conn, &self.prefix).await?;
        let mut pipe = redis::pipe();
        pipe.atomic();
        if !now.is_empty() {
            pipe.cmd("DEL").arg(&now).ignore();
        }
        for (key, dump) in &self.keys {
            pipe.cmd("RESTORE")
                .arg(key)
                .arg(0)
                .arg(dump)
                .arg("REPLACE")
                .ignore();
        }
        pipe.query_async::<()>(&mut conn).await.map_err(internal)
    }
}

/// Runs `f` with a plain connection on a small runtime of its own.
fn with_admin<T>(
    f: impl AsyncFnOnce(&mut redis::aio::MultiplexedConnection) -> T,
) -> std::result::Result<T, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let client = redis::Client::open(url()).map_err(|e| e.to_string())?;
        let mut conn = tokio::time::timeout(
            Duration::from_secs(3),
            client.get_multiplexed_async_connection(),
        )
        .await
        .map_err(|_| "connecting timed out".to_owned())?
        .map_err(|e| e.to_string())?;
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        Ok(f(&mut conn).await)
    })
}

/// Whether finished items are kept as `done` instead of deleted: the
/// `conformance_keep_done` target runs the suite again with them kept.
static KEEP_DONE: AtomicBool = AtomicBool::new(false);

/// Runs the suite, keeping finished items when `keep_done`.
pub fn run(keep_done: bool) -> ExitCode {
    KEEP_DONE.store(keep_done, Ordering::Relaxed);
    if let Err(e) = with_admin(async |_| ()) {
        return super::server_missing("Redis", &url(), "TENURE_REDIS_URL", &e);
    }
    let prefixes = Arc::new(Mutex::new(Vec::new()));
    let code = tenure_conformance::main(RedisHarness {
        prefixes: prefixes.clone(),
    });
    let names = prefixes.lock().map(|p| p.clone()).unwrap_or_default();
    let deleted = with_admin(async |conn| delete_prefixes(conn, &names).await);
    match deleted {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("could not delete the case prefixes: {e}"),
        Err(e) => eprintln!("could not delete the case prefixes: {e}"),
    }
    code
}

/// Deletes every key of the given prefixes: one SCAN over the keyspace (a test aid,
/// never on the store's own paths).
async fn delete_prefixes(
    conn: &mut redis::aio::MultiplexedConnection,
    prefixes: &[String],
) -> redis::RedisResult<()> {
    let roots: std::collections::HashSet<String> =
        prefixes.iter().map(|p| format!("{{{p}}}")).collect();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("{c_*")
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        let ours: Vec<&String> = keys
            .iter()
            .filter(|k| {
                k.split_once(':')
                    .is_some_and(|(root, _)| roots.contains(root))
            })
            .collect();
        if !ours.is_empty() {
            let _: i64 = redis::cmd("UNLINK").arg(ours).query_async(conn).await?;
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    Ok(())
}
