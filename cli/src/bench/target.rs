//! Where a bench runs: data of its own on the store the user named, made before the
//! run and removed after it, and never data that was there before.
//!
//! | URL | what the bench makes | refused when |
//! |---|---|---|
//! | `memory://` | a store in this process | never |
//! | `sqlite://PATH` | the file `PATH` (created new) | `PATH`, `PATH-wal`, `PATH-shm` or `PATH-journal` exists |
//! | `postgres://...` | a schema `tenure_bench_<random>`, or the one named by `tenure_schema` | that schema exists |
//! | `redis://...`, `rediss://...`, `redis+sentinel://...`, `redis+cluster://...` | a key prefix `tenure_bench_<random>`, or the one named by `tenure_prefix` | a key of that prefix exists |
//! | any other scheme `tenure::open` knows | a fresh queue only (see [`Target::Other`]) | `--backlog` is asked for |
//!
//! Every run also uses a fresh queue name. The store itself is always opened with
//! `tenure::open`, so any store it can open can be measured.

use std::path::{Path, PathBuf};

use sqlx::{Connection, PgConnection};
use tenure_redis::{RedisConfig, RedisStore};

use crate::error::CliError;

/// A bench's own corner of the store named by the user's URL.
#[derive(Debug)]
pub(crate) enum Target {
    /// `memory://`: nothing outside the process.
    Memory,
    /// A SQLite file the bench created.
    Sqlite {
        /// The file.
        path: PathBuf,
        /// The URL to open it with.
        url: String,
    },
    /// A PostgreSQL schema the bench created.
    Postgres {
        /// The URL without `tenure_schema`, for the bench's own connection.
        driver_url: String,
        /// The schema.
        schema: String,
        /// The URL to open the store with (`tenure_schema` set to `schema`).
        url: String,
    },
    /// A Redis key prefix that held no key when the bench began.
    Redis {
        /// The URL without `tenure_prefix`, for the bench's own connection.
        driver_url: String,
        /// The prefix.
        prefix: String,
        /// The URL to open the store with (`tenure_prefix` set to `prefix`).
        url: String,
    },
    /// A scheme this command knows no isolation for (a store added to `tenure::open`
    /// later): the run uses only a fresh queue, with no backlog, and checks that the
    /// queue is left with nothing pending; finished items are left to the store's purge.
    Other {
        /// The URL as given.
        url: String,
    },
}

/// SQLite's side files of a database at `path`.
fn sqlite_files(path: &Path) -> Vec<PathBuf> {
    let mut files = vec![path.to_path_buf()];
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        files.push(PathBuf::from(p));
    }
    files
}

/// Takes `tenure_schema` out of a Postgres URL's query: `(driver_url, schema)`.
fn split_schema(url: &str) -> Result<(String, Option<String>), CliError> {
    split_param(url, "tenure_schema")
}

