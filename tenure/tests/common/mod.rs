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

pub use tenure_test_support::postgres::url as pg_url;
use tenure_test_support::postgres::PgSchema;
use tenure_test_support::redis::RedisPrefix;

/// A place for one test's data: a temp dir for SQLite, a fresh schema for Postgres, a
/// fresh key prefix for Redis. [`Place::cleanup`] drops the schema or deletes the
/// prefix's keys; dropping the place does it too, also when a test panics.
pub struct Place {
    pub backend: Backend,
    /// The URL every handle of this place opens (`memory://` gets one shared handle).
    pub url: String,
    pub schema: Option<String>,
    /// The Redis key prefix, if any (its keys are deleted by [`Place::cleanup`]).
    pub prefix: Option<String>,
    _dir: Option<tempfile::TempDir>,
    memory: Option<DynStore>,
    _pg: Option<PgSchema>,
    _redis: Option<RedisPrefix>,
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
                _pg: None,
                _redis: None,
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
                    _pg: None,
                    _redis: None,
                })
            }
            Backend::Postgres => {
                let pg = PgSchema::new().await?;
                Some(Place {
                    backend,
                    url: pg.url(),
                    schema: Some(pg.name().to_owned()),
                    prefix: None,
                    _dir: None,
                    memory: None,
                    _pg: Some(pg),
                    _redis: None,
                })
            }
            Backend::Redis => {
                let prefix = RedisPrefix::new("t").await?;
                Some(Place {
                    backend,
                    url: prefix.url(),
                    schema: None,
                    prefix: Some(prefix.name().to_owned()),
                    _dir: None,
                    memory: None,
                    _pg: None,
                    _redis: Some(prefix),
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
            tenure_test_support::redis::delete_prefixes(
                &tenure_test_support::redis::url(),
                std::slice::from_ref(prefix),
            )
            .await
            .unwrap();
        }
        if let Some(schema) = &self.schema {
            let mut conn = sqlx::PgConnection::connect(&pg_url()).await.unwrap();
            tenure_test_support::postgres::drop_schema(&mut conn, schema).await;
        }
    }
}
