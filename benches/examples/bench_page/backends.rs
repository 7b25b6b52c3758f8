//! The four backends of the page: how each opens a fresh store, seeds, runs its raw
//! loop and cleans up.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use sqlx::{Connection, PgConnection};
use tempfile::TempDir;
use tenure_benches::raw::memory::RawMemory;
use tenure_benches::raw::pg::{self as raw_pg, PgRaw};
use tenure_benches::raw::redis::{self as raw_redis, RedisRaw};
use tenure_benches::raw::sqlite as raw_sqlite;
use tenure_benches::{bench_queue, seed};
use tenure_memory::MemoryStore;
use tenure_postgres::{PgConfig, PgStore};
use tenure_redis::{RedisConfig, RedisStore};
use tenure_sqlite::{SqliteConfig, SqliteStore};

use crate::{Backend, Res, Sizes};

// ------------------------------------------------------------------------- memory

pub(crate) struct Memory;

impl Backend for Memory {
    type Store = MemoryStore;
    const NAME: &'static str = "memory";
    const SIZES: Sizes = Sizes {
        claim_single: 1_000_000,
        claim_batched: 2_000_000,
        burndown: 5_000_000,
        backlog: 1_000_000,
        stream: 1_000_000,
    };

    async fn open(&mut self, _: usize) -> Res<MemoryStore> {
        Ok(MemoryStore::default())
    }

    async fn close(&mut self, _: MemoryStore) -> Res<()> {
        Ok(())
    }

