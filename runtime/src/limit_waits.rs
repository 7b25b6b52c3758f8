//! What an empty poll held back by queue limits was waiting for, per queue (G16,
//! G17): a slot (every limit key of the queue's due items, or the queue itself, at its
//! concurrency limit) or the next start a rate or a deferral allows. Counted in the
//! [`MetricsSnapshot`](crate::MetricsSnapshot) and exported as
//! `tenure_limit_saturated_total`, `tenure_limit_rate_waits_total` and
//! `tenure_limit_rate_wait_seconds`.
//!
//! # How a wait is told apart
//!
//! [`Store::limits_wait`](tenure_core::Store::limits_wait) answers the soonest of a
//! rate's next start, a deferral's end and, while items wait for a slot, the next
//! expiry of a running lease. So when a queue's answer is its soonest lease expiry
//! (the first lease of [`Store::lease_list`](tenure_core::Store::lease_list), soonest
//! expiry first) the queue waits for a slot: it is saturated. Any other answer is a
//! start a rate or a deferral holds back. The two reads are two calls, so the store's
//! `now` may move between them: the expiry read second may be nearer by up to the
//! time the calls took, and that much is allowed. A rate start that falls on the very
//! instant a lease expires counts as saturation.
//!
//! It costs one `lease_list` of one lease per held-back queue, plus one `limits_wait`
//! per queue on a worker of several queues, and only after an empty poll whose
//! `limits_wait` answered a time: never on the claim path of a queue that has work.

use std::time::Duration;

use tokio::time::Instant;

use tenure_core::{LeaseListParams, QueueName};

use crate::metrics::add;
use crate::shared::Shared;

/// What held one queue back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// Its due items wait for a slot (G16).
    Saturated,
    /// Its next start waits this long for a rate or a deferral (G17).
    Rate(Duration),
}

/// Counts what held each served queue back after an empty poll whose
/// `limits_wait` for all of them answered `all`.
pub(crate) async fn observe(shared: &Shared, all: Duration) {
    let single = shared.export.single();
    for (index, (queue, _)) in shared.export.queues().enumerate() {
        let wait = if single {
            Some(all)
        } else {
            match shared.store.limits_wait(std::slice::from_ref(queue)).await {
                Ok(w) => w,
                Err(e) => {
                    tracing::debug!(event = "claim", %queue, error = %e, "limits_wait failed");
                    continue;
                }
            }
        };
        let Some(wait) = wait else {
            continue;
        };
        let Some(held) = classify(shared, queue, wait).await else {
            continue;
        };
        let handles = shared.export.at(u32::try_from(index).unwrap_or(0));
        match held {
            Held::Saturated => {
                add(&shared.metrics.limit_saturated, 1);
                handles.limit_saturated.increment(1);
            }
            Held::Rate(wait) => {
                add(&shared.metrics.limit_rate_waits, 1);
                add(
                    &shared.metrics.limit_rate_wait_micros,
                    u64::try_from(wait.as_micros()).unwrap_or(u64::MAX),
                );
                handles.limit_rate_waits.increment(1);
                handles.limit_rate_wait.record(wait.as_secs_f64());
            }
        }
        tracing::debug!(event = "claim", %queue, ?held, "held back by its limits");
    }
}

/// Whether `queue`, whose next start the store said is `wait` away, waits for a slot
/// (its soonest lease expiry) or for a rate; `None` when its leases cannot be read.
async fn classify(shared: &Shared, queue: &QueueName, wait: Duration) -> Option<Held> {
    let sent = Instant::now();
    let page = match shared
        .store
        .lease_list(LeaseListParams::new(queue.clone()).limit(1))
        .await
    {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(event = "claim", %queue, error = %e, "lease_list failed");
            return None;
        }
    };
    let took = sent.elapsed();
    let Some(first) = page.leases.first() else {
        return Some(Held::Rate(wait));
    };
    let to_expiry = first.expires_at.duration_since(page.as_of);
    Some(if is_expiry(wait, to_expiry, took) {
        Held::Saturated
    } else {
        Held::Rate(wait)
    })
}

/// True when a wait answered first is the soonest lease expiry read `took` later, as
/// `to_expiry` from then: `to_expiry <= wait <= to_expiry + took`, with a millisecond
/// either side for stores that keep time in milliseconds.
fn is_expiry(wait: Duration, to_expiry: Duration, took: Duration) -> bool {
    let slack = Duration::from_millis(1);
    to_expiry <= wait + slack && wait <= to_expiry + took + slack
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_a_slot_wait_only_when_it_ends_at_the_soonest_expiry() {
        let s = Duration::from_secs;
        assert!(is_expiry(s(30), s(30), Duration::ZERO));
        assert!(
            is_expiry(
                s(30),
                s(30) - Duration::from_millis(40),
                Duration::from_millis(50)
            ),
            "the expiry read 40 ms later"
        );
        assert!(
            !is_expiry(s(10), s(30), Duration::from_millis(50)),
            "a rate's start before the expiry"
        );
        assert!(
            !is_expiry(s(30), s(10), Duration::from_millis(50)),
            "a deferral past the expiry"
        );
    }
}
