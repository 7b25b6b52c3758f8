//! Tenure: every unit of work has exactly one temporary owner at a time.
//!
//! This crate is the front door. It re-exports [`tenure_core`] (the model, the
//! [`Store`] contract, errors, the clock and the worker runtime) and the stores, and
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

use std::sync::Arc;

pub use tenure_core::*;
pub use tenure_memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use tenure_postgres::{PgConfig, PgStore};
#[cfg(feature = "redis")]
pub use tenure_redis::{RedisConfig, RedisStore};
#[cfg(feature = "sqlite")]
pub use tenure_sqlite::{SqliteConfig, SqliteStore};

/// A store chosen at run time.
pub type DynStore = Arc<dyn Store>;

/// Opens the store a URL names (see the crate docs for the schemes).
///
/// `sqlite://` creates and migrates the file; `postgres://` (or `postgresql://`)
/// connects and migrates the schema given by the `tenure_schema` parameter (default
/// `tenure`); `redis://` (or `rediss://`, `redis+sentinel://`, `redis+cluster://`)
/// uses the key prefix given by the `tenure_prefix` parameter (default `tenure`) and
/// checks that the server answers;
/// every other parameter goes to the driver, and one the driver does not understand is
/// refused naming it. The scheme is matched without regard to case (`SQLite://` is
/// `sqlite://`); the rest of the URL is passed on as written.
///
/// # Errors
/// [`Error::InvalidInput`] naming `url` for an unknown scheme, a scheme whose store
/// was compiled out, or a malformed URL; otherwise whatever opening the store answers
/// (for example [`Error::Unavailable`] when the server does not answer).
pub async fn open(url: &str) -> Result<DynStore> {
    // Schemes are case-insensitive (RFC 3986): `SQLite://`, `POSTGRES://` and
    // `Redis://` open the same stores as their lowercase forms.
    let scheme = url
        .split_once(':')
        .map(|(s, _)| s.to_ascii_lowercase())
        .unwrap_or_default();
    let url = &match url.split_once(':') {
        Some((_, rest)) => format!("{scheme}:{rest}"),
        None => url.to_owned(),
    };
    match scheme.as_str() {
        "memory" => {
            if url != "memory://" && url != "memory:" {
                return Err(Error::invalid(
                    "url",
                    format!("{url:?}: memory:// takes no path or options"),
                ));
            }
            Ok(Arc::new(MemoryStore::default()))
        }
        "sqlite" => open_sqlite(url).await,
        "postgres" | "postgresql" => open_postgres(url).await,
        "redis" | "rediss" | "redis+sentinel" | "redis+cluster" => open_redis(url).await,
        _ => Err(Error::invalid(
            "url",
            format!(
                "{url:?}: expected memory://, sqlite://PATH, postgres://..., redis://..., \
                 redis+sentinel://... or redis+cluster://..."
            ),
        )),
    }
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(url: &str) -> Result<DynStore> {
    let config = SqliteConfig::from_url(url)?;
    Ok(Arc::new(SqliteStore::open(config).await?))
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(url: &str) -> Result<DynStore> {
    Err(Error::invalid(
        "url",
        format!("{url:?}: this build has no SQLite store (feature `sqlite`)"),
    ))
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str) -> Result<DynStore> {
    let (driver_url, schema) = split_schema(url)?;
    let mut config = PgConfig::new(driver_url);
    if let Some(schema) = schema {
        tenure_postgres::check_schema("tenure_schema", &schema)?;
        config = config.schema(&schema);
    }
    Ok(Arc::new(PgStore::connect(config).await?))
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(url: &str) -> Result<DynStore> {
    Err(Error::invalid(
        "url",
        format!("{url:?}: this build has no PostgreSQL store (feature `postgres`)"),
    ))
}

#[cfg(feature = "redis")]
async fn open_redis(url: &str) -> Result<DynStore> {
    let (driver_url, prefix) = split_param(url, "tenure_prefix")?;
    let mut config = RedisConfig::new(driver_url);
    if let Some(prefix) = prefix {
        validate_identifier("tenure_prefix", &prefix)?;
        config = config.prefix(&prefix);
    }
    let store = RedisStore::connect(config).await?;
    store.ping().await?;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "redis"))]
async fn open_redis(url: &str) -> Result<DynStore> {
    Err(Error::invalid(
        "url",
        format!("{url:?}: this build has no Redis store (feature `redis`)"),
    ))
}

/// Takes our own `tenure_schema` parameter out of a Postgres URL, leaving the rest for
/// the driver.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
fn split_schema(url: &str) -> Result<(String, Option<String>)> {
    split_param(url, "tenure_schema")
}

/// Takes our own parameter `name` out of a URL's query, leaving the rest for the
/// driver.
#[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(dead_code))]
fn split_param(url: &str, name: &str) -> Result<(String, Option<String>)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), None));
    };
    let mut found = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((key, value)) if key == name => {
                if found.replace(value.to_owned()).is_some() {
                    return Err(Error::invalid("url", format!("{name} is given twice")));
                }
            }
            _ => rest.push(pair),
        }
    }
    let driver_url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((driver_url, found))
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
    fn tenure_schema_is_taken_out_of_the_postgres_url() {
        let (u, s) = split_schema("postgres://h/db?sslmode=disable&tenure_schema=jobs").unwrap();
        assert_eq!(u, "postgres://h/db?sslmode=disable");
        assert_eq!(s.as_deref(), Some("jobs"));
        let (u, s) = split_schema("postgres://h/db").unwrap();
        assert_eq!((u.as_str(), s), ("postgres://h/db", None));
    }

    #[test]
    fn tenure_prefix_is_taken_out_of_the_redis_url() {
        let (u, p) = split_param(
            "redis://h:6379/0?protocol=resp2&tenure_prefix=jobs",
            "tenure_prefix",
        )
        .unwrap();
        assert_eq!(u, "redis://h:6379/0?protocol=resp2");
        assert_eq!(p.as_deref(), Some("jobs"));
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
