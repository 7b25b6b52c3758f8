//! What is checked before a [`PgStore`](crate::PgStore) runs anything, and how a slow
//! connection attempt learns why it is slow.
//!
//! - The URL's parameters are checked against [`DRIVER_PARAMETERS`], the ones sqlx
//!   understands; sqlx itself only logs a warning for an unknown one, so a typo such as
//!   `?tenure_shema=jobs` or `?sslmod=require` would otherwise be silently ignored.
//! - The schema must be a safe identifier and not a PostgreSQL system schema.
//! - sqlx's pool retries a refused connection silently until the acquire timeout and
//!   then reports only "pool timed out". [`diagnosed`] asks the server itself once a
//!   connection attempt takes longer than [`DIAGNOSE_AFTER`], so a closed port answers
//!   "connection refused" within a fraction of a second.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};
use tenure_core::{validate_identifier, Error, Result};

/// The URL parameters passed through to sqlx, which understands each of them (as well
/// as `options[NAME]=VALUE`, a server setting for the store's sessions). Any other
/// parameter is refused naming it.
pub const DRIVER_PARAMETERS: &[&str] = &[
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// Parameters that name a file, which must exist when the store is configured.
const FILE_PARAMETERS: &[&str] = &[
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
];

/// Refuses a URL with a parameter sqlx does not understand, or naming a file that does
/// not exist, as [`Error::InvalidInput`] naming `url` (the reason names the
/// parameter, never the password).
pub(crate) fn check_url(url: &str) -> Result<()> {
    let Some((_, query)) = url.split_once('?') else {
        return Ok(());
    };
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let setting = key
            .strip_prefix("options[")
            .and_then(|k| k.strip_suffix(']'))
            .is_some_and(|k| !k.is_empty());
        if !setting && !DRIVER_PARAMETERS.contains(&key) {
            let hint = if key.starts_with("tenure") {
                " (the schema is PgConfig::schema, or the tenure_schema parameter of \
                 tenure::open)"
            } else {
                ""
            };
            return Err(Error::invalid(
                "url",
                format!(
                    "unknown parameter {key:?}{hint}; the parameters understood are {}, \
                     and options[SETTING]",
                    DRIVER_PARAMETERS.join(", ")
                ),
            ));
        }
        if FILE_PARAMETERS.contains(&key) && !Path::new(value).is_file() {
            return Err(Error::invalid(
                "url",
                format!("parameter {key}: {value:?} is not a readable file"),
            ));
        }
    }
    Ok(())
}

/// Checks a schema name: a safe identifier ([`validate_identifier`]) that is not a
/// PostgreSQL system schema (`information_schema`, `pg_*`). Answers
/// [`Error::InvalidInput`] naming `field`.
pub fn check_schema(field: &'static str, schema: &str) -> Result<()> {
    validate_identifier(field, schema)?;
    if schema == "information_schema" || schema.starts_with("pg_") {
        return Err(Error::invalid(
            field,
            format!("{schema} is a PostgreSQL system schema; choose a schema of your own"),
        ));
    }
    Ok(())
}

/// How long a pool acquire may take while the pool is opening a connection before the
/// store opens one itself to learn why.
pub(crate) const DIAGNOSE_AFTER: Duration = Duration::from_millis(250);

/// Awaits `acquire` (a pool acquire or begin). When it takes longer than
/// [`DIAGNOSE_AFTER`] and the pool is not full (so it is opening a connection, not
/// waiting for a busy one), opens one connection directly: if that fails, its error
/// (connection refused, too many clients, ...) is the answer at once; if it succeeds,
/// the server is fine and the acquire is awaited as usual.
pub(crate) async fn diagnosed<T>(
    pool: &PgPool,
    options: &PgConnectOptions,
    max_connections: u32,
    acquire: impl Future<Output = std::result::Result<T, sqlx::Error>>,
) -> std::result::Result<T, sqlx::Error> {
    tokio::pin!(acquire);
    tokio::select! {
        // Polled first: an idle connection is taken without ever arming the timer.
        biased;
        r = &mut acquire => return r,
        () = tokio::time::sleep(DIAGNOSE_AFTER) => {}
    }
    if pool.size() < max_connections && !pool.is_closed() {
        tokio::select! {
            biased;
            r = &mut acquire => return r,
            probe = PgConnection::connect_with(options) => match probe {
                Err(e) => return Err(e),
                Ok(conn) => {
                    let _ = conn.close().await;
                }
            },
        }
    }
    acquire.await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_parameters_pass_and_unknown_ones_are_named() {
        for good in [
            "postgres://u@h/db",
            "postgres://u@h/db?",
            "postgres://u@h/db?sslmode=require&application_name=x",
            "postgres://u@h/db?options[statement_timeout]=5s&port=5433",
            "postgres:///db?host=/var/run/postgresql",
        ] {
            check_url(good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for (bad, named) in [
            ("postgres://u@h/db?tenure_shema=x", "\"tenure_shema\""),
            (
                "postgres://u@h/db?sslmode=require&sslmod=require",
                "\"sslmod\"",
            ),
            ("postgres://u@h/db?options[]=x", "\"options[]\""),
            ("postgres://u@h/db?connect_timeout", "\"connect_timeout\""),
        ] {
            let e = check_url(bad).unwrap_err();
            assert_eq!(e.invalid_field(), Some("url"), "{bad}");
            assert!(e.to_string().contains(named), "{bad}: {e}");
        }
        let e = check_url("postgres://u@h/db?tenure_schema=x").unwrap_err();
        assert!(e.to_string().contains("PgConfig::schema"), "{e}");
    }

    #[test]
    fn a_missing_certificate_file_is_named() {
        let e = check_url("postgres://u@h/db?sslmode=verify-full&sslrootcert=/nonexistent.pem")
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("url"));
        assert!(e.to_string().contains("sslrootcert"), "{e}");
    }

    #[test]
    fn system_schemas_are_refused() {
        for bad in ["information_schema", "pg_catalog", "pg_toast", "pg_x"] {
            let e = check_schema("schema", bad).unwrap_err();
            assert_eq!(e.invalid_field(), Some("schema"), "{bad}");
            assert!(e.to_string().contains("system schema"), "{bad}: {e}");
        }
        for good in ["tenure", "public", "pgx", "jobs_pg_"] {
            check_schema("schema", good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
    }
}
