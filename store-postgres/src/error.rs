//! The one place where driver errors become [`tenure_core::Error`].
//!
//! `sqlx::Error` never leaves this crate. Every statement's error goes through
//! [`map`], which classifies a database error by its SQLSTATE with [`classify`] (one
//! table, unit-tested below) and every transport error as unavailable.
//!
//! | cause | SQLSTATE or driver error | answer |
//! |---|---|---|
//! | connection lost or refused, server shutting down or starting, too many connections, serialization failure, deadlock, lock or statement timeout | `08…`, `53…`, `57…`, `40…`, `55P03`, `25006`, I/O | [`Error::Unavailable`] (retryable) |
//! | unknown database | `3D000` | [`Error::Config`] |
//! | unknown role, refused password, no `pg_hba.conf` entry | `28000`, `28P01` | [`Error::Config`] |
//! | a privilege the role lacks | `42501` | [`Error::Config`] |
//! | schema missing or not migrated to this version ("run migrate") | `3F000`, `42P01`, `42883` | [`Error::Config`] |
//! | TLS refused or the certificate not trusted | TLS error | [`Error::Config`] |
//! | a malformed URL | configuration error | [`Error::InvalidInput`] naming `url` |
//! | a constraint the store did not expect | `23…` | [`Error::Conflict`] |
//! | anything else (a bug) | | [`Error::Internal`] |
//!
//! A lost session (`08…`, `57P01`..`57P03`, I/O) is also noted, so the pool tests its
//! connections idle since before it ([`idle_since_loss`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tenure_core::Error;

/// The store's name, as [`Store::name`](tenure_core::Store::name) reports it.
pub(crate) const STORE: &str = "postgres";

/// When a connection to a server was last seen lost (nanoseconds after [`epoch`], plus
/// one; 0 for never), in this process, by any store.
///
/// A server that restarts or fails over leaves every pooled connection dead, but the
/// pool does not test a connection before handing it out (that would cost a round
/// trip on every call): each dead one would fail one call, one at a time. After a loss
/// has been seen, a connection that has been idle since before it is tested before it
/// is handed out (`PgStore`'s `before_acquire`), and a dead one is replaced at once.
/// A connection used since then has passed sqlx's test on release, so this costs one
/// round trip per connection per loss, and one atomic read per acquire otherwise.
/// Process-wide: a loss seen on one server makes the pools of other servers test
/// their long-idle connections once as well, which is harmless.
static LAST_LOSS: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn nanos_since_epoch() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX - 1)
}

/// Records that a connection was lost now.
pub(crate) fn note_connection_loss() {
    LAST_LOSS.store(nanos_since_epoch() + 1, Ordering::Relaxed);
}

/// Whether a connection idle for `idle_for` has been idle since before the last
/// connection loss this process saw, so it may be dead.
pub(crate) fn idle_since_loss(idle_for: Duration) -> bool {
    let last = LAST_LOSS.load(Ordering::Relaxed);
    if last == 0 {
        return false;
    }
    let since_loss = Duration::from_nanos(nanos_since_epoch().saturating_sub(last - 1));
    idle_for >= since_loss
}

/// Whether a SQLSTATE says the session is gone: connection exceptions (`08…`) and the
/// server shutting down, crashing or starting (`57P01`..`57P03`).
fn is_session_loss(code: &str) -> bool {
    code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
}

/// How a failure should be reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// The same call may succeed later: connection loss, shutdown, contention.
    Retryable,
    /// A constraint or state conflict.
    Conflict,
    /// The deployment is wrong (database, role, password, privileges, migrations):
    /// not retryable until an operator fixes it.
    Config,
    /// A bug, a missing schema object or corrupt data: not retryable.
    Internal,
}

/// The SQLSTATE table. Classes of codes are matched by their first two characters.
pub(crate) fn classify(code: &str) -> Class {
    match code {
        // serialization_failure, deadlock_detected: the transaction was rolled back
        // whole; trying again is the documented remedy.
        "40001" | "40P01" => Class::Retryable,
        // lock_not_available (lock_timeout), query_canceled (statement_timeout or a
        // cancel request), read_only_sql_transaction (a failover left us on a standby),
        // idle_in_transaction_session_timeout.
        "55P03" | "57014" | "25006" | "25P03" => Class::Retryable,
        // admin_shutdown (pg_terminate_backend, smart/fast shutdown), crash_shutdown,
        // cannot_connect_now (starting up or in recovery), database_dropped.
        "57P01" | "57P02" | "57P03" | "57P04" | "57P05" => Class::Retryable,
        // invalid_catalog_name (unknown database), insufficient_privilege,
        // invalid_schema_name, undefined_table, undefined_function: the database, the
        // role's grants or the migrations are not what the store needs.
        "3D000" | "42501" | "3F000" | "42P01" | "42883" => Class::Config,
        _ => match code.get(..2) {
            // connection_exception: the connection is gone or could not be made.
            Some("08") => Class::Retryable,
            // insufficient_resources: too_many_connections, out of memory, disk full.
            Some("53") => Class::Retryable,
            // operator intervention, transaction rollback (other than the above),
            // system errors (I/O): all transient on a healthy server.
            Some("57") | Some("40") | Some("58") => Class::Retryable,
            // integrity_constraint_violation.
            Some("23") => Class::Conflict,
            // invalid_authorization_specification (unknown role, no pg_hba.conf entry),
            // invalid_password.
            Some("28") => Class::Config,
            _ => Class::Internal,
        },
    }
}

