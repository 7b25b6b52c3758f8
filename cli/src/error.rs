//! The one error type every subcommand answers, and the exit status it maps to.
//!
//! Exit statuses scripts can rely on (also in `tenure --help`):
//!
//! | status | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | failed: an internal error, a file that could not be written, a bench check |
//! | 2 | usage: a bad option or value, named; nothing was changed |
//! | 3 | unavailable: the store did not answer or was busy; retrying later may work |
//! | 4 | not found: the item, queue or database named does not exist |
//! | 5 | conflict: the state forbids it (a running item cannot be cancelled, a schema newer than this binary, data the command refuses to touch) |
//! | 130 | interrupted |

use tenure::{Error, ErrorKind};
use tenure_benches::BenchError;

/// The exit statuses, as documented above.
pub(crate) mod exit {
    pub(crate) const OK: u8 = 0;
    pub(crate) const FAILED: u8 = 1;
    pub(crate) const USAGE: u8 = 2;
    pub(crate) const UNAVAILABLE: u8 = 3;
    pub(crate) const NOT_FOUND: u8 = 4;
    pub(crate) const CONFLICT: u8 = 5;
    pub(crate) const INTERRUPTED: u8 = 130;
}

/// The exit-status table for `--help`.
pub(crate) const EXIT_CODES_HELP: &str = "Exit status:\n  \
    0    done\n  \
    1    failed (internal error, a file not written, a bench check)\n  \
    2    usage: a bad option or value, named; nothing was changed\n  \
    3    store unavailable or busy: retrying later may work\n  \
    4    not found: the item, queue or database named does not exist\n  \
    5    conflict: the state forbids it (a running item, a newer schema, data refused)\n  \
    130  interrupted\n\n\
    With --json, an error is one JSON document on stderr: \
    {\"error\": {\"kind\", \"message\", \"hint\", \"exit\"}}.";

/// Why a command stopped. Printed as `tenure: <message>` (and a hint) on stderr.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Options that cannot work together, naming the option.
    #[error("{0}")]
    Usage(String),
    /// The target holds data the command did not make; nothing was written.
    #[error("refusing to touch existing data: {0}")]
    Refused(String),
    /// The store refused an operation.
    #[error("{0}")]
    Store(#[from] tenure::Error),
    /// Something named does not exist, and what to do about it.
    #[error("{what} not found: {detail}")]
    NotFound {
        /// What was looked for (`"database"`, `"item"`).
        what: &'static str,
        /// Which, and where.
        detail: String,
    },
    /// Some of a batch was refused by the state of its items (cancel of a running
    /// item); the report says which.
    #[error("{0}")]
    Partial(String, u8),
    /// A seed, drain or check of the bench harness failed.
    #[error("bench: {0}")]
    Bench(#[from] BenchError),
    /// The database itself (outside the store), while setting up or cleaning up.
    #[error("{context}: {message}")]
    Database {
        /// What was being done.
        context: String,
        /// The driver's message.
        message: String,
    },
    /// A file could not be made, written or removed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The operating system's answer.
        #[source]
        source: std::io::Error,
    },
    /// The plot could not be drawn.
    #[error("plot: {0}")]
    Plot(String),
    /// A run finished, but not every item finished exactly once.
    #[error("exactly-once check failed: {0}")]
    ExactlyOnce(String),
    /// Interrupted (Ctrl-C) before the run finished.
    #[error("interrupted")]
    Interrupted,
}

impl CliError {
    pub(crate) fn db<E: std::fmt::Display>(
        context: impl Into<String>,
    ) -> impl FnOnce(E) -> CliError {
        let context = context.into();
        move |e| CliError::Database {
            context,
            message: e.to_string(),
        }
    }

    /// The exit status (see the module docs).
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => exit::USAGE,
            CliError::Refused(_) => exit::CONFLICT,
            CliError::Store(e) => match e.kind() {
                ErrorKind::InvalidInput | ErrorKind::Unsupported => exit::USAGE,
                ErrorKind::Unavailable => exit::UNAVAILABLE,
                ErrorKind::NotFound => exit::NOT_FOUND,
                ErrorKind::Conflict | ErrorKind::LeaseLost | ErrorKind::RenewalLimit => {
                    exit::CONFLICT
                }
                _ => exit::FAILED,
            },
            CliError::NotFound { .. } => exit::NOT_FOUND,
            CliError::Partial(_, code) => *code,
            CliError::Interrupted => exit::INTERRUPTED,
            CliError::Database { .. } => exit::UNAVAILABLE,
            CliError::Bench(_)
            | CliError::Io { .. }
            | CliError::Plot(_)
            | CliError::ExactlyOnce(_) => exit::FAILED,
        }
    }

    /// A short machine-readable kind, for `--json` errors.
    pub(crate) fn kind(&self) -> &'static str {
        match self.exit_code() {
            exit::USAGE => "usage",
            exit::UNAVAILABLE => "unavailable",
            exit::NOT_FOUND => "not_found",
            exit::CONFLICT => "conflict",
            exit::INTERRUPTED => "interrupted",
            _ => "failed",
        }
    }

    /// What the operator can do about it.
    pub(crate) fn hint(&self) -> Option<String> {
        match self {
            CliError::Store(e) => store_hint(e),
            CliError::NotFound {
                what: "database", ..
            } => Some("check the URL; a new database is made with `tenure migrate URL`".to_owned()),
            _ => None,
        }
    }
}

fn store_hint(e: &Error) -> Option<String> {
    Some(match e {
        Error::InvalidInput { field: "url", .. } => {
            format!("a store URL looks like {}", tenure::url_shapes())
        }
        Error::InvalidInput { field, .. } => format!("fix the value of {field} and run it again"),
        Error::Unavailable { .. } => {
            "is the server running and reachable at that URL? The command can be retried as it is"
                .to_owned()
        }
        Error::Unsupported { .. } => "this store does not offer it".to_owned(),
        Error::Conflict { what: "schema", .. } => {
            "the database was migrated by a newer Tenure: upgrade this binary".to_owned()
        }
        _ => return None,
    })
}

impl From<std::convert::Infallible> for CliError {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_map_to_the_documented_statuses() {
        let cases = [
            (Error::invalid("queue", "x"), exit::USAGE),
            (Error::conflict("item", "running"), exit::CONFLICT),
            (Error::not_found("item", "x"), exit::NOT_FOUND),
            (Error::unavailable("sqlite", "gone"), exit::UNAVAILABLE),
            (Error::internal("sqlite", "bug"), exit::FAILED),
        ];
        for (e, code) in cases {
            assert_eq!(CliError::Store(e).exit_code(), code);
        }
    }
}
