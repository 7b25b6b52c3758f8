//! Who may see and do what: [`Access`], [`Action`] and the [`Authorizer`] hook.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use axum::http::request::Parts;

/// A change the dashboard can make. Every one is a POST, checked on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// Pause a queue: its items are not claimed until it is resumed.
    Pause,
    /// Resume a paused queue.
    Resume,
    /// Cancel ready or scheduled items by id.
    Cancel,
    /// Put dead items back to ready, by id or by filter.
    Requeue,
    /// Delete dead items for good, by id or by filter.
    Discard,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 5] = [
        Action::Pause,
        Action::Resume,
        Action::Cancel,
        Action::Requeue,
        Action::Discard,
    ];

    /// The lowercase name (`"pause"`, ...), as audit events and metrics label it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Cancel => "cancel",
            Action::Requeue => "requeue",
            Action::Discard => "discard",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one request may do, as an [`Authorizer`] decides it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Every page and every action.
    Full,
    /// Every page, no action.
    ReadOnly,
    /// Every page and these actions only.
    Actions(BTreeSet<Action>),
    /// Nothing: every page answers 403.
    Forbidden,
}

impl Access {
    /// True when pages may be shown.
    pub fn can_view(&self) -> bool {
        !matches!(self, Access::Forbidden)
    }

    /// True when `action` is allowed.
    pub fn allows(&self, action: Action) -> bool {
        match self {
            Access::Full => true,
            Access::Actions(set) => set.contains(&action),
            Access::ReadOnly | Access::Forbidden => false,
        }
    }

    /// This access narrowed to reading when `read_only` is set.
    pub(crate) fn capped(self, read_only: bool) -> Access {
        match self {
            Access::Forbidden => Access::Forbidden,
            _ if read_only => Access::ReadOnly,
            other => other,
        }
    }
}

/// Decides each request's [`Access`] from its head (headers, extensions the host's auth
/// layer set, URI). Called on the server for every page and every action.
pub type Authorizer = Arc<dyn Fn(&Parts) -> Access + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_caps_every_access_but_forbidden() {
        assert_eq!(Access::Full.capped(true), Access::ReadOnly);
        let some = Access::Actions([Action::Pause].into());
        assert_eq!(some.clone().capped(true), Access::ReadOnly);
        assert_eq!(some.clone().capped(false), some);
        assert_eq!(Access::Forbidden.capped(true), Access::Forbidden);
    }

    #[test]
    fn a_set_of_actions_allows_those_and_no_other() {
        let a = Access::Actions([Action::Requeue, Action::Pause].into());
        assert!(a.allows(Action::Requeue) && a.allows(Action::Pause));
        assert!(!a.allows(Action::Discard) && !a.allows(Action::Cancel));
        assert!(a.can_view());
        assert!(!Access::Forbidden.can_view());
        assert!(!Access::ReadOnly.allows(Action::Pause));
    }
}
