//! Tenure: every unit of work has exactly one temporary owner at a time.
//!
//! This crate is the front door. It re-exports [`tenure_core`] (the model, the
//! [`Store`] contract, errors, the clock), the worker runtime of [`tenure_runtime`]
//! (as [`runtime`], with [`Worker`] and its companions here too) and the stores, and
//! opens any store from a URL with [`open`], so an application moves from SQLite in
//! development to PostgreSQL in production by configuration alone:
//!
//! | URL | store |
//! |---|---|
//! | `memory://` | [`MemoryStore`]: one process, nothing kept |
//! | `sqlite://data/work.db`, `sqlite:///var/lib/work.db` | `SqliteStore` (feature `sqlite`) |
//! | `postgres://user@host/db?tenure_schema=jobs` | `PgStore` (feature `postgres`) |
//! | `redis://host:6379/0?tenure_prefix=jobs`, `rediss://...` | `RedisStore` (feature `redis`) |
//! | `redis+sentinel://host:26379,host:26379/mymaster?tenure_prefix=jobs` | `RedisStore` on the primary the sentinels name |
//! | `redis+cluster://host:6379,host:6379?tenure_prefix=jobs` | `RedisStore` on a Redis Cluster |
//!
//! ```no_run
//! # async fn demo() -> tenure::Result<()> {
//! let url = std::env::var("TENURE_URL").unwrap_or_else(|_| "sqlite://tenure.db".into());
//! let store = tenure::open(&url).await?;
//! println!("running on {}", store.name());
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use tenure_core::*;
pub use tenure_memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use tenure_postgres::{PgConfig, PgStore};
#[cfg(feature = "redis")]
pub use tenure_redis::{RedisConfig, RedisStore};
pub use tenure_runtime as runtime;
pub use tenure_runtime::{
    Handler, Job, JobError, MetricsSnapshot, PollPolicy, Role, RunTask, ShutdownReport, StopReason,
    TaskHandler, Worker, WorkerBuilder,
};
#[cfg(feature = "sqlite")]
pub use tenure_sqlite::{SqliteConfig, SqliteStore};

/// A store chosen at run time.
pub type DynStore = Arc<dyn Store>;

/// What opening a store by URL returns.
type Opening = Pin<Box<dyn Future<Output = Result<DynStore>> + Send>>;

/// One store [`open`] knows: the URL schemes its crate declares, and how a URL of
/// them is opened (the store's own `from_url`, then its constructor). The one table of
/// schemes, [`BACKENDS`], is read by [`open`] and by the `tenure` CLI.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Backend {
    /// The store's name, as [`Store::name`] answers it.
    pub name: &'static str,
    /// Its URL schemes, lowercase (the store crate's `URL_SCHEMES`).
    pub schemes: &'static [&'static str],
    /// What its URLs look like, for messages: `sqlite://PATH`.
    pub shape: &'static str,
    opener: fn(String) -> Opening,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("name", &self.name)
            .field("schemes", &self.schemes)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

impl Backend {
    /// Opens the store `url` names; `url` must have one of [`Backend::schemes`].
    ///
    /// # Errors
    /// What the store's `from_url` and constructor answer.
    pub async fn open(&self, url: &str) -> Result<DynStore> {
        (self.opener)(url.to_owned()).await
    }
}

