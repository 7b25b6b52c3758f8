//! The contract as a store implements it: [`Store`] in groups.
//!
//! Callers use [`Store`]. A store implements [`Base`] and the six groups below, one
//! impl per group, each in the file of that group (`store/claims.rs`, ...), and gets
//! [`Store`] from core:
//!
//! | group | methods |
//! |---|---|
//! | [`Claims`] | `enqueue`, `claim` |
//! | [`Finalize`] | `renew`, `complete`, `fail`, `release` |
//! | [`Recovery`] | `recover_expired`, `purge` |
//! | [`Inspect`] | `dead_requeue`, `dead_discard`, `item_get`, `queue_counts`, `item_list`, `lease_list`, `queue_list`, `item_cancel`, `queue_pause`, `queue_resume` |
//! | [`Instances`] | `instance_heartbeat`, `instance_list`, `instance_evict_stale`, `instance_deregister`, `leader_acquire`, `leader_resign`, `leader_get` |
//! | [`Limiting`] | `limits_set`, `limits_get`, `limits_clear`, `limits_list`, `limits_defer`, `limits_wait` (defaults for stores without limits) |
//! | [`History`] | `history_add`, `history` |
//!
//! **Validated once.** [`Store`] checks every params struct against the store's
//! [`Base::limits`] before the store sees it (G15; group `g15_bad_input`), and hands it
//! on as [`Valid`], which only that check makes. So a store never calls `validate`
//! itself, and cannot be handed params that skipped it. The one check left to the store
//! is [`EnqueueParams::validate_schedule`](crate::EnqueueParams::validate_schedule),
//! which needs the `now` the store reads for the enqueue.
//!
//! A store that wraps another (to count, log or break calls) implements [`Store`]
//! itself with [`forward_store!`](crate::forward_store) instead, and leaves the
//! validation to the store it wraps.
//!
//! Bring a group trait into scope only where you implement it: a group method and the
//! [`Store`] method of the same name would both apply to a concrete store, so
//! `store.claim(..)` there is ambiguous. Callers import [`Store`] alone.
//!
//! ```
//! use tenure_core::contract::{Base, Claims, Valid};
//! use tenure_core::{async_trait, ClaimParams, EnqueueParams, Enqueued, Lease, Result};
//!
//! #[derive(Debug)]
//! struct Nothing;
//!
//! impl Base for Nothing {
//!     fn name(&self) -> &'static str {
//!         "nothing"
//!     }
//! }
//!
//! #[async_trait]
//! impl Claims for Nothing {
//!     async fn enqueue(&self, params: Valid<EnqueueParams>) -> Result<Vec<Enqueued>> {
//!         // `params` passed `EnqueueParams::validate`: at least one item, none too big.
//!         assert!(!params.items.is_empty());
//!         Ok(Vec::new())
//!     }
//!
//!     async fn claim(&self, _params: Valid<ClaimParams>) -> Result<Vec<Lease>> {
//!         Ok(Vec::new())
//!     }
//! }
//! # // The other groups make it a `Store`; this example stops at one.
//! ```

mod claims;
mod finalize;
mod history;
mod inspect;
mod instances;
mod limiting;
mod recovery;

use std::fmt;
use std::ops::Deref;

use crate::error::Result;
use crate::store::{Capabilities, Limits, WakeSignal};

pub use claims::Claims;
pub use finalize::Finalize;
pub use history::History;
pub use inspect::{stop_running, Inspect};
pub use instances::Instances;
pub use limiting::Limiting;
pub use recovery::Recovery;

// The docs name it.
#[cfg(doc)]
use crate::Store;

/// What a store is, beside its operations: its name, its optional features, its bounds
/// and its wake signal. Every group builds on it.
pub trait Base: Send + Sync + fmt::Debug + 'static {
    /// Short backend name used in errors and reports (`"postgres"`, `"sqlite"`, `"memory"`).
    fn name(&self) -> &'static str;

    /// Optional features this store offers.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// The bounds this store enforces (G15); [`Store`] validates every params struct
    /// against them before the store sees it.
    fn limits(&self) -> Limits {
        Limits::default()
    }

    /// An in-process signal fired after every enqueue through this handle (and, with
    /// [`Capabilities::cross_process_wakeups`], after enqueues elsewhere), or `None`.
    ///
    /// A store with cross-process wake-ups reports on the signal whether its listener
    /// is delivering them ([`WakeSignal::set_health`], [`WakeHealth`](crate::WakeHealth));
    /// the worker polls at its tight base while it is down. Every call MUST hand out the
    /// same signal (clones of it), so the health one listener sets is seen by every
    /// worker.
    fn wake_signal(&self) -> Option<WakeSignal> {
        None
    }
}

/// Params that passed their `validate` against the store's [`Base::limits`].
///
/// Only [`Store`] makes one, right before it calls the group method, so a store reads
/// its params knowing every bound of G15 holds. It reads them through `Deref`, or takes
/// them with [`Valid::into_inner`].
#[derive(Clone, Debug)]
pub struct Valid<P>(P);

impl<P> Valid<P> {
    /// Checks `params` with `check` and wraps them when it passes.
    pub(crate) fn check(params: P, check: impl FnOnce(&P) -> Result<()>) -> Result<Self> {
        check(&params)?;
        Ok(Valid(params))
    }

    /// The params themselves.
    pub fn into_inner(self) -> P {
        self.0
    }
}

impl<P> Deref for Valid<P> {
    type Target = P;

    fn deref(&self) -> &P {
        &self.0
    }
}

impl<P> AsRef<P> for Valid<P> {
    fn as_ref(&self) -> &P {
        &self.0
    }
}
