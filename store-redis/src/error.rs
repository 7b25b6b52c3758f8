//! The one place where driver errors become [`tenure_core::Error`].
//!
//! `redis::RedisError` never leaves this crate. Every call's error goes through
//! [`map`]; [`classify`] is the table (unit-tested below). Our scripts answer two
//! errors of their own, by code: `CONFLICT` (an enqueued id exists) and `NOTFOUND` (a
//! partitioned claim's owner is not registered).

use redis::{ErrorKind, RedisError};
use tenure_core::Error;

/// The store's name, as [`Store::name`](tenure_core::Store::name) reports it.
pub(crate) const STORE: &str = "redis";

/// How a failure should be reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// The same call may succeed later: connection loss, timeouts, a server loading
    /// its data set, failing over or out of memory.
    Retryable,
    /// An enqueued id exists (our script's `CONFLICT`).
    Conflict,
    /// A partitioned claim's owner is not registered (our script's `NOTFOUND`).
    NotFound,
    /// A bug, a wrong server or corrupt data: not retryable.
    Internal,
}

/// The classification table, by driver error kind and server error code.
pub(crate) fn classify(kind: ErrorKind, code: Option<&str>) -> Class {
    match kind {
        ErrorKind::IoError
        | ErrorKind::BusyLoadingError
        | ErrorKind::TryAgain
        | ErrorKind::ClusterDown
        | ErrorKind::MasterDown
        | ErrorKind::ReadOnly
        | ErrorKind::Moved
        | ErrorKind::Ask
        // The sentinels know no healthy primary: a failover is under way.
        | ErrorKind::MasterNameNotFoundBySentinel
        | ErrorKind::NoValidReplicasFoundBySentinel => Class::Retryable,
        _ => match code {
            Some("CONFLICT") => Class::Conflict,
            Some("NOTFOUND") => Class::NotFound,
            // A script running too long blocks the server (BUSY); the server is out of
            // memory (OOM); a replica was asked to write (READONLY), or cannot answer
            // while it syncs (MASTERDOWN): all transient on a healthy deployment.
            // A primary that lost its replicas refuses writes under
            // `min-replicas-to-write` (NOREPLICAS).
            Some("BUSY") | Some("OOM") | Some("READONLY") | Some("MASTERDOWN")
            | Some("LOADING") | Some("TRYAGAIN") | Some("CLUSTERDOWN") | Some("NOREPLICAS") => {
                Class::Retryable
            }
            _ => Class::Internal,
        },
    }
}

/// Maps any driver error into the classified core error.
pub(crate) fn map(err: RedisError) -> Error {
    match classify(err.kind(), err.code()) {
        Class::Retryable => Error::unavailable(STORE, err),
        Class::Conflict => Error::conflict("item", err.detail().unwrap_or("conflict").to_owned()),
        Class::NotFound => Error::not_found("instance", err.detail().unwrap_or("?").to_owned()),
        Class::Internal => Error::internal(STORE, err),
    }
}

/// True when the connection that answered `err` should be replaced: it failed on the
/// wire or timed out, so later calls must not reuse it; or its server is no longer
/// the primary (`READONLY`, `MASTERDOWN`, `NOREPLICAS`: behind Sentinel the new
/// connection asks the sentinels where the primary is now).
pub(crate) fn needs_reconnect(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_unrecoverable_error()
        || matches!(
            err.kind(),
            ErrorKind::ClientError | ErrorKind::ReadOnly | ErrorKind::MasterDown
        )
        || matches!(err.code(), Some("READONLY") | Some("NOREPLICAS"))
}

/// A decode failure: the server answered something our scripts never answer.
pub(crate) fn bad_reply(what: impl Into<String>) -> Error {
    Error::internal(STORE, what.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_and_codes_map_to_the_documented_classes() {
        let table = [
            (ErrorKind::IoError, None, Class::Retryable),
            (
                ErrorKind::BusyLoadingError,
                Some("LOADING"),
                Class::Retryable,
            ),
            (ErrorKind::TryAgain, Some("TRYAGAIN"), Class::Retryable),
            (
                ErrorKind::ClusterDown,
                Some("CLUSTERDOWN"),
                Class::Retryable,
            ),
            (ErrorKind::MasterDown, Some("MASTERDOWN"), Class::Retryable),
            (ErrorKind::ReadOnly, Some("READONLY"), Class::Retryable),
            (ErrorKind::ExtensionError, Some("BUSY"), Class::Retryable),
            (ErrorKind::ExtensionError, Some("OOM"), Class::Retryable),
            (
                ErrorKind::ExtensionError,
                Some("NOREPLICAS"),
                Class::Retryable,
            ),
            (ErrorKind::Moved, Some("MOVED"), Class::Retryable),
            (
                ErrorKind::MasterNameNotFoundBySentinel,
                None,
                Class::Retryable,
            ),
            (ErrorKind::ExtensionError, Some("CONFLICT"), Class::Conflict),
            (ErrorKind::ExtensionError, Some("NOTFOUND"), Class::NotFound),
            (ErrorKind::ResponseError, Some("ERR"), Class::Internal),
            (
                ErrorKind::ExtensionError,
                Some("WRONGTYPE"),
                Class::Internal,
            ),
            (ErrorKind::TypeError, None, Class::Internal),
            (ErrorKind::AuthenticationFailed, None, Class::Internal),
        ];
        for (kind, code, class) in table {
            assert_eq!(classify(kind, code), class, "{kind:?} {code:?}");
        }
    }

    #[test]
    fn a_server_that_is_no_longer_the_primary_replaces_the_connection() {
        let readonly = RedisError::from((ErrorKind::ReadOnly, "READONLY"));
        assert!(needs_reconnect(&readonly));
        assert!(map(readonly).is_retryable());
    }

    #[test]
    fn a_refused_connection_is_unavailable_and_replaces_the_connection() {
        let err = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(needs_reconnect(&err));
        assert!(map(err).is_retryable());
    }
}
