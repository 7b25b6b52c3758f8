//! The one classified error every store returns.
//!
//! Stores keep their driver errors private and map them here, so a caller decides
//! what to do from the variant alone: retry ([`Error::is_retryable`]), give up, or
//! treat the lease as gone.
//!
//! | variant | what the caller does | retryable |
//! |---|---|---|
//! | [`Error::InvalidInput`] | fix the argument named by `field`; nothing was written (G15) | no |
//! | [`Error::LeaseLost`], [`Error::RenewalLimit`] | stop working on the item; another attempt owns it or it is finished (G3, G4) | no |
//! | [`Error::Conflict`], [`Error::NotFound`] | the state is not what the call assumed | no |
//! | [`Error::Unavailable`] | try the same call again later; the store recovers by itself | yes |
//! | [`Error::Config`] | fix the deployment (URL, database, role, password, migrations); no call succeeds until then | no |
//! | [`Error::Corrupt`] | restore the store's data from a backup; the store refuses to guess | no |
//! | [`Error::Unsupported`] | use another store or capability | no |
//! | [`Error::Internal`] | report a bug | no |

use std::fmt;

use crate::model::LeaseToken;

/// A boxed error source, as carried by [`Error::Unavailable`] and [`Error::Internal`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias used throughout Tenure.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong talking to a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad input; nothing was written (G15). Never retryable.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The offending field, as named in the params struct (`"queue"`, `"limit"`).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// The token is not the item's current running attempt; nothing changed (G3).
    /// Never retryable: another attempt owns the item, or it is finished.
    #[error("lease lost for item {} attempt {}", .token.id, .token.attempt)]
    LeaseLost {
        /// The token that was refused.
        token: LeaseToken,
    },

    /// Renewal refused because the attempt used all `max_renewals` renewals (G4).
    #[error("renewal limit {limit} reached for item {} attempt {}", .token.id, .token.attempt)]
    RenewalLimit {
        /// The token whose renewal was refused.
        token: LeaseToken,
        /// The item's renewal cap.
        limit: u32,
    },

    /// A state conflict that is not about a lease (for example requeueing an item that
    /// is not dead, or a store schema newer than this code).
    #[error("conflict on {what}: {reason}")]
    Conflict {
        /// What conflicted.
        what: &'static str,
        /// Why.
        reason: String,
    },

    /// The named thing does not exist.
    #[error("{what} {id} not found")]
    NotFound {
        /// The kind of thing (`"item"`, `"instance"`).
        what: &'static str,
        /// Its identifier.
        id: String,
    },

    /// The backend is unreachable, timed out, or refused for contention (serialization
    /// failure, deadlock, busy database). The only retryable kind: try again later.
    #[error("{store} unavailable: {source}")]
    Unavailable {
        /// The store's name.
        store: &'static str,
        /// The underlying cause.
        #[source]
        source: BoxError,
    },

    /// The operation needs a capability this store does not offer.
    #[error("{operation} is not supported by {store}")]
    Unsupported {
        /// The operation asked for.
        operation: &'static str,
        /// The store's name.
        store: &'static str,
    },

    /// A bug or corrupted state in the backend. Not retryable.
    #[error("{store} internal error: {source}")]
    Internal {
        /// The store's name.
        store: &'static str,
        /// The underlying cause.
        #[source]
        source: BoxError,
    },

    /// The store is reachable but its configuration is wrong: an unknown database or
    /// role, a refused password, a schema that was never migrated. Not retryable:
    /// every call answers the same until an operator fixes the deployment, so a
    /// worker should stop and say so rather than retry (unlike
    /// [`Error::Unavailable`], which heals by itself). The reason says what to fix
    /// (for example "run migrate").
    #[error("{store} configuration: {reason}")]
    Config {
        /// The store's name.
        store: &'static str,
        /// What is wrong and what to fix.
        reason: String,
    },

    /// The store's data failed an integrity check (for example a damaged SQLite
    /// file). Not retryable: the same data answers the same; restore it from a
    /// backup. The reason names the data (the file) and the problem found.
    #[error("{store} data corrupt: {reason}")]
    Corrupt {
        /// The store's name.
        store: &'static str,
        /// Which data, and what is wrong with it.
        reason: String,
    },
}

