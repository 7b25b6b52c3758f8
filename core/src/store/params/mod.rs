//! One params struct per [`Store`](super::Store) operation, in a file per contract group,
//! and the [`Limits`] they are checked against.
//!
//! Each is built by a core constructor and only read by stores; all are
//! `#[non_exhaustive]`, so fields can be added without breaking a custom store. Each
//! has a `validate` method, which [`Store`](super::Store) calls with the store's
//! [`Limits`] before the store sees the params (G15; see [`Valid`](crate::contract::Valid)).

mod claims;
mod dead;
mod finalize;
mod instances;
mod recovery;
#[cfg(test)]
mod tests;

pub use claims::{ClaimParams, EnqueueParams, MAX_STREAM_RUN};
pub use dead::{DiscardParams, RequeueParams};
pub use finalize::{
    CompleteParams, FailParams, Failure, ReleaseParams, RenewParams, Retry, MAX_ERROR_BYTES,
};
pub use instances::{
    DeregisterParams, EvictParams, HeartbeatParams, LeaderParams, DEFAULT_STALE_AFTER,
};
pub use recovery::{PurgeParams, RecoverParams};

use std::time::Duration;

use crate::error::{Error, Result};
use crate::model::LeaseToken;

/// Default [`Limits::schedule_window`]: 100 years of 365.25 days.
pub const DEFAULT_SCHEDULE_WINDOW: Duration = Duration::from_secs(36_525 * 24 * 60 * 60);

/// Default [`Limits::max_claim_queues`].
pub const DEFAULT_MAX_CLAIM_QUEUES: usize = 64;

/// The bounds a store enforces on its input (G15). Stores hold one, usually the
/// default, and pass it to every `validate` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest payload in bytes. Default 1 MiB.
    pub max_payload_bytes: usize,
    /// Most items in one enqueue call. Default 10 000.
    pub max_enqueue_batch: usize,
    /// Most items in one claim and most tokens in one renew, complete, fail or
    /// release call. Default 1 000.
    pub max_batch: usize,
    /// Shortest lease. Default 100 ms.
    pub min_lease: Duration,
    /// Longest lease. Default 24 h.
    pub max_lease: Duration,
    /// How far from the store's `now` an item's run time may lie, either side: an
    /// enqueue delay at most this long, a `run_at` no further than this before or after
    /// `now`. Default [`DEFAULT_SCHEDULE_WINDOW`] (100 years), which also keeps every
    /// run time exact in stores that keep times as 53-bit floats.
    pub schedule_window: Duration,
    /// Most queues one claim may name. Default [`DEFAULT_MAX_CLAIM_QUEUES`] (64): a
    /// claim looks at each queue's ready work, so its cost grows with the list.
    pub max_claim_queues: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_payload_bytes: 1024 * 1024,
            max_enqueue_batch: 10_000,
            max_batch: 1_000,
            min_lease: Duration::from_millis(100),
            max_lease: Duration::from_secs(24 * 60 * 60),
            schedule_window: DEFAULT_SCHEDULE_WINDOW,
            max_claim_queues: DEFAULT_MAX_CLAIM_QUEUES,
        }
    }
}

impl Limits {
    /// Sets the largest payload in bytes.
    pub fn with_max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    fn check_lease(&self, field: &'static str, d: Duration) -> Result<()> {
        if d < self.min_lease || d > self.max_lease {
            return Err(Error::invalid(
                field,
                format!(
                    "{d:?} is outside {:?}..={:?}",
                    self.min_lease, self.max_lease
                ),
            ));
        }
        Ok(())
    }

    fn check_batch(&self, field: &'static str, len: usize, max: usize) -> Result<()> {
        if len == 0 {
            return Err(Error::invalid(field, "must hold at least one entry"));
        }
        if len > max {
            return Err(Error::invalid(
                field,
                format!("holds {len} entries; the limit is {max}"),
            ));
        }
        Ok(())
    }

    fn check_tokens(&self, tokens: &[LeaseToken]) -> Result<()> {
        self.check_batch("tokens", tokens.len(), self.max_batch)?;
        // A short batch (one token, the common case) is checked pairwise, without
        // building a hash set.
        let dup = if tokens.len() <= 16 {
            tokens
                .iter()
                .enumerate()
                .find(|(i, t)| tokens[..*i].iter().any(|u| u.id == t.id))
                .map(|(_, t)| t)
        } else {
            let mut ids: Vec<_> = tokens.iter().map(|t| t.id).collect();
            ids.sort_unstable();
            ids.windows(2)
                .find(|w| w[0] == w[1])
                .and_then(|w| tokens.iter().find(|t| t.id == w[0]))
        };
        if let Some(t) = dup {
            return Err(Error::invalid(
                "tokens",
                format!("item {} appears more than once", t.id),
            ));
        }
        Ok(())
    }
}