/// Takes our own parameter `name` out of a URL's query: `(driver_url, value)`.
fn split_param(url: &str, name: &str) -> Result<(String, Option<String>), CliError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), None));
    };
    let mut found = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((key, value)) if key == name => {
                if found.replace(value.to_owned()).is_some() {
                    return Err(CliError::Usage(format!("url: {name} is given twice")));
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

fn with_schema(driver_url: &str, schema: &str) -> String {
    with_param(driver_url, "tenure_schema", schema)
}

fn with_param(driver_url: &str, name: &str, value: &str) -> String {
    let sep = if driver_url.contains('?') { '&' } else { '?' };
    format!("{driver_url}{sep}{name}={value}")
}

/// A schema name the bench may create and drop: lower-case letters, digits and `_`,
/// starting with a letter or `_`, at most 63 bytes.
fn check_schema(schema: &str) -> Result<(), CliError> {
    check_name("tenure_schema", schema, 63)
}

/// A name of `field` the bench may make and remove: 1 to `max` lower-case letters,
/// digits or `_`, not starting with a digit.
fn check_name(field: &str, name: &str, max: usize) -> Result<(), CliError> {
    let ok = !name.is_empty()
        && name.len() <= max
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(CliError::Usage(format!(
            "{field}: {name:?} must be 1 to {max} lower-case letters, digits or _, not starting with a digit"
        )))
    }
}

/// A short random suffix for names of the bench's own.
pub(crate) fn fresh_suffix() -> String {
    let id = uuid::Uuid::now_v7().simple().to_string();
    // The last 12 hex digits of a UUID v7 are random.
    id[id.len() - 12..].to_owned()
}

/// Hides the password of `scheme://user:password@host...`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((auth, host)) = rest.split_once('@') else {
        return url.to_owned();
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

impl Target {
    /// Makes the bench's own data for `url`, refusing anything that exists already.
    pub(crate) async fn prepare(url: &str, backlog: usize) -> Result<Target, CliError> {
        let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or_default();
        match scheme {
            "memory" => Ok(Target::Memory),
            "sqlite" => Self::sqlite(url),
            "postgres" | "postgresql" => Self::postgres(url).await,
            "redis" | "rediss" | "redis+sentinel" | "redis+cluster" => Self::redis(url).await,
            "" => Err(CliError::Usage(format!(
                "url: {url:?} has no scheme; expected memory://, sqlite://PATH, postgres://... \
                 or redis://..."
            ))),
            _ => {
                if backlog > 0 {
                    return Err(CliError::Usage(format!(
                        "--backlog: tenure bench cannot remove a backlog from {scheme}:// stores; \
                         run without --backlog"
                    )));
                }
                Ok(Target::Other {
                    url: url.to_owned(),
                })
            }
        }
    }

    fn sqlite(url: &str) -> Result<Target, CliError> {
        let rest = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .unwrap_or_default();
        let path = rest.split_once('?').map_or(rest, |(p, _)| p);
        if path.is_empty() {
            return Err(CliError::Usage(format!(
                "url: {url:?} names no file; give the path of a new file, sqlite://bench.db"
            )));
        }
        let path = PathBuf::from(path);
        if let Some(existing) = sqlite_files(&path).into_iter().find(|p| p.exists()) {
            return Err(CliError::Refused(format!(
                "{} already exists; tenure bench only runs on a new SQLite file, which it \
                 deletes afterwards (remove the file or name another path)",
                existing.display()
            )));
        }
        // Claim the path: a file made now by someone else is refused, not shared.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    CliError::Refused(format!("{} already exists", path.display()))
                } else {
                    CliError::Io {
                        context: format!("creating {}", path.display()),
                        source: e,
                    }
                }
            })?;
        Ok(Target::Sqlite {
            path,
            url: url.to_owned(),
        })
    }

    async fn postgres(url: &str) -> Result<Target, CliError> {
        let (driver_url, named) = split_schema(url)?;
        let schema = match named {
            Some(s) => s,
            None => format!("tenure_bench_{}", fresh_suffix()),
        };
        check_schema(&schema)?;
        let mut conn = PgConnection::connect(&driver_url)
            .await
            .map_err(CliError::db(format!(
                "connecting to {}",
                redact(&driver_url)
            )))?;
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
                .bind(&schema)
                .fetch_one(&mut conn)
                .await
                .map_err(CliError::db("looking for the schema"))?;
        if exists {
            let _ = conn.close().await;
            return Err(CliError::Refused(format!(
                "schema {schema} already exists; tenure bench only runs in a new schema, which \
                 it drops afterwards (name another with tenure_schema=..., or leave it out)"
            )));
        }
        // Creating it claims it: a schema made meanwhile by someone else fails here.
        let created =
            sqlx::Executor::execute(&mut conn, format!("CREATE SCHEMA {schema}").as_str())
                .await
                .map_err(|e| match e.as_database_error().and_then(|d| d.code()) {
                    Some(code) if code == "42P06" => {
                        CliError::Refused(format!("schema {schema} already exists"))
                    }
                    _ => CliError::db(format!("creating schema {schema}"))(e),
                });
        let _ = conn.close().await;
        created?;
        let url = with_schema(&driver_url, &schema);
        Ok(Target::Postgres {
            driver_url,
            schema,
            url,
        })
    }

    async fn redis(url: &str) -> Result<Target, CliError> {
        let (driver_url, named) = split_param(url, "tenure_prefix")?;
        let prefix = match named {
            Some(p) => p,
            None => format!("tenure_bench_{}", fresh_suffix()),
        };
        // The store's own rule for prefixes (at most 48 bytes).
        check_name("tenure_prefix", &prefix, 48)?;
        let store = Self::redis_store(&driver_url, &prefix).await?;
        let in_use = store.prefix_in_use().await.map_err(CliError::db(format!(
            "looking for keys of prefix {prefix} on {}",
            redact(&driver_url)
        )))?;
        if in_use {
            return Err(CliError::Refused(format!(
                "prefix {prefix} already holds keys; tenure bench only runs under a new key \
                 prefix, whose keys it deletes afterwards (name another with \
                 tenure_prefix=..., or leave it out)"
            )));
        }
        let url = with_param(&driver_url, "tenure_prefix", &prefix);
        Ok(Target::Redis {
            driver_url,
            prefix,
            url,
        })
    }

    /// A handle on `prefix` for the bench's own housekeeping (no listener).
    async fn redis_store(driver_url: &str, prefix: &str) -> Result<RedisStore, CliError> {
        RedisStore::connect(RedisConfig::new(driver_url).prefix(prefix).listen(false))
            .await
            .map_err(CliError::Store)
    }

    /// The URL to open the store with.
    pub(crate) fn url(&self) -> &str {
        match self {
            Target::Memory => "memory://",
            Target::Sqlite { url, .. }
            | Target::Postgres { url, .. }
            | Target::Redis { url, .. }
            | Target::Other { url } => url,
        }
    }

    /// What the bench made, for the report: `("schema", name, removed)`; only a
    /// [`Target::Other`] run leaves something (its drained queue) to the store.
    pub(crate) fn made(&self) -> (&'static str, String, bool) {
        match self {
            Target::Memory => ("memory", "this process".to_owned(), true),
            Target::Sqlite { path, .. } => ("file", path.display().to_string(), true),
            Target::Postgres { schema, .. } => ("schema", schema.clone(), true),
            Target::Redis { prefix, .. } => ("prefix", prefix.clone(), true),
            Target::Other { .. } => ("queue", "the run's queue".to_owned(), false),
        }
    }

    /// A PostgreSQL target's driver URL (without `tenure_schema`) and schema.
    pub(crate) fn postgres_schema(&self) -> Option<(&str, &str)> {
        match self {
            Target::Postgres {
                driver_url, schema, ..
            } => Some((driver_url, schema)),
            _ => None,
        }
    }

    /// After seeding, before measuring. PostgreSQL: `ANALYZE` of every table of the
    /// bench's schema, so the planner knows the seeded sizes, as autovacuum would in
    /// time; other stores: nothing.
    pub(crate) async fn analyze(&self) -> Result<(), CliError> {
        let Target::Postgres {
            driver_url, schema, ..
        } = self
        else {
            return Ok(());
        };
        let mut conn = PgConnection::connect(driver_url)
            .await
            .map_err(CliError::db("connecting to analyze"))?;
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT tablename::text FROM pg_tables WHERE schemaname = $1")
                .bind(schema)
                .fetch_all(&mut conn)
                .await
                .map_err(CliError::db("listing the schema's tables"))?;
        for table in tables {
            let sql = format!("ANALYZE {schema}.\"{}\"", table.replace('"', "\"\""));
            sqlx::Executor::execute(&mut conn, sql.as_str())
                .await
                .map_err(CliError::db(format!("analyzing {schema}.{table}")))?;
        }
        let _ = conn.close().await;
        Ok(())
    }

    /// Removes what [`prepare`](Self::prepare) made. Call it after the store is
    /// dropped.
    pub(crate) async fn cleanup(&self) -> Result<(), CliError> {
        match self {
            Target::Memory | Target::Other { .. } => Ok(()),
            Target::Sqlite { path, .. } => {
                for file in sqlite_files(path) {
                    match std::fs::remove_file(&file) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            return Err(CliError::Io {
                                context: format!("removing {}", file.display()),
                                source: e,
                            })
                        }
                    }
                }
                Ok(())
            }
            Target::Postgres {
                driver_url, schema, ..
            } => {
                let mut conn = PgConnection::connect(driver_url)
                    .await
                    .map_err(CliError::db("connecting to drop the schema"))?;
                sqlx::Executor::execute(
                    &mut conn,
                    format!("DROP SCHEMA IF EXISTS {schema} CASCADE").as_str(),
                )
                .await
                .map_err(CliError::db(format!("dropping schema {schema}")))?;
                let _ = conn.close().await;
                Ok(())
            }
            Target::Redis {
                driver_url, prefix, ..
            } => {
                let store = Self::redis_store(driver_url, prefix).await?;
                store.remove_prefix().await.map_err(CliError::db(format!(
                    "deleting the keys of prefix {prefix}"
                )))?;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_parameter_is_taken_out_and_put_back() {
        let (d, s) = split_schema("postgres://h/db?sslmode=disable&tenure_schema=x").unwrap();
        assert_eq!(
            (d.as_str(), s.as_deref()),
            ("postgres://h/db?sslmode=disable", Some("x"))
        );
        assert_eq!(
            with_schema(&d, "y"),
            "postgres://h/db?sslmode=disable&tenure_schema=y"
        );
        assert_eq!(
            with_schema("postgres://h/db", "y"),
            "postgres://h/db?tenure_schema=y"
        );
    }

    #[test]
    fn unsafe_schema_names_are_refused() {
        for bad in ["", "a;drop", "Upper", "1abc", &"a".repeat(64)] {
            assert!(check_schema(bad).is_err(), "{bad:?}");
        }
        check_schema("tenure_bench_0123abcd").unwrap();
    }

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("sqlite://a.db"), "sqlite://a.db");
    }
}
