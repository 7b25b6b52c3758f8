//! The one place where rusqlite errors become [`tenure_core::Error`].
//!
//! | SQLite result | class | at open | during a call |
//! |---|---|---|---|
//! | `SQLITE_BUSY`, `SQLITE_LOCKED` | [`Class::Busy`] | retried, then `Unavailable` | retried, then `Unavailable` |
//! | `SQLITE_CANTOPEN`, `SQLITE_PERM`, `SQLITE_READONLY`, `SQLITE_AUTH` | [`Class::Path`] | `InvalidInput { field: "path" }` naming the path | `Unavailable` naming the path |
//! | `SQLITE_NOTADB` | [`Class::Path`] | `InvalidInput { field: "path" }`: not an SQLite database | `Corrupt` naming the path: the open file no longer reads as a database |
//! | `SQLITE_CORRUPT` | [`Class::Corrupt`] | `Corrupt` naming the path and what `PRAGMA quick_check` finds | the same |
//! | `SQLITE_IOERR`, `SQLITE_FULL`, `SQLITE_PROTOCOL` | [`Class::Io`] | `Unavailable` naming the path | `Unavailable` naming the path |
//! | `SQLITE_CONSTRAINT` | [`Class::Constraint`] | `Internal` | `Internal` (a broken invariant such as two running items of one scope) |
//! | anything else (SQL errors, type mismatches) | [`Class::Other`] | `Internal` | `Internal` |
//!
//! Expected constraint violations (an item id that already exists) are caught where
//! they happen and answered as `Conflict` before this table is consulted.

use std::path::Path;

use rusqlite::ffi::ErrorCode;
use tenure_core::Error;

pub(crate) const STORE: &str = "sqlite";

/// How the store reacts to a driver error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// Another connection holds the lock: retry a bounded number of times.
    Busy,
    /// The file cannot be opened, written or read as a database.
    Path,
    /// The disk or file system failed under us.
    Io,
    /// The file's contents are damaged: the same file answers the same, so it is not
    /// retryable.
    Corrupt,
    /// A constraint fired that the store did not expect.
    Constraint,
    /// A bug: bad SQL, a type mismatch.
    Other,
}

/// When the error happened: opening reports path problems as bad input (the caller's
/// configuration), a running store as a database that went away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Open,
    Call,
}

pub(crate) fn code(e: &rusqlite::Error) -> Option<ErrorCode> {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
        _ => None,
    }
}

pub(crate) fn classify(e: &rusqlite::Error) -> Class {
    match code(e) {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Class::Busy,
        Some(
            ErrorCode::CannotOpen
            | ErrorCode::PermissionDenied
            | ErrorCode::ReadOnly
            | ErrorCode::NotADatabase
            | ErrorCode::AuthorizationForStatementDenied,
        ) => Class::Path,
        Some(
            ErrorCode::SystemIoFailure | ErrorCode::DiskFull | ErrorCode::FileLockingProtocolFailed,
        ) => Class::Io,
        Some(ErrorCode::DatabaseCorrupt) => Class::Corrupt,
        Some(ErrorCode::ConstraintViolation) => Class::Constraint,
        _ => Class::Other,
    }
}

/// Maps a driver error met at `phase` on the file at `path`.
pub(crate) fn map(e: &rusqlite::Error, path: &Path, phase: Phase) -> Error {
    let shown = path.display();
    match (classify(e), phase) {
        (Class::Busy, _) => Error::unavailable(
            STORE,
            format!("database {shown} stayed busy (locked by another connection): {e}"),
        ),
        (Class::Path, Phase::Open) => Error::invalid("path", path_reason(e, path)),
        (Class::Corrupt, _) => corrupt(path, &e.to_string()),
        (Class::Path, Phase::Call) if code(e) == Some(ErrorCode::NotADatabase) => {
            corrupt(path, &format!("it no longer reads as a database ({e})"))
        }
        (Class::Path, Phase::Call) | (Class::Io, _) => {
            Error::unavailable(STORE, format!("database {shown}: {}", path_reason(e, path)))
        }
        (Class::Constraint, _) => Error::internal(
            STORE,
            format!("unexpected constraint violation in {shown}: {e}"),
        ),
        (Class::Other, _) => Error::internal(STORE, format!("{shown}: {e}")),
    }
}

/// [`Error::Corrupt`] naming the file, what SQLite said, and the first problems
/// `PRAGMA quick_check` finds on a fresh read-only connection.
pub(crate) fn corrupt(path: &Path, said: &str) -> Error {
    Error::corrupt(
        STORE,
        format!(
            "database {} is damaged: {said}; integrity check: {}; restore it from a backup",
            path.display(),
            integrity_problems(path)
        ),
    )
}

/// The first lines of `PRAGMA quick_check` on `path`, or why it could not run.
fn integrity_problems(path: &Path) -> String {
    let check = || -> rusqlite::Result<Vec<String>> {
        let conn = rusqlite::Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        let mut stmt = conn.prepare("PRAGMA quick_check(3)")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect()
    };
    match check() {
        Ok(lines) => lines.join("; ").replace('\n', " "),
        Err(e) => format!("could not run ({e})"),
    }
}