    async fn raw(&mut self, n: usize, batch: usize, workers: usize) -> Res<Duration> {
        let raw = Arc::new(RawMemory::with_items(n));
        let done = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let tasks: Vec<_> = (0..workers)
            .map(|w| {
                let (raw, done) = (raw.clone(), done.clone());
                tokio::spawn(async move {
                    let owner: Arc<str> = Arc::from(format!("w{w}"));
                    loop {
                        let claimed = raw.claim(&owner, batch);
                        if claimed.is_empty() {
                            return true;
                        }
                        let accepted = raw.finalize(&claimed);
                        done.fetch_add(accepted, Ordering::Relaxed);
                        if accepted != claimed.len() as u64 {
                            return false;
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            if !t.await? {
                return Err("a raw finalize refused an item just claimed".into());
            }
        }
        let elapsed = start.elapsed();
        check_done(&done, n)?;
        Ok(elapsed)
    }
}

pub(crate) fn check_done(done: &AtomicU64, n: usize) -> Res<()> {
    let finished = done.load(Ordering::Relaxed);
    if finished != n as u64 {
        return Err(format!("{finished} of {n} raw items finished").into());
    }
    Ok(())
}

// ------------------------------------------------------------------------- SQLite

pub(crate) struct Sqlite {
    dir: TempDir,
    files: usize,
}

impl Sqlite {
    pub(crate) fn new() -> Res<Self> {
        Ok(Sqlite {
            dir: TempDir::new()?,
            files: 0,
        })
    }

    pub(crate) fn next_path(&mut self, name: &str) -> PathBuf {
        self.files += 1;
        self.dir.path().join(format!("{name}{}.db", self.files))
    }
}

pub(crate) fn remove_sqlite_files(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

impl Backend for Sqlite {
    type Store = SqliteStore;
    const NAME: &'static str = "SQLite";
    const SIZES: Sizes = Sizes {
        claim_single: 10_000,
        claim_batched: 200_000,
        burndown: 600_000,
        backlog: 200_000,
        stream: 50_000,
    };

    async fn open(&mut self, _: usize) -> Res<SqliteStore> {
        let path = self.next_path("store");
        Ok(SqliteStore::open(SqliteConfig::new(path)).await?)
    }

    async fn close(&mut self, store: SqliteStore) -> Res<()> {
        let path = store.path().to_owned();
        store.close().await?;
        remove_sqlite_files(&path);
        Ok(())
    }

    async fn raw(&mut self, n: usize, batch: usize, workers: usize) -> Res<Duration> {
        let path = self.next_path("raw");
        raw_sqlite::seed(&path, n)?;
        let done = AtomicU64::new(0);
        let barrier = Barrier::new(workers + 1);
        let failed = AtomicU64::new(0);
        let start = std::thread::scope(|s| {
            for w in 0..workers {
                let (path, done, barrier, failed) = (&path, &done, &barrier, &failed);
                s.spawn(move || {
                    let Ok(mut conn) = raw_sqlite::connect(path, false) else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        barrier.wait();
                        return;
                    };
                    barrier.wait();
                    let owner = format!("w{w}");
                    loop {
                        let claimed = match raw_sqlite::claim(&mut conn, &owner, batch) {
                            Ok(c) if c.is_empty() => return,
                            Ok(c) => c,
                            Err(_) => break,
                        };
                        match raw_sqlite::finalize(&mut conn, &claimed) {
                            Ok(f) if f == claimed.len() => {
                                done.fetch_add(f as u64, Ordering::Relaxed);
                            }
                            _ => break,
                        }
                    }
                    failed.fetch_add(1, Ordering::Relaxed);
                });
            }
            barrier.wait();
            // The scope joins every thread before it returns.
            Instant::now()
        });
        let elapsed = start.elapsed();
        remove_sqlite_files(&path);
        if failed.load(Ordering::Relaxed) > 0 {
            return Err("a raw SQLite loop failed".into());
        }
        check_done(&done, n)?;
        Ok(elapsed)
    }
}

// --------------------------------------------------------------------- PostgreSQL

pub(crate) struct Postgres {
    url: String,
    admin: PgConnection,
}

/// The pool of the Worker cells' stores: enough for 4 claimers, or for a worker's
/// claim, finalize, renewal and heartbeat at once.
pub(crate) const CELL_POOL: usize = 8;

impl Postgres {
    pub(crate) async fn connect() -> Res<Self> {
        let url = std::env::var("TENURE_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let admin = PgConnection::connect(&url)
            .await
            .map_err(|e| format!("PostgreSQL at {url} is unreachable: {e}"))?;
        Ok(Postgres { url, admin })
    }

    pub(crate) async fn exec(&mut self, sql: &str) -> Res<()> {
        sqlx::Executor::execute(&mut self.admin, sql).await?;
        Ok(())
    }

    pub(crate) async fn store(&mut self, pool: usize, listen: bool) -> Res<PgStore> {
        let schema = format!("bench_{}", uuid::Uuid::now_v7().simple());
        Ok(PgStore::connect(
            PgConfig::new(self.url.clone())
                .schema(&schema)
                .max_connections(u32::try_from(pool)?)
                .listen(listen),
        )
        .await?)
    }
}

impl Backend for Postgres {
    type Store = PgStore;
    const NAME: &'static str = "PostgreSQL";
    const SIZES: Sizes = Sizes {
        claim_single: 5_000,
        claim_batched: 100_000,
        burndown: 200_000,
        backlog: 100_000,
        stream: 5_000,
    };

    async fn open(&mut self, pool: usize) -> Res<PgStore> {
        self.store(pool, false).await
    }

    async fn open_live(&mut self) -> Res<PgStore> {
        self.store(CELL_POOL, true).await
    }

    async fn seeded(&mut self, store: &PgStore) -> Res<()> {
        // One statement each: VACUUM cannot run inside a multi-statement query.
        for table in ["items", "streams"] {
            self.exec(&format!("VACUUM ANALYZE {}.{table}", store.schema()))
                .await?;
        }
        Ok(())
    }

    async fn close(&mut self, store: PgStore) -> Res<()> {
        let schema = store.schema().to_owned();
        store.close().await;
        tenure_test_support::postgres::drop_schema(&mut self.admin, &schema).await;
        Ok(())
    }

    async fn raw(&mut self, n: usize, batch: usize, workers: usize) -> Res<Duration> {
        // The raw loop runs on the store's own table: seeded through the store.
        let store = self.store(2, false).await?;
        seed(&store, &bench_queue()?, n).await?;
        self.seeded(&store).await?;
        let mut conns = Vec::with_capacity(workers);
        for _ in 0..workers {
            conns.push(PgConnection::connect(&self.url).await?);
        }
        let raw = PgRaw::new(store.schema());
        let drained = raw_pg::drain(&raw, conns, n, batch).await;
        self.close(store).await?;
        let (elapsed, conns) = drained?;
        for c in conns {
            c.close().await?;
        }
        Ok(elapsed)
    }

    async fn version(&mut self) -> Res<Option<String>> {
        let (v,): (String,) = sqlx::query_as("SHOW server_version")
            .fetch_one(&mut self.admin)
            .await?;
        Ok(Some(format!("PostgreSQL {v}")))
    }
}

// -------------------------------------------------------------------------- Redis

pub(crate) struct Redis {
    url: String,
    admin: MultiplexedConnection,
}

impl Redis {
    pub(crate) async fn connect() -> Res<Self> {
        let url =
            std::env::var("TENURE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let client = redis::Client::open(url.clone())?;
        let admin = tokio::time::timeout(
            Duration::from_secs(3),
            client.get_multiplexed_async_connection(),
        )
        .await
        .map_err(|_| format!("Redis at {url}: connecting timed out"))?
        .map_err(|e| format!("Redis at {url} is unreachable: {e}"))?;
        Ok(Redis { url, admin })
    }

    pub(crate) fn prefix() -> String {
        format!("bench_{}", uuid::Uuid::now_v7().simple())
    }

    /// Deletes every key under `{prefix}:`.
    pub(crate) async fn delete_prefix(&mut self, prefix: &str) -> Res<()> {
        let pattern = format!("{{{prefix}}}:*");
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut self.admin)
                .await?;
            if !keys.is_empty() {
                let _: i64 = redis::cmd("UNLINK")
                    .arg(&keys)
                    .query_async(&mut self.admin)
                    .await?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }
}

impl Backend for Redis {
    type Store = RedisStore;
    const NAME: &'static str = "Redis";
    const SIZES: Sizes = Sizes {
        claim_single: 20_000,
        claim_batched: 200_000,
        burndown: 200_000,
        backlog: 100_000,
        stream: 20_000,
    };

    async fn open(&mut self, _: usize) -> Res<RedisStore> {
        Ok(RedisStore::connect(
            RedisConfig::new(self.url.clone())
                .prefix(&Self::prefix())
                .listen(false)
                .response_timeout(Duration::from_secs(120)),
        )
        .await?)
    }

    async fn open_live(&mut self) -> Res<RedisStore> {
        Ok(RedisStore::connect(RedisConfig::new(self.url.clone()).prefix(&Self::prefix())).await?)
    }

    async fn close(&mut self, store: RedisStore) -> Res<()> {
        store.remove_prefix().await?;
        Ok(())
    }

    async fn raw(&mut self, n: usize, batch: usize, workers: usize) -> Res<Duration> {
        let prefix = Self::prefix();
        let raw = RedisRaw::new(&prefix);
        raw.seed(&mut self.admin, n).await?;
        let client = redis::Client::open(self.url.clone())?;
        let mut conns = Vec::with_capacity(workers);
        for _ in 0..workers {
            conns.push(client.get_multiplexed_async_connection().await?);
        }
        let drained = raw_redis::drain(&raw, conns, n, batch).await;
        self.delete_prefix(&prefix).await?;
        Ok(drained?)
    }

    async fn version(&mut self) -> Res<Option<String>> {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut self.admin)
            .await?;
        Ok(info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .map(|v| format!("Redis {}", v.trim())))
    }
}
