//! Params of the [`Finalize`](crate::contract::Finalize) group: renew, complete, fail
//! and release.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::model::{LeaseToken, Progress};

use super::Limits;

/// Parameters of [`Store::renew`](crate::Store::renew).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RenewParams {
    /// The leases to extend.
    pub tokens: Vec<LeaseToken>,
    /// The new lease length, counted from the store's `now`.
    pub lease_for: Duration,
    /// The progress each holder reports with its renewal, by position in `tokens`:
    /// empty (the default, nothing reported) or one entry per token, `None` for a
    /// token that reports nothing. Kept on an item only when its renewal is accepted.
    pub progress: Vec<Option<Progress>>,
}

impl RenewParams {
    /// Renew `tokens` for `lease_for` from now.
    pub fn new(tokens: Vec<LeaseToken>, lease_for: Duration) -> Self {
        RenewParams {
            tokens,
            lease_for,
            progress: Vec::new(),
        }
    }

    /// Reports `progress` with the renewals, one entry per token (`None` for a token
    /// that reports nothing).
    pub fn with_progress(mut self, progress: Vec<Option<Progress>>) -> Self {
        self.progress = progress;
        self
    }

    /// The progress reported for the token at `index`, if any.
    pub fn progress_at(&self, index: usize) -> Option<&Progress> {
        self.progress.get(index).and_then(Option::as_ref)
    }

    /// Checks the batch bounds and the lease duration, and that `progress` is empty
    /// or has one entry per token (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        limits.check_tokens(&self.tokens)?;
        if !self.progress.is_empty() && self.progress.len() != self.tokens.len() {
            return Err(Error::invalid(
                "progress",
                format!(
                    "{} entries for {} tokens; give one per token or none",
                    self.progress.len(),
                    self.tokens.len()
                ),
            ));
        }
        limits.check_lease("lease_for", self.lease_for)
    }
}

/// Parameters of [`Store::complete`](crate::Store::complete).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CompleteParams {
    /// The attempts that finished successfully.
    pub tokens: Vec<LeaseToken>,
}

impl CompleteParams {
    /// Complete these attempts.
    pub fn new(tokens: Vec<LeaseToken>) -> Self {
        CompleteParams { tokens }
    }

    /// Checks the batch bounds (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        limits.check_tokens(&self.tokens)
    }
}

/// Parameters of [`Store::release`](crate::Store::release).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ReleaseParams {
    /// The attempts given back unfinished.
    pub tokens: Vec<LeaseToken>,
}

impl ReleaseParams {
    /// Release these attempts.
    pub fn new(tokens: Vec<LeaseToken>) -> Self {
        ReleaseParams { tokens }
    }

    /// Checks the batch bounds (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        limits.check_tokens(&self.tokens)
    }
}

/// Whether a failed attempt may be tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Retry this long after the store's `now`, unless attempts are exhausted.
    After(Duration),
    /// A permanent failure: the item goes dead at once.
    Never,
}

/// Most bytes of an error message a store keeps; longer messages are cut.
pub const MAX_ERROR_BYTES: usize = 8 * 1024;

/// One failed attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Failure {
    /// The attempt.
    pub token: LeaseToken,
    /// Why it failed; kept as the item's `last_error` (at most [`MAX_ERROR_BYTES`]).
    pub error: String,
    /// Whether and when to retry.
    pub retry: Retry,
}

impl Failure {
    /// A retryable failure: back to ready after `delay`, or dead if attempts are exhausted.
    pub fn retry_after(token: LeaseToken, delay: Duration, error: impl Into<String>) -> Self {
        Failure {
            token,
            error: truncate(error.into()),
            retry: Retry::After(delay),
        }
    }

    /// A permanent failure: dead at once.
    pub fn permanent(token: LeaseToken, error: impl Into<String>) -> Self {
        Failure {
            token,
            error: truncate(error.into()),
            retry: Retry::Never,
        }
    }
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_ERROR_BYTES {
        let mut cut = MAX_ERROR_BYTES;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// Parameters of [`Store::fail`](crate::Store::fail).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FailParams {
    /// The failed attempts.
    pub failures: Vec<Failure>,
}

impl FailParams {
    /// Fail these attempts.
    pub fn new(failures: Vec<Failure>) -> Self {
        FailParams { failures }
    }

    /// Fail one attempt.
    pub fn one(failure: Failure) -> Self {
        FailParams {
            failures: vec![failure],
        }
    }

    /// Checks the batch bounds (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        let tokens: Vec<LeaseToken> = self.failures.iter().map(|f| f.token).collect();
        limits.check_tokens(&tokens)?;
        for f in &self.failures {
            if let Retry::After(d) = f.retry {
                if d > Duration::from_secs(366 * 24 * 60 * 60) {
                    return Err(Error::invalid("retry", format!("{d:?} is over a year")));
                }
            }
        }
        Ok(())
    }
}
