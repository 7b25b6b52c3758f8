//! What a worker runs: the [`Handler`], the [`Job`] it receives and the [`JobError`] it
//! may answer.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use tenure_core::{Item, Lease, LeaseToken, Progress, Result};

use crate::attempt::{Control, StopReason};

/// One claimed attempt, as a [`Handler`] receives it: the lease (item, token, owner,
/// expiry at claim time) and a way to learn when it must stop.
///
/// The attempt must stop when its lease was lost, half a lease passed without a
/// successful renewal (self-stop), the handler timeout fired, or the worker's shutdown
/// grace ended: [`Job::cancelled`] resolves, [`Job::is_cancelled`] turns true, and
/// [`Job::stop_reason`] says which. A handler honours it between steps; one that does
/// not is dropped at its next `.await` half a lease after the cancellation, so by the
/// time its lease can expire it no longer runs.
///
/// A handler whose work is a write to the application's own database can finalize
/// the attempt itself, in the same transaction as that write: see
/// [`Job::take_finalize`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Job {
    /// The lease as the claim returned it: the item, the fencing token, the owner and
    /// the expiry at claim time (renewals extend the lease in the store).
    pub lease: Lease,
    /// Stop reason, cancellation token and the take-over flag, shared by every clone.
    control: Arc<Control>,
}

impl Job {
    /// A job for `lease` watched by `cancel` (for testing a handler on its own):
    /// cancelling `cancel` cancels the job.
    pub fn new(lease: Lease, cancel: CancellationToken) -> Self {
        Job {
            lease,
            control: Arc::new(Control::with_token(cancel)),
        }
    }

    pub(crate) fn with_control(lease: Lease, control: Arc<Control>) -> Self {
        Job { lease, control }
    }

    /// The attempt's shared control, for the runtime to read once the handler has
    /// returned.
    pub(crate) fn control(&self) -> &Arc<Control> {
        &self.control
    }

    /// Takes the finalize of this attempt over from the runtime and returns the
    /// attempt's fencing token, for the handler to complete (or fail, or release) the
    /// item itself, typically inside its own database transaction together with its
    /// business write: `SqliteStore::complete_in_tx`, `PgStore::complete_in_tx` and
    /// their `fail_in_tx` and `release_in_tx` siblings. Calling it again returns the
    /// same token.
    ///
    /// # Behavior
    ///
    /// - While the handler runs, the runtime keeps renewing the lease as usual (the
    ///   handler's transaction needs a live lease until it commits), and the
    ///   cancellation token fires as usual; a renewal answered "lease lost" cancels
    ///   the handler, whose fenced finalize then answers lease lost too, so it rolls
    ///   back.
    /// - Returning `Ok(())` means "finalized by the handler": the runtime writes
    ///   nothing for this attempt (no complete, no fail, no release at shutdown),
    ///   stops renewing its lease and forgets it, whatever stopped it meanwhile. It is
    ///   counted in [`MetricsSnapshot::handler_finalized`](crate::MetricsSnapshot),
    ///   not in `completed`. A handler that returns `Ok(())` without having
    ///   finalized (its transaction rolled back and it said nothing) leaves the item
    ///   running until its lease expires; recovery then hands it out again and counts
    ///   a stall (G2, G6). So return `Ok(())` only once your finalize committed.
    /// - Returning an error (or panicking) after taking over is handled as without
    ///   it: the runtime records the failure with its own fenced `fail` (a retry
    ///   after the retry policy's delay, or dead for a permanent error; G5). If the
    ///   handler's own finalize had already committed, the fence refuses that `fail`
    ///   and nothing changes: the runtime reads the item, sees this attempt finished,
    ///   and counts it in `handler_finalized`, not in `lost`. If the handler's
    ///   transaction rolled back, the item is still running under this lease and the
    ///   failure is recorded at once, so the item is retried without waiting for its
    ///   lease to expire. Returning the error is therefore the right answer to a
    ///   rolled-back transaction (for example one whose fenced finalize answered
    ///   lease lost: then the runtime's `fail` is refused too and counted as lost).
    /// - With a [`handler_timeout`](crate::WorkerBuilder::handler_timeout), a
    ///   handler that times out and then returns an error is recorded as a timed-out
    ///   failure as usual; one that returns `Ok(())` finalized itself.
    /// - Return promptly once the transaction has committed: a renewal that comes
    ///   due between the commit and the return finds the item finished and counts the
    ///   attempt as lost.
    ///
    /// ```no_run
    /// # use tenure_runtime::{Job, JobError};
    /// # use tenure_core::{CompleteParams, TokenOutcome};
    /// # fn complete_in_my_tx(_: CompleteParams) -> Result<TokenOutcome, JobError> { Ok(TokenOutcome::Accepted) }
    /// async fn handle(job: Job) -> Result<(), JobError> {
    ///     let token = job.take_finalize();
    ///     // BEGIN; business write; complete_in_tx(&tx, [token]); then:
    ///     match complete_in_my_tx(CompleteParams::new(vec![token]))? {
    ///         TokenOutcome::Accepted => Ok(()), // committed
    ///         TokenOutcome::LeaseLost => Err(JobError::retry("lease lost; rolled back")),
    ///         TokenOutcome::OutOfOrder => Err(JobError::retry("behind its stream; rolled back")),
    ///     }
    /// }
    /// ```
    pub fn take_finalize(&self) -> LeaseToken {
        self.control.take_over();
        self.lease.token
    }

    /// True once [`Job::take_finalize`] has been called on this job or a clone of it.
    pub fn finalize_taken(&self) -> bool {
        self.control.taken()
    }

    /// The item being worked on.
    pub fn item(&self) -> &Item {
        &self.lease.item
    }

