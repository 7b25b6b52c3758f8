//! Validated names and keys (G15).
//!
//! Each type checks its value once, at construction, and names the field in its
//! error, so nothing invalid can reach a store. The limits:
//!
//! | type | field | length (bytes) | characters |
//! |---|---|---|---|
//! | [`QueueName`] | `queue` | 1..=128 | ASCII letters, digits, `_ - . :` |
//! | [`OwnerId`] | `owner` | 1..=128 | ASCII letters, digits, `_ - . : @` |
//! | [`LeaderName`] | `leader` | 1..=128 | ASCII letters, digits, `_ - . :` |
//! | [`StreamKey`] | `stream` | 1..=255 | any non-control UTF-8 |
//! | [`ScopeKey`] | `scope` | 1..=255 | any non-control UTF-8 |
//! | [`DedupKey`] | `dedup_key` | 1..=255 | any non-control UTF-8 |
//! | [`LimitKey`] | `limit_key` | 1..=255 | any non-control UTF-8 |
//! | [`FairnessKey`] | `fairness_key` | 1..=255 | any non-control UTF-8 |

use std::fmt;

use crate::error::{Error, Result};

/// Longest queue, owner or leader name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// Longest stream, scope or dedup key, in bytes.
pub const MAX_KEY_BYTES: usize = 255;

fn check(field: &'static str, value: &str, max: usize, allowed: fn(char) -> bool) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if value.len() > max {
        return Err(Error::invalid(
            field,
            format!("is {} bytes; the limit is {max}", value.len()),
        ));
    }
    if let Some(c) = value.chars().find(|c| !allowed(*c)) {
        return Err(Error::invalid(
            field,
            format!("contains {c:?}, which is not allowed"),
        ));
    }
    Ok(())
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')
}

fn owner_char(c: char) -> bool {
    name_char(c) || c == '@'
}

fn key_char(c: char) -> bool {
    !c.is_control()
}

macro_rules! validated_string {
    ($(#[$doc:meta])* $name:ident, $field:literal, $max:expr, $allowed:expr) => {
        $(#[$doc])*
        ///
        /// Shared, not copied, when cloned: a claim hands the same queue and owner to
        /// every lease it returns.
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(std::sync::Arc<str>);

        impl $name {
            /// The field name this type reports in [`Error::InvalidInput`].
            pub const FIELD: &'static str = $field;

            /// Validates `value`; the error names the field.
            pub fn new(value: impl Into<String>) -> Result<Self> {
                let value = value.into();
                check($field, &value, $max, $allowed)?;
                Ok($name(value.into()))
            }

            /// The value as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The value as an owned string.
            pub fn into_string(self) -> String {
                self.0.to_string()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<&str> for $name {
            type Error = Error;
            fn try_from(value: &str) -> Result<Self> {
                $name::new(value)
            }
        }

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(value: String) -> Result<Self> {
                $name::new(value)
            }
        }
    };
}

validated_string!(
    /// The name of a queue: a separate line of work with its own claimers.
    QueueName, "queue", MAX_NAME_BYTES, name_char
);
validated_string!(
    /// Who holds a lease: a worker instance's identifier.
    OwnerId, "owner", MAX_NAME_BYTES, owner_char
);
validated_string!(
    /// The name of a leader lease (G13), such as `"maintenance"`.
    LeaderName, "leader", MAX_NAME_BYTES, name_char
);

/// The name of the leader lease that gates a worker's maintenance (G13) unless it is
/// given another: what the worker runtime takes and what `tenure status` and the
/// dashboard read.
pub const DEFAULT_LEADER_NAME: &str = "tenure.maintenance";
validated_string!(
    /// Items with one stream key run strictly one after another in enqueue order (G9).
    StreamKey, "stream", MAX_KEY_BYTES, key_char
);
validated_string!(
    /// At most one item per scope key runs at a time, across all workers (G10).
    ScopeKey, "scope", MAX_KEY_BYTES, key_char
);
validated_string!(
    /// A producer's idempotency key: a second enqueue inside the window is a duplicate (G11).
    DedupKey, "dedup_key", MAX_KEY_BYTES, key_char
);

validated_string!(
    /// The key a queue's concurrency and rate limits count by (G16, G17): a tenant, an
    /// external API. Counted per queue: one key in two queues is two keys.
    LimitKey, "limit_key", MAX_KEY_BYTES, key_char
);
validated_string!(
    /// The key a queue's fair shares are kept by (G18): a tenant. Per queue, as
    /// [`LimitKey`].
    FairnessKey, "fairness_key", MAX_KEY_BYTES, key_char
);

impl OwnerId {
    /// A fresh, unique owner id (`<prefix>-<uuid v7>`), for instances that have no
    /// stable name of their own.
    pub fn generate(prefix: &str) -> Result<Self> {
        OwnerId::new(format!("{prefix}-{}", uuid::Uuid::now_v7().simple()))
    }
}

/// Checks an SQL identifier a user configures (a schema name or table prefix): 1..=48
/// bytes of lowercase ASCII letters, digits and `_`, starting with a letter or `_`.
/// Stores call this before they run any statement with it.
pub fn validate_identifier(field: &'static str, value: &str) -> Result<()> {
    const MAX: usize = 48;
    check(field, value, MAX, |c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
    })?;
    if value.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(Error::invalid(field, "must not start with a digit"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_names_are_rejected_with_the_field_named() {
        assert_eq!(
            QueueName::new("").unwrap_err().invalid_field(),
            Some("queue")
        );
        assert_eq!(
            StreamKey::new("").unwrap_err().invalid_field(),
            Some("stream")
        );
        assert_eq!(
            ScopeKey::new("").unwrap_err().invalid_field(),
            Some("scope")
        );
        assert_eq!(
            DedupKey::new("").unwrap_err().invalid_field(),
            Some("dedup_key")
        );
        assert_eq!(OwnerId::new("").unwrap_err().invalid_field(), Some("owner"));
    }

    #[test]
    fn oversized_keys_are_rejected() {
        assert!(QueueName::new("q".repeat(MAX_NAME_BYTES)).is_ok());
        assert!(QueueName::new("q".repeat(MAX_NAME_BYTES + 1)).is_err());
        assert!(StreamKey::new("s".repeat(MAX_KEY_BYTES)).is_ok());
        assert!(StreamKey::new("s".repeat(MAX_KEY_BYTES + 1)).is_err());
    }

    #[test]
    fn queue_names_refuse_spaces_and_keys_refuse_control_characters() {
        assert!(QueueName::new("a b").is_err());
        assert!(StreamKey::new("user 42/é").is_ok());
        assert!(StreamKey::new("a\nb").is_err());
    }

    #[test]
    fn identifiers_refuse_anything_that_could_escape_sql() {
        assert!(validate_identifier("schema", "tenure_1").is_ok());
        for bad in [
            "",
            "Tenure",
            "a;drop",
            "a\"b",
            "1abc",
            "a-b",
            &"x".repeat(49),
        ] {
            assert_eq!(
                validate_identifier("schema", bad)
                    .unwrap_err()
                    .invalid_field(),
                Some("schema"),
                "{bad:?}"
            );
        }
    }
}