/// A fieldless mirror of [`Error`] for matching, logging and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// See [`Error::InvalidInput`].
    InvalidInput,
    /// See [`Error::LeaseLost`].
    LeaseLost,
    /// See [`Error::RenewalLimit`].
    RenewalLimit,
    /// See [`Error::Conflict`].
    Conflict,
    /// See [`Error::NotFound`].
    NotFound,
    /// See [`Error::Unavailable`].
    Unavailable,
    /// See [`Error::Unsupported`].
    Unsupported,
    /// See [`Error::Internal`].
    Internal,
    /// See [`Error::Config`].
    Config,
    /// See [`Error::Corrupt`].
    Corrupt,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl Error {
    /// Shorthand for [`Error::InvalidInput`].
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidInput {
            field,
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::Unavailable`].
    pub fn unavailable(store: &'static str, source: impl Into<BoxError>) -> Self {
        Error::Unavailable {
            store,
            source: source.into(),
        }
    }

    /// Shorthand for [`Error::Internal`].
    pub fn internal(store: &'static str, source: impl Into<BoxError>) -> Self {
        Error::Internal {
            store,
            source: source.into(),
        }
    }

    /// Shorthand for [`Error::Conflict`].
    pub fn conflict(what: &'static str, reason: impl Into<String>) -> Self {
        Error::Conflict {
            what,
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::NotFound`].
    pub fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        Error::NotFound {
            what,
            id: id.into(),
        }
    }

    /// Shorthand for [`Error::Unsupported`].
    pub fn unsupported(operation: &'static str, store: &'static str) -> Self {
        Error::Unsupported { operation, store }
    }

    /// Shorthand for [`Error::Config`].
    pub fn config(store: &'static str, reason: impl Into<String>) -> Self {
        Error::Config {
            store,
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::Corrupt`].
    pub fn corrupt(store: &'static str, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            store,
            reason: reason.into(),
        }
    }

    /// The variant without its fields.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput { .. } => ErrorKind::InvalidInput,
            Error::LeaseLost { .. } => ErrorKind::LeaseLost,
            Error::RenewalLimit { .. } => ErrorKind::RenewalLimit,
            Error::Conflict { .. } => ErrorKind::Conflict,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Unavailable { .. } => ErrorKind::Unavailable,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::Internal { .. } => ErrorKind::Internal,
            Error::Config { .. } => ErrorKind::Config,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
        }
    }

    /// True only for [`Error::Unavailable`]: the same call may succeed later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Unavailable { .. })
    }

    /// The field named by an [`Error::InvalidInput`], if this is one.
    pub fn invalid_field(&self) -> Option<&'static str> {
        match self {
            Error::InvalidInput { field, .. } => Some(field),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unavailable_is_retryable() {
        let io = std::io::Error::other("down");
        assert!(Error::unavailable("memory", io).is_retryable());
        assert!(!Error::invalid("queue", "empty").is_retryable());
        assert!(!Error::conflict("item", "x").is_retryable());
        assert!(!Error::internal("memory", "bug").is_retryable());
        assert!(!Error::config("postgres", "run migrate").is_retryable());
        assert!(!Error::corrupt("sqlite", "x.db: malformed").is_retryable());
    }

    #[test]
    fn config_and_corrupt_are_kinds_of_their_own() {
        let e = Error::config("postgres", "database \"nope\" does not exist");
        assert_eq!(e.kind(), ErrorKind::Config);
        assert_eq!(
            e.to_string(),
            "postgres configuration: database \"nope\" does not exist"
        );
        let e = Error::corrupt("sqlite", "w.db: page 3 is never used");
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        assert_eq!(
            e.to_string(),
            "sqlite data corrupt: w.db: page 3 is never used"
        );
    }

    #[test]
    fn invalid_input_names_the_field() {
        let e = Error::invalid("limit", "must be at least 1");
        assert_eq!(e.invalid_field(), Some("limit"));
        assert_eq!(e.to_string(), "invalid limit: must be at least 1");
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
    }
}