/// Maps any sqlx error into the classified core error.
pub(crate) fn map(err: sqlx::Error) -> Error {
    let lost = match &err {
        sqlx::Error::Database(db) => db.code().is_some_and(|c| is_session_loss(&c)),
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => true,
        _ => false,
    };
    if lost {
        note_connection_loss();
    }
    match err {
        sqlx::Error::Database(db) => {
            let class = db.code().map(|c| classify(&c)).unwrap_or(Class::Internal);
            match class {
                Class::Retryable => Error::unavailable(STORE, db),
                Class::Conflict => Error::conflict(
                    "item",
                    format!(
                        "{} (constraint {})",
                        db.message(),
                        db.constraint().unwrap_or("?")
                    ),
                ),
                Class::Config => {
                    let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
                    Error::config(
                        STORE,
                        format!("{} (SQLSTATE {code}): {}", db.message(), hint(&code)),
                    )
                }
                Class::Internal => Error::internal(STORE, db),
            }
        }
        sqlx::Error::Tls(e) => Error::config(
            STORE,
            format!(
                "TLS: {e}; check sslmode, sslrootcert and the host name against the \
                 server's certificate"
            ),
        ),
        // rustls reports a certificate it does not trust as an I/O error of kind
        // InvalidData carrying its own error: that is the deployment, not the network.
        sqlx::Error::Io(e)
            if e.kind() == std::io::ErrorKind::InvalidData
                && e.get_ref()
                    .is_some_and(|inner| inner.to_string().contains("certificate")) =>
        {
            Error::config(
                STORE,
                format!(
                    "TLS: {e}; check sslmode, sslrootcert and the host name against the \
                     server's certificate"
                ),
            )
        }
        e @ (sqlx::Error::Io(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::BeginFailed) => Error::unavailable(STORE, e),
        sqlx::Error::Configuration(e) => Error::invalid("url", e.to_string()),
        other => Error::internal(STORE, other),
    }
}

/// What to fix, for a [`Class::Config`] SQLSTATE.
fn hint(code: &str) -> &'static str {
    match code {
        "3D000" => "the database named in the URL does not exist; create it or fix the URL",
        "42501" => {
            "the role lacks a privilege the store needs; see the tenure-postgres docs, \
             Required privileges"
        }
        "3F000" | "42P01" | "42883" => {
            "the schema is missing or not migrated to this version; run migrate \
             (PgStore::migrate, or connect once with migrate_on_connect(true))"
        }
        _ => "check the user and password in the URL and the server's pg_hba.conf",
    }
}

/// The SQLSTATE and constraint of a database error, if it is one.
pub(crate) fn db_code(err: &sqlx::Error) -> Option<(String, Option<String>)> {
    match err {
        sqlx::Error::Database(db) => Some((
            db.code().map(|c| c.into_owned()).unwrap_or_default(),
            db.constraint().map(str::to_owned),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_map_to_the_documented_classes() {
        let table = [
            ("40001", Class::Retryable),
            ("40P01", Class::Retryable),
            ("40003", Class::Retryable),
            ("08000", Class::Retryable),
            ("08003", Class::Retryable),
            ("08006", Class::Retryable),
            ("08001", Class::Retryable),
            ("08P01", Class::Retryable),
            ("57P01", Class::Retryable),
            ("57P02", Class::Retryable),
            ("57P03", Class::Retryable),
            ("57014", Class::Retryable),
            ("55P03", Class::Retryable),
            ("53300", Class::Retryable),
            ("53100", Class::Retryable),
            ("25006", Class::Retryable),
            ("58030", Class::Retryable),
            ("23505", Class::Conflict),
            ("23503", Class::Conflict),
            ("3D000", Class::Config),
            ("28000", Class::Config),
            ("28P01", Class::Config),
            ("42501", Class::Config),
            ("3F000", Class::Config),
            ("42P01", Class::Config),
            ("42883", Class::Config),
            ("42703", Class::Internal),
            ("22P02", Class::Internal),
            ("XX000", Class::Internal),
            ("", Class::Internal),
        ];
        for (code, class) in table {
            assert_eq!(classify(code), class, "{code}");
        }
    }

    #[test]
    fn transport_failures_are_unavailable_and_decode_failures_internal() {
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(map(io).is_retryable());
        assert!(map(sqlx::Error::PoolTimedOut).is_retryable());
        let e = map(sqlx::Error::RowNotFound);
        assert_eq!(e.kind(), tenure_core::ErrorKind::Internal);
        assert!(!map(sqlx::Error::PoolClosed).is_retryable());
    }

    #[test]
    fn a_lost_connection_makes_connections_idle_since_before_it_suspect() {
        // Seen before the loss: idle for a long time. Released after it: just now.
        let long = Duration::from_secs(3600);
        note_connection_loss();
        assert!(idle_since_loss(long));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!idle_since_loss(Duration::from_millis(5)));
        assert!(idle_since_loss(Duration::from_millis(40)));
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!idle_since_loss(Duration::from_millis(10)));
        assert!(map(io).is_retryable());
        assert!(
            idle_since_loss(Duration::from_millis(10)),
            "an I/O error is a loss"
        );
        assert!(is_session_loss("57P01") && is_session_loss("08006"));
        assert!(!is_session_loss("40001") && !is_session_loss("57014"));
    }

    #[test]
    fn an_untrusted_certificate_is_a_config_error_and_other_bad_data_unavailable() {
        let cert = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "invalid peer certificate: UnknownIssuer",
        );
        assert_eq!(
            map(sqlx::Error::Io(cert)).kind(),
            tenure_core::ErrorKind::Config
        );
        let other = std::io::Error::new(std::io::ErrorKind::InvalidData, "garbled frame");
        assert!(map(sqlx::Error::Io(other)).is_retryable());
    }
}
