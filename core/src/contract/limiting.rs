//! The [`Limiting`] group of the contract.

use async_trait::async_trait;

use super::{Base, Valid};
use crate::error::Result;
use crate::keys::QueueName;
use crate::store::{DeferParams, LimitsParams, QueueLimits};

// The docs name them.
#[cfg(doc)]
use crate::store::Capabilities;
#[cfg(doc)]
use crate::Store;

/// Queue limits (G16, G17, G18), for stores that declare
/// [`Capabilities::limits`](crate::Capabilities::limits); every method has a default for
/// stores that do not.
///
/// Part of the contract a store implements; callers reach these methods through
/// [`Store`], which validates their params first (see [`Valid`]).
#[async_trait]
pub trait Limiting: Base {
    /// Sets a queue's limits (G16, G17, G18), replacing what it had, at run time.
    /// Answers the limits it had before, `None` when it had none. Only on stores that
    /// declare [`Capabilities::limits`]; the default answers
    /// [`Error::Unsupported`](crate::Error::Unsupported) and writes nothing.
    ///
    /// # Contract
    /// - Validates first: a limit of 0 or over the maximum, a rate under one start or
    ///   a period under 1 s, a weight of 0 is [`Error::InvalidInput`](crate::Error)
    ///   naming the field, and nothing is written (G15; `g16_concurrency_limits`,
    ///   `bad_limits_name_their_field_and_write_nothing`).
    /// - Claims that start after it returns obey the new limits. Lowering a limit below
    ///   what runs preempts nothing: running leases run on, renew and finish as usual,
    ///   and no claim takes a slot of the key until its running count is under the new
    ///   bound (G16; `g16_concurrency_limits`,
    ///   `lowering_a_limit_preempts_nothing_and_stops_new_claims`).
    /// - A queue with limits is listed by [`Store::limits_list`] even with no items.
    async fn limits_set(&self, params: Valid<LimitsParams>) -> Result<Option<QueueLimits>> {
        let _ = params;
        Err(crate::Error::unsupported("limits_set", self.name()))
    }

    /// The limits of `queue`, `None` when it has none (G16; `g16_concurrency_limits`).
    /// Reads nothing but the configuration and writes nothing.
    async fn limits_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        let _ = queue;
        Err(crate::Error::unsupported("limits_get", self.name()))
    }

    /// Removes `queue`'s limits; answers true when it had some. Its rate history (the
    /// starts of the last period, a deferral) goes with them (G16, G17).
    async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
        let _ = queue;
        Err(crate::Error::unsupported("limits_clear", self.name()))
    }

    /// Every queue with limits, by name, with its limits.
    async fn limits_list(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        Err(crate::Error::unsupported("limits_list", self.name()))
    }

    /// Pushes the next start of a limit key (or of the whole queue) back: no claim
    /// starts an item of `params.key` in `params.queue` (of any key, with `None`)
    /// before `now + params.delay` (G17). A handler told "rate limited, retry in 30 s"
    /// by the service behind its key calls it, then fails or releases its attempt.
    ///
    /// # Contract
    /// - Items held back are not claimed, so they use no attempt; other keys' items
    ///   are not held up (G17; `g17_rate_limits`,
    ///   `a_deferred_key_starts_nothing_until_its_time_and_holds_up_no_other_key`).
    /// - A later deferral never shortens an earlier one.
    /// - Works whether or not the queue has limits; [`Store::limits_clear`] ends it.
    async fn limits_defer(&self, params: Valid<DeferParams>) -> Result<()> {
        let _ = params;
        Err(crate::Error::unsupported("limits_defer", self.name()))
    }

    /// How long from the store's `now` until time alone may make claimable an item of
    /// `queues` that limits hold back (G16, G17): the next start a rate allows, the end
    /// of a deferral, or, while items wait for a slot, the next expiry of a running
    /// lease of those queues (a crashed holder's slot comes back then). `None` when
    /// nothing waits on time: a slot a finish gives back fires the wake signal
    /// instead ([`Store::wake_signal`]). Writes nothing that changes an answer. The
    /// worker asks after a claim that found nothing and polls again at that time
    /// rather than a poll interval later. The default (stores without
    /// [`Capabilities::limits`]) answers `None`.
    ///
    /// # Contract
    /// - Never later than the instant a claim would take a held-back item by time
    ///   alone; an earlier answer costs one empty poll, never a missed start
    ///   (runtime test `limits::a_worker_at_a_rate_polls_again_when_the_next_start_is_allowed`).
    async fn limits_wait(&self, queues: &[QueueName]) -> Result<Option<std::time::Duration>> {
        let _ = queues;
        Ok(None)
    }
}