/// Every store this build opens by URL (the `sqlite`, `postgres` and `redis` features
/// add theirs), in the order messages list them.
pub const BACKENDS: &[Backend] = &[
    Backend {
        name: "memory",
        schemes: tenure_memory::URL_SCHEMES,
        shape: "memory://",
        opener: |url| {
            Box::pin(async move { Ok(Arc::new(MemoryStore::from_url(&url)?) as DynStore) })
        },
    },
    #[cfg(feature = "sqlite")]
    Backend {
        name: "sqlite",
        schemes: tenure_sqlite::URL_SCHEMES,
        shape: "sqlite://PATH",
        opener: |url| {
            Box::pin(async move {
                let config = SqliteConfig::from_url(&url)?;
                Ok(Arc::new(SqliteStore::open(config).await?) as DynStore)
            })
        },
    },
    #[cfg(feature = "postgres")]
    Backend {
        name: "postgres",
        schemes: tenure_postgres::URL_SCHEMES,
        shape: "postgres://USER@HOST/DB?tenure_schema=NAME",
        opener: |url| {
            Box::pin(async move {
                let config = PgConfig::from_url(&url)?;
                Ok(Arc::new(PgStore::connect(config).await?) as DynStore)
            })
        },
    },
    #[cfg(feature = "redis")]
    Backend {
        name: "redis",
        schemes: tenure_redis::URL_SCHEMES,
        shape: "redis://HOST:6379?tenure_prefix=NAME",
        opener: |url| {
            Box::pin(async move {
                let store = RedisStore::connect(RedisConfig::from_url(&url)?).await?;
                store.ping().await?;
                Ok(Arc::new(store) as DynStore)
            })
        },
    },
];

/// The store whose scheme `url` has, matched without regard to case (RFC 3986:
/// `SQLite://` is `sqlite://`).
///
/// # Errors
/// [`Error::InvalidInput`] naming `url` when no store of this build has its scheme,
/// listing the schemes it has.
pub fn backend(url: &str) -> Result<&'static Backend> {
    let scheme = url_scheme(url).map(|(scheme, _)| scheme);
    scheme
        .and_then(|scheme| {
            BACKENDS
                .iter()
                .find(|b| b.schemes.contains(&scheme.as_str()))
        })
        .ok_or_else(|| {
            let schemes: Vec<String> = BACKENDS
                .iter()
                .flat_map(|b| b.schemes)
                .map(|s| format!("{s}://"))
                .collect();
            Error::invalid("url", format!("{url:?}: expected {}", or_list(&schemes)))
        })
}

/// What a store URL looks like, one [`Backend::shape`] per store of this build:
/// `memory://, sqlite://PATH, ... or redis://HOST:6379?tenure_prefix=NAME`.
pub fn url_shapes() -> String {
    let shapes: Vec<String> = BACKENDS.iter().map(|b| b.shape.to_owned()).collect();
    or_list(&shapes)
}

