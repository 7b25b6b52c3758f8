//! The one error type every subcommand answers.

use tenure_benches::BenchError;

/// Why a command stopped. Printed as `tenure: <message>` with exit status 1.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Options that cannot work together, naming the option.
    #[error("{0}")]
    Usage(String),
    /// The target holds data the command did not make; nothing was written.
    #[error("refusing to touch existing data: {0}")]
    Refused(String),
    /// The store refused an operation.
    #[error("store: {0}")]
    Store(#[from] tenure::Error),
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
}
