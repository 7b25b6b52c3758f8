//! Shared by the umbrella crate's tests: every landed store opened by URL, so the
//! worker runtime runs on each through `Arc<dyn Store>`.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use sqlx::Connection;
use tenure::{DynStore, Error};

/// The stores the end-to-end tests run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Memory,
    Sqlite,
    Postgres,
    Redis,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::Redis => "redis",
        }
    }
}

/// `TENURE_POSTGRES_URL`, or the local default.
pub fn pg_url() -> String {
    std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// `TENURE_REDIS_URL`, or the local default.
pub fn redis_url() -> String {
    std::env::var("TENURE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// True when a missing server must fail the run (CI sets `TENURE_REQUIRE_STORES=1`).
pub fn required() -> bool {
    std::env::var("TENURE_REQUIRE_STORES").is_ok_and(|v| v == "1")
}

/// A place for one test's data: a temp dir for SQLite, a fresh schema for Postgres.
/// Dropping the schema is [`Place::cleanup`]'s job.
pub struct Place {
    pub backend: Backend,
    /// The URL every handle of this place opens (`memory://` gets one shared handle).
    pub url: String,
    pub schema: Option<String>,
    /// The Redis key prefix, if any (its keys are deleted by [`Place::cleanup`]).
    pub prefix: Option<String>,
    _dir: Option<tempfile::TempDir>,
    memory: Option<DynStore>,
}

impl Place {
    /// A fresh place, or `None` (after printing why) when Postgres is unreachable and
    /// not required.
    pub async fn new(backend: Backend) -> Option<Place> {
        Place::with_dir(backend, None).await
    }

    /// Like [`Place::new`], with the SQLite file in `dir` if given.
    pub async fn with_dir(backend: Backend, dir: Option<PathBuf>) -> Option<Place> {
        match backend {
            Backend::Memory => Some(Place {
                backend,
                url: "memory://".into(),
                schema: None,
                prefix: None,
                _dir: None,
                memory: Some(tenure::open("memory://").await.unwrap()),
            }),
            Backend::Sqlite => {
                let (tmp, dir) = match dir {
                    Some(d) => (None, d),
                    None => {
                        let t = tempfile::tempdir().unwrap();
                        let p = t.path().to_path_buf();
                        (Some(t), p)
                    }
                };
                let url = format!("sqlite://{}", dir.join("work.db").display());
                Some(Place {
                    backend,
                    url,
                    schema: None,
                    prefix: None,
                    _dir: tmp,
                    memory: None,
                })
            }
            Backend::Postgres => {
                if let Err(e) = sqlx::PgConnection::connect(&pg_url()).await {
                    if required() {
                        panic!(
                            "PostgreSQL at {} is required (TENURE_REQUIRE_STORES=1): {e}",
                            pg_url()
                        );
                    }
                    eprintln!(
                        "skipped: PostgreSQL at {} is unreachable ({e}); set TENURE_POSTGRES_URL, \
                         or TENURE_REQUIRE_STORES=1 to fail instead",
                        pg_url()
                    );
                    return None;
                }
                let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
                let base = pg_url();
                let sep = if base.contains('?') { '&' } else { '?' };
                Some(Place {
                    backend,
                    url: format!("{base}{sep}tenure_schema={schema}"),
                    schema: Some(schema),
                    prefix: None,
                    _dir: None,
                    memory: None,
                })
            }
            Backend::Redis => {
                let prefix = format!("t_{}", uuid::Uuid::now_v7().simple());
                let base = redis_url();
                let sep = if base.contains('?') { '&' } else { '?' };
                let url = format!("{base}{sep}tenure_prefix={prefix}");
                if let Err(e) = tenure::open(&url).await {
                    if required() {
                        panic!("Redis at {base} is required (TENURE_REQUIRE_STORES=1): {e}");
                    }
                    eprintln!(
                        "skipped: Redis at {base} is unreachable ({e}); set TENURE_REDIS_URL, \
                         or TENURE_REQUIRE_STORES=1 to fail instead"
                    );
                    return None;
                }
                Some(Place {
                    backend,
                    url,
                    schema: None,
                    prefix: Some(prefix),
                    _dir: None,
                    memory: None,
                })
            }
        }
    }

    /// A new handle onto this place's data: a peer (its own SQLite writer, its own
    /// Postgres pool), or the shared handle for memory.
    pub async fn open(&self) -> Result<DynStore, Error> {
        match &self.memory {
            Some(m) => Ok(m.clone()),
            None => tenure::open(&self.url).await,
        }
    }

    /// Drops the Postgres schema or deletes the Redis prefix's keys, if any.
    pub async fn cleanup(&self) {
        if let Some(prefix) = &self.prefix {
            let client = redis::Client::open(redis_url()).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let pattern = format!("{{{prefix}}}:*");
            let mut cursor: u64 = 0;
            loop {
                let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                if !keys.is_empty() {
                    let _: i64 = redis::cmd("UNLINK")
                        .arg(&keys)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        if let Some(schema) = &self.schema {
            let mut conn = sqlx::PgConnection::connect(&pg_url()).await.unwrap();
            sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .execute(&mut conn)
                .await
                .unwrap();
        }
    }
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

/// A store wrapper that appends one line `<id> <attempt>` per completion the store
/// accepted to a file, written once the answer is in. A process killed between the
/// commit and the write leaves a completion out, never in twice.
#[derive(Debug)]
pub struct LedgerStore {
    inner: DynStore,
    file: std::sync::Mutex<std::fs::File>,
}

impl LedgerStore {
    pub fn new(inner: DynStore, path: &std::path::Path) -> LedgerStore {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        LedgerStore {
            inner,
            file: std::sync::Mutex::new(file),
        }
    }

    /// The `(id, attempt)` lines of a ledger file; a torn last line is ignored.
    pub fn read(path: &std::path::Path) -> Vec<(tenure::ItemId, u32)> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let (id, attempt) = l.split_once(' ')?;
                Some((id.parse().ok()?, attempt.parse().ok()?))
            })
            .collect()
    }
}

use tenure::{CompleteParams, Store, TokenOutcome};

tenure::forward_store! {
    impl Store for LedgerStore {
        forward self => self.inner;

        async fn complete(&self, p: CompleteParams) -> tenure::Result<Vec<TokenOutcome>> {
            let tokens = p.tokens.clone();
            let out = self.inner.complete(p).await?;
            let mut lines = String::new();
            for (t, o) in tokens.iter().zip(&out) {
                if *o == TokenOutcome::Accepted {
                    lines.push_str(&format!("{} {}\n", t.id, t.attempt));
                }
            }
            use std::io::Write;
            self.file
                .lock()
                .unwrap()
                .write_all(lines.as_bytes())
                .unwrap();
            Ok(out)
        }
    }
}