/// `a, b or c`.
fn or_list(items: &[String]) -> String {
    match items.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Opens the store a URL names (see the crate docs for the schemes, and [`BACKENDS`]).
///
/// `sqlite://` creates and migrates the file; `postgres://` (or `postgresql://`)
/// connects and migrates the schema given by the `tenure_schema` parameter (default
/// `tenure`); `redis://` (or `rediss://`, `redis+sentinel://`, `redis+cluster://`)
/// uses the key prefix given by the `tenure_prefix` parameter (default `tenure`) and
/// checks that the server answers;
/// every other parameter goes to the driver, and one the driver does not understand is
/// refused naming it. The scheme is matched without regard to case (`SQLite://` is
/// `sqlite://`); the rest of the URL is passed on as written. Each store reads its own
/// URL: [`MemoryStore::from_url`], `SqliteConfig::from_url`, `PgConfig::from_url`,
/// `RedisConfig::from_url`.
///
/// # Errors
/// [`Error::InvalidInput`] naming `url` for an unknown scheme (a store compiled out
/// included) or a malformed URL, naming `tenure_schema` or `tenure_prefix` for a bad
/// value of it; otherwise whatever opening the store answers (for example
/// [`Error::Unavailable`] when the server does not answer).
pub async fn open(url: &str) -> Result<DynStore> {
    backend(url)?.open(url).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_urls_open_a_memory_store() {
        let store = open("memory://").await.unwrap();
        assert_eq!(store.name(), "memory");
    }

    #[tokio::test]
    async fn unknown_schemes_name_the_url_field() {
        for bad in ["mysql://x", "", "memory://x", "redis://127.0.0.1:port"] {
            let err = open(bad).await.err().unwrap();
            assert_eq!(err.invalid_field(), Some("url"), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn sqlite_urls_open_a_file_store() {
        let dir = std::env::temp_dir().join(format!("tenure-open-{}", ItemId::new()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}/work.db", dir.display());
        let store = open(&url).await.unwrap();
        assert_eq!(store.name(), "sqlite");
        let q = QueueName::new("q").unwrap();
        store
            .enqueue_one(NewItem::new(q.clone(), b"x".to_vec()))
            .await
            .unwrap();
        assert_eq!(store.queue_counts(&q).await.unwrap().ready, 1);
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_scheme_has_one_store_and_unknown_ones_name_the_url() {
        for (url, name) in [
            ("memory://", "memory"),
            ("MEMORY:", "memory"),
            ("sqlite://w.db", "sqlite"),
            ("SQLite:w.db", "sqlite"),
            ("postgres://h/db", "postgres"),
            ("postgresql://h/db", "postgres"),
            ("PostgreSQL://h/db", "postgres"),
            ("redis://h", "redis"),
            ("rediss://h", "redis"),
            ("redis+sentinel://h/m", "redis"),
            ("Redis+Cluster://h", "redis"),
        ] {
            assert_eq!(backend(url).unwrap().name, name, "{url}");
        }
        let mut schemes: Vec<&str> = BACKENDS.iter().flat_map(|b| b.schemes).copied().collect();
        let count = schemes.len();
        schemes.sort_unstable();
        schemes.dedup();
        assert_eq!(schemes.len(), count, "a scheme listed twice: {schemes:?}");
        for bad in ["mysql://x", "", "memory", "redis-x://h"] {
            let err = backend(bad).unwrap_err();
            assert_eq!(err.invalid_field(), Some("url"), "{bad:?}");
            assert!(
                err.to_string().contains("expected memory://, sqlite://"),
                "{err}"
            );
        }
        assert_eq!(
            url_shapes(),
            "memory://, sqlite://PATH, postgres://USER@HOST/DB?tenure_schema=NAME or \
             redis://HOST:6379?tenure_prefix=NAME"
        );
    }

    #[tokio::test]
    async fn tenure_schema_and_tenure_prefix_given_twice_or_bare_are_refused_naming_them() {
        for (url, field) in [
            (
                "postgres://127.0.0.1:1/db?tenure_schema=a&tenure_schema=b",
                "tenure_schema",
            ),
            ("postgres://127.0.0.1:1/db?tenure_schema", "tenure_schema"),
            (
                "redis://127.0.0.1:1/?tenure_prefix=a&tenure_prefix=b",
                "tenure_prefix",
            ),
            ("redis://127.0.0.1:1/?tenure_prefix", "tenure_prefix"),
        ] {
            let err = open(url).await.err().unwrap();
            assert_eq!(err.invalid_field(), Some(field), "{url}: {err}");
        }
    }

    #[tokio::test]
    async fn unsafe_redis_prefixes_are_refused_before_connecting() {
        let err = open("redis://127.0.0.1:1/?tenure_prefix=a}b")
            .await
            .err()
            .unwrap();
        assert_eq!(err.invalid_field(), Some("tenure_prefix"));
    }

    #[tokio::test]
    async fn bad_sentinel_and_cluster_urls_name_the_field_before_connecting() {
        let cases = [
            ("redis+sentinel://127.0.0.1:1,127.0.0.1:2", "master_name"),
            (
                "redis+sentinel://127.0.0.1:1/m?tenure_prefix=a}b",
                "tenure_prefix",
            ),
            ("redis+cluster://", "hosts"),
            ("redis+cluster://?tenure_prefix=jobs", "hosts"),
            ("Redis+Cluster://127.0.0.1:1,,127.0.0.1:2", "hosts"),
        ];
        for (url, field) in cases {
            let err = open(url).await.err().unwrap();
            assert_eq!(err.invalid_field(), Some(field), "{url}: {err}");
        }
        let err = open("redis+cluster://127.0.0.1:1?tenure_prefix=jobs&read_from=x")
            .await
            .err()
            .unwrap();
        assert_eq!(err.invalid_field(), Some("url"));
        assert!(err.to_string().contains("read_from"), "{err}");
    }

    #[tokio::test]
    async fn unreachable_sentinels_and_clusters_are_unavailable() {
        for url in [
            "redis+sentinel://127.0.0.1:1/mymaster?tenure_prefix=jobs",
            "redis+cluster://127.0.0.1:1",
        ] {
            let err = open(url).await.err().unwrap();
            assert!(err.is_retryable(), "{url}: {err}");
        }
    }

    #[tokio::test]
    async fn an_unreachable_redis_url_is_unavailable() {
        let err = open("redis://127.0.0.1:1/").await.err().unwrap();
        assert!(err.is_retryable(), "{err}");
    }

    #[tokio::test]
    async fn schemes_match_whatever_their_case() {
        assert_eq!(open("MEMORY://").await.unwrap().name(), "memory");
        assert_eq!(open("Memory:").await.unwrap().name(), "memory");
        let dir = tempfile::tempdir().unwrap();
        for (n, scheme) in ["SQLite", "SQLITE", "sqlite"].iter().enumerate() {
            let url = format!("{scheme}://{}/w{n}.db", dir.path().display());
            assert_eq!(open(&url).await.unwrap().name(), "sqlite", "{url}");
        }
        // Each scheme reaches its own store: a closed port answers that store's
        // retryable error, not "unknown scheme".
        for url in [
            "Redis://127.0.0.1:1/",
            "Postgres://postgres@127.0.0.1:1/db",
            "PostgreSQL://postgres@127.0.0.1:1/db",
        ] {
            let err = open(url).await.err().unwrap();
            assert!(err.is_retryable(), "{url}: {err}");
        }
        let err = open("REDISS://127.0.0.1:1/").await.err().unwrap();
        assert!(!err.to_string().contains("expected memory://"), "{err}");
        // Case does not make an unknown scheme known.
        let err = open("MySQL://x").await.err().unwrap();
        assert_eq!(err.invalid_field(), Some("url"));
    }

    #[tokio::test]
    async fn unknown_postgres_parameters_are_refused_naming_them() {
        let err = open("postgres://127.0.0.1:1/db?tenure_shema=jobs")
            .await
            .err()
            .unwrap();
        assert_eq!(err.invalid_field(), Some("url"));
        assert!(err.to_string().contains("tenure_shema"), "{err}");
    }

    #[tokio::test]
    async fn postgres_system_schemas_are_refused_naming_tenure_schema() {
        for bad in ["information_schema", "pg_catalog", "pg_jobs"] {
            let err = open(&format!("postgres://127.0.0.1:1/db?tenure_schema={bad}"))
                .await
                .err()
                .unwrap();
            assert_eq!(err.invalid_field(), Some("tenure_schema"), "{bad}: {err}");
        }
    }

    #[tokio::test]
    async fn unsafe_schema_names_are_refused_before_connecting() {
        let err = open("postgres://127.0.0.1:1/db?tenure_schema=a;drop")
            .await
            .err()
            .unwrap();
        assert_eq!(err.invalid_field(), Some("tenure_schema"));
    }
}

/// The README's code blocks, compiled as doctests so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The code blocks of the guides under `docs/`, compiled as doctests like the README's.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guide.md")]
#[doc = include_str!("../../docs/operating.md")]
#[doc = include_str!("../../docs/stores/memory.md")]
#[doc = include_str!("../../docs/stores/sqlite.md")]
#[doc = include_str!("../../docs/stores/postgres.md")]
#[doc = include_str!("../../docs/stores/redis.md")]
struct DocsDoctests;
