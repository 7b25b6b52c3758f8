//! The instance's standing: its heartbeat switch, whether it has registered, and its
//! role in maintenance. Written by the instance loops (and the switch by
//! [`Worker::set_heartbeat`](crate::Worker::set_heartbeat)); read by the claim loop,
//! which waits for the first registration and registers again only while the
//! heartbeat is on.

use std::fmt;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use tenure_core::OwnerId;

/// The worker's standing in maintenance (G13).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// No acquisition has answered yet (or maintenance is off).
    Starting,
    /// This worker holds the leader lease and runs maintenance.
    Leader {
        /// The lease's fencing term.
        term: u64,
    },
    /// Another instance holds the leader lease.
    Follower {
        /// The holder.
        holder: OwnerId,
    },
    /// The store could not answer the acquisition: unknown, never taken as Follower.
    Faulted {
        /// The store's error.
        error: String,
    },
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Starting => f.write_str("starting"),
            Role::Leader { term } => write!(f, "leader (term {term})"),
            Role::Follower { holder } => write!(f, "follower of {holder}"),
            Role::Faulted { error } => write!(f, "faulted: {error}"),
        }
    }
}

/// The heartbeat switch, the first registration and the role.
#[derive(Debug)]
pub(crate) struct Standing {
    /// Fires once the first heartbeat has answered (or will not come).
    pub(crate) first_heartbeat: CancellationToken,
    /// The heartbeat off-switch ([`Worker::set_heartbeat`](crate::Worker::set_heartbeat)):
    /// true while it beats.
    pub(crate) heartbeat_on: watch::Sender<bool>,
    pub(crate) role: watch::Sender<Role>,
}

impl Standing {
    /// Not registered yet, the heartbeat on or off as configured, the role `Starting`
    /// (told through `role`).
    pub(crate) fn new(heartbeat_on: bool, role: watch::Sender<Role>) -> Self {
        Standing {
            first_heartbeat: CancellationToken::new(),
            heartbeat_on: watch::Sender::new(heartbeat_on),
            role,
        }
    }
}