    /// The item's payload.
    pub fn payload(&self) -> &[u8] {
        &self.lease.item.payload
    }

    /// The payload parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        self.lease.item.json()
    }

    /// The fencing token of this attempt.
    pub fn token(&self) -> LeaseToken {
        self.lease.token
    }

    /// This attempt's number (1 for the first claim).
    pub fn attempt(&self) -> u32 {
        self.lease.token.attempt
    }

    /// True once the attempt has been told to stop.
    pub fn is_cancelled(&self) -> bool {
        self.control.is_cancelled()
    }

    /// Waits until the attempt is told to stop.
    pub async fn cancelled(&self) {
        self.control.token().cancelled_owned().await;
    }

    /// A token that is cancelled when the attempt is told to stop, to hand to work the
    /// handler spawns. Made on the first call (the runtime makes none for a handler
    /// that never asks and returns on its first poll); every call returns the same
    /// token.
    pub fn cancel_token(&self) -> CancellationToken {
        self.control.token()
    }

    /// Why the attempt was told to stop, once it has been.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.control.stop_reason()
    }

    /// Reports how far the attempt has come: `fraction` in `0.0..=1.0` and a short
    /// `message` (at most [`MAX_PROGRESS_MESSAGE_BYTES`](tenure_core::MAX_PROGRESS_MESSAGE_BYTES)
    /// bytes, no control characters).
    ///
    /// # Behavior
    ///
    /// - Costs no store call: the progress travels with the attempt's next renewal,
    ///   which the runtime sends anyway. Reports made between two renewals replace
    ///   each other; the latest is sent. A handler that never reports sends nothing
    ///   new with its renewals.
    /// - The store keeps it only when that renewal is accepted, fenced on the lease:
    ///   progress of an attempt whose lease was lost is never stored.
    ///   [`Item::progress`](tenure_core::Item::progress) reads it back, naming the
    ///   attempt; `tenure items` and the dashboard show it.
    /// - A fraction outside `0..=1` (or not finite) or a bad message is
    ///   [`Error::InvalidInput`](tenure_core::Error) naming `progress` or
    ///   `progress_message`, and nothing is reported.
    pub fn report_progress(&self, fraction: f64, message: impl Into<String>) -> Result<()> {
        self.control.report(Progress::new(fraction, message)?);
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Retry(Option<Duration>),
    Permanent,
}

/// A handler's failure: retryable (the default) or permanent.
///
/// A retryable failure puts the item back after the worker's
/// [`RetryPolicy`](tenure_core::RetryPolicy) delay (or the delay given to
/// [`JobError::retry_after`]), or makes it dead once its attempts are used up; a
/// permanent one makes it dead at once (G5). Any `std::error::Error` converts into a
/// retryable `JobError`, so `?` works in handlers.
pub struct JobError {
    kind: Kind,
    message: String,
}

impl JobError {
    /// A retryable failure, retried after the worker's retry policy delay.
    pub fn retry(message: impl Into<String>) -> Self {
        JobError {
            kind: Kind::Retry(None),
            message: message.into(),
        }
    }

    /// A retryable failure, retried `delay` after it is recorded.
    pub fn retry_after(message: impl Into<String>, delay: Duration) -> Self {
        JobError {
            kind: Kind::Retry(Some(delay)),
            message: message.into(),
        }
    }

    /// A permanent failure: the item goes dead at once.
    pub fn permanent(message: impl Into<String>) -> Self {
        JobError {
            kind: Kind::Permanent,
            message: message.into(),
        }
    }

    /// True for a permanent failure.
    pub fn is_permanent(&self) -> bool {
        self.kind == Kind::Permanent
    }

    /// The delay asked for by [`JobError::retry_after`], if any.
    pub fn retry_delay(&self) -> Option<Duration> {
        match self.kind {
            Kind::Retry(d) => d,
            Kind::Permanent => None,
        }
    }

    /// The message kept as the item's `last_error`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobError")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .finish()
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for JobError {
    fn from(e: E) -> Self {
        let mut message = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        JobError::retry(message)
    }
}

/// The work a [`Worker`](crate::Worker) runs for each claimed item.
///
/// Implemented for every `Fn(Job) -> impl Future<Output = Result<(), JobError>>`, so an
/// async closure works (`|job: Job| async move { .. }`); implement it on a type of your
/// own, or share one as `Arc<dyn Handler>` through
/// [`WorkerBuilder::handler_arc`](crate::WorkerBuilder::handler_arc).
///
/// `Ok(())` completes the item; `Err` fails it ([`JobError`]); a panic is a retryable
/// failure carrying the panic message, and the worker carries on.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Runs one attempt.
    async fn handle(&self, job: Job) -> Result<(), JobError>;
}

// By hand rather than through `#[async_trait]`: the closure's own future is boxed as
// it is, without a wrapper future around it (one move of the job less per attempt).
impl<F, Fut> Handler for F
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), JobError>> + Send + 'static,
{
    fn handle<'life0, 'async_trait>(
        &'life0 self,
        job: Job,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), JobError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin((self)(job))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_std_error_converts_to_a_retryable_failure_with_its_source_chain() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl fmt::Display for Outer {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("sending mail")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e: JobError = Outer(std::io::Error::other("connection reset")).into();
        assert!(!e.is_permanent());
        assert_eq!(e.retry_delay(), None);
        assert_eq!(e.message(), "sending mail: connection reset");
    }

    #[test]
    fn permanent_and_delayed_failures_say_so() {
        assert!(JobError::permanent("bad address").is_permanent());
        let e = JobError::retry_after("rate limited", Duration::from_secs(5));
        assert!(!e.is_permanent());
        assert_eq!(e.retry_delay(), Some(Duration::from_secs(5)));
    }
}
