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
/// as `options[NAME]=VALUE`, a server setting for the store's sessions). Names are
/// matched percent-decoded, as sqlx reads them (`options%5BNAME%5D` is
/// `options[NAME]`). Any other parameter is refused naming it.
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
        // sqlx reads the query as form data, names and values percent-decoded:
        // `options%5Bstatement_timeout%5D` is `options[statement_timeout]` to it.
        let (key, value) = (form_decode(key), form_decode(value));
        let (key, value) = (key.as_str(), value.as_str());
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

/// `application/x-www-form-urlencoded` decoding, as sqlx reads URL parameters: `+` is
/// a space and `%XX` a byte; a `%` not followed by two hex digits stands for itself;
/// bytes that are not UTF-8 become U+FFFD.
fn form_decode(s: &str) -> String {
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            ) {
                (Some(hi), Some(lo)) => {
                    out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
    use std::str::FromStr;

    use super::*;

    #[test]
    fn driver_parameters_pass_and_unknown_ones_are_named() {
        for good in [
            "postgres://u@h/db",
            "postgres://u@h/db?",
            "postgres://u@h/db?sslmode=require&application_name=x",
            "postgres://u@h/db?options[statement_timeout]=5s&port=5433",
            "postgres:///db?host=/var/run/postgresql",
            "postgres://u@h/db?options%5Bstatement_timeout%5D=5s",
            "postgres://u@h/db?options%5bstatement_timeout%5d=5s&ssl%6Dode=require",
            "postgres://u@h/db?application_name=a+b%20c",
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
            ("postgres://u@h/db?options%5B%5D=x", "\"options[]\""),
            ("postgres://u@h/db?sslmod%65x=1", "\"sslmodex\""),
        ] {
            let e = check_url(bad).unwrap_err();
            assert_eq!(e.invalid_field(), Some("url"), "{bad}");
            assert!(e.to_string().contains(named), "{bad}: {e}");
        }
        let e = check_url("postgres://u@h/db?tenure_schema=x").unwrap_err();
        assert!(e.to_string().contains("PgConfig::schema"), "{e}");
    }

    #[test]
    fn names_and_values_are_read_percent_decoded_as_sqlx_reads_them() {
        assert_eq!(
            form_decode("options%5Bstatement_timeout%5D"),
            "options[statement_timeout]"
        );
        assert_eq!(form_decode("a+b%20c%2"), "a b c%2");
        assert_eq!(form_decode("100%"), "100%");
        assert_eq!(form_decode("%zz%41"), "%zzA");
        assert_eq!(form_decode("%C3%A9"), "é");
        // The options sqlx reads from such a URL are the ones the check let through.
        let url = "postgres://u@h/db?options%5Bstatement_timeout%5D=5s";
        check_url(url).unwrap();
        let opts = PgConnectOptions::from_str(url).unwrap();
        assert_eq!(opts.get_options(), Some("-c statement_timeout=5s"));
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