fn path_reason(e: &rusqlite::Error, path: &Path) -> String {
    let shown = path.display();
    match code(e) {
        Some(ErrorCode::NotADatabase) => format!("{shown} is not an SQLite database ({e})"),
        Some(ErrorCode::ReadOnly) => format!("{shown} cannot be written ({e})"),
        Some(ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
            format!("{shown} cannot be opened for reading and writing ({e})")
        }
        _ => format!("{shown}: {e}"),
    }
}

/// True when a transaction should be rolled back as a whole and tried again.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    classify(e) == Class::Busy
}

/// True when the error leaves the connection's transaction in doubt, so the whole batch
/// must be rolled back rather than one call's savepoint.
pub(crate) fn breaks_transaction(e: &rusqlite::Error) -> bool {
    matches!(
        classify(e),
        Class::Busy | Class::Io | Class::Path | Class::Corrupt
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::ffi;
    use tenure_core::ErrorKind;

    fn failure(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some("boom".into()))
    }

    #[test]
    fn every_result_code_maps_to_its_documented_kind() {
        let path = Path::new("/data/work.db");
        #[rustfmt::skip]
        let table: &[(i32, Class, ErrorKind, ErrorKind)] = &[
            // code,                        class,             at open,                 during a call
            (ffi::SQLITE_BUSY,              Class::Busy,       ErrorKind::Unavailable,  ErrorKind::Unavailable),
            (ffi::SQLITE_BUSY_SNAPSHOT,     Class::Busy,       ErrorKind::Unavailable,  ErrorKind::Unavailable),
            (ffi::SQLITE_LOCKED,            Class::Busy,       ErrorKind::Unavailable,  ErrorKind::Unavailable),
            (ffi::SQLITE_CANTOPEN,          Class::Path,       ErrorKind::InvalidInput, ErrorKind::Unavailable),
            (ffi::SQLITE_PERM,              Class::Path,       ErrorKind::InvalidInput, ErrorKind::Unavailable),
            (ffi::SQLITE_READONLY,          Class::Path,       ErrorKind::InvalidInput, ErrorKind::Unavailable),
            (ffi::SQLITE_NOTADB,            Class::Path,       ErrorKind::InvalidInput, ErrorKind::Corrupt),
            (ffi::SQLITE_IOERR,             Class::Io,         ErrorKind::Unavailable,  ErrorKind::Unavailable),
            (ffi::SQLITE_IOERR_FSYNC,       Class::Io,         ErrorKind::Unavailable,  ErrorKind::Unavailable),
            (ffi::SQLITE_FULL,              Class::Io,         ErrorKind::Unavailable,  ErrorKind::Unavailable),
            (ffi::SQLITE_CORRUPT,           Class::Corrupt,    ErrorKind::Corrupt,      ErrorKind::Corrupt),
            (ffi::SQLITE_CONSTRAINT,        Class::Constraint, ErrorKind::Internal,     ErrorKind::Internal),
            (ffi::SQLITE_CONSTRAINT_UNIQUE, Class::Constraint, ErrorKind::Internal,     ErrorKind::Internal),
            (ffi::SQLITE_ERROR,             Class::Other,      ErrorKind::Internal,     ErrorKind::Internal),
            (ffi::SQLITE_MISMATCH,          Class::Other,      ErrorKind::Internal,     ErrorKind::Internal),
        ];
        for &(code, class, open, call) in table {
            assert_eq!(classify(&failure(code)), class, "code {code}");
            let at_open = map(&failure(code), path, Phase::Open);
            let at_call = map(&failure(code), path, Phase::Call);
            assert_eq!(at_open.kind(), open, "code {code} at open: {at_open}");
            assert_eq!(at_call.kind(), call, "code {code} during a call: {at_call}");
            assert!(at_open.to_string().contains("/data/work.db"), "{at_open}");
            assert!(at_call.to_string().contains("/data/work.db"), "{at_call}");
        }
    }

    #[test]
    fn only_busy_is_retried_and_only_io_like_errors_abort_the_batch() {
        assert!(is_busy(&failure(ffi::SQLITE_BUSY)));
        assert!(is_busy(&failure(ffi::SQLITE_LOCKED)));
        assert!(!is_busy(&failure(ffi::SQLITE_IOERR)));
        assert!(breaks_transaction(&failure(ffi::SQLITE_IOERR)));
        assert!(breaks_transaction(&failure(ffi::SQLITE_BUSY)));
        assert!(!breaks_transaction(&failure(ffi::SQLITE_CONSTRAINT)));
        assert!(!breaks_transaction(&rusqlite::Error::QueryReturnedNoRows));
    }

    #[test]
    fn path_problems_at_open_name_the_path_field() {
        let e = map(&failure(ffi::SQLITE_NOTADB), Path::new("x.db"), Phase::Open);
        assert_eq!(e.invalid_field(), Some("path"));
        assert!(
            e.to_string().contains("x.db is not an SQLite database"),
            "{e}"
        );
    }
}
