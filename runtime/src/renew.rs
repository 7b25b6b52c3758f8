//! Coalesced lease renewal: one `renew` call per flush, each with its own timeout.
//!
//! State: reads and writes `inflight`: the renewal schedule
//! ([`InFlight`](crate::inflight::InFlight)), each attempt's last renewal and cap, the
//! stop of an attempt whose lease was lost. Gives back prefetched leases still waiting
//! for a slot, letting them go from `room`.

use std::sync::Arc;

use tokio::time::{sleep_until, timeout, Instant};
use tokio_util::sync::CancellationToken;

use tenure_core::{LeaseToken, Progress, RenewOutcome, RenewParams};

use crate::attempt::StopReason;
use crate::inflight::Entry;
use crate::metrics::add;
use crate::release::release;
use crate::shared::Shared;

/// Renews every in-flight lease a third of a lease after its last successful renewal.
///
/// Leases due within `renew_coalesce` of the earliest go in the same call, so one store
/// call renews many leases. A lease the store caps (G4) is not renewed again and its
/// attempt self-stops at half a lease; one answered "lease lost" has its handler
/// cancelled at once. A call that fails or outlives `renew_timeout` is retried
/// `renew_timeout` after it was sent. The loop reads the schedule of
/// [`InFlight`](crate::inflight::InFlight), never the whole set of attempts.
pub(crate) async fn renew_loop(shared: Arc<Shared>, stop: CancellationToken) {
    let s = &shared.settings;
    loop {
        let wake_at = {
            let mut map = shared.inflight.lock();
            let at = map.next_due();
            map.armed = at;
            at
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = shared.inflight.renew_wake.notified() => continue,
            _ = sleep_until(wake_at.unwrap_or_else(far_future)), if wake_at.is_some() => {}
        }
        let (tokens, unstarted) = {
            let mut map = shared.inflight.lock();
            let due = map.take_due(
                Instant::now() + s.renew_coalesce,
                s.limits.max_batch.max(1),
                renewable,
            );
            // A prefetched lease still waiting for a slot is given back rather than
            // renewed: marked given back in its control, which a slot takes it with
            // (whichever comes first wins), so no slot starts it afterwards.
            let (unstarted, tokens): (Vec<LeaseToken>, Vec<LeaseToken>) = due
                .into_iter()
                .partition(|t| map.entries.get(t).is_some_and(|e| e.control.give_back()));
            for t in &unstarted {
                map.forget(t);
            }
            (tokens, unstarted)
        };
        if !unstarted.is_empty() {
            tracing::debug!(
                count = unstarted.len(),
                "giving back prefetched leases that waited a renewal interval for a slot"
            );
            shared.room.prefetch_missed();
            shared.room.let_go(unstarted.len());
            release(&shared, &unstarted).await;
        }
        if tokens.is_empty() {
            continue;
        }
        // Progress the handlers reported since their last renewal rides along; none
        // reported, none sent.
        let progress: Vec<Option<Progress>> = {
            let map = shared.inflight.lock();
            tokens
                .iter()
                .map(|t| map.entries.get(t).and_then(|e| e.control.take_progress()))
                .collect()
        };
        let reported = progress.iter().any(Option::is_some);
        let sent = Instant::now();
        let count = tokens.len();
        let mut params = RenewParams::new(tokens.clone(), s.lease);
        if reported {
            params = params.with_progress(progress.clone());
        }
        let call = shared.store.renew(params);
        let failed = match timeout(s.renew_timeout, call).await {
            Ok(Ok(outcomes)) if outcomes.len() == count => {
                apply(&shared, &tokens, outcomes, sent);
                tracing::debug!(event = "renew", count, "leases renewed");
                false
            }
            Ok(Ok(outcomes)) => {
                tracing::warn!(
                    count,
                    answers = outcomes.len(),
                    "renewal answered the wrong number of tokens"
                );
                true
            }
            Ok(Err(e)) => {
                tracing::warn!(event = "renew", error = %e, count, "renewal failed; retrying");
                true
            }
            Err(_) => {
                tracing::warn!(event = "renew", timeout = ?s.renew_timeout, count, "renewal timed out; retrying");
                true
            }
        };
        if failed {
            add(&shared.metrics.store_errors, 1);
            if reported {
                let map = shared.inflight.lock();
                for (t, p) in tokens.iter().zip(progress) {
                    if let (Some(e), Some(p)) = (map.entries.get(t), p) {
                        e.control.restore_progress(p);
                    }
                }
            }
            // Retried `renew_timeout` after this call was sent; the self-stop, on its
            // own timer, still fires half a lease after the last successful renewal.
            let retry = sent + s.renew_timeout;
            shared
                .inflight
                .lock()
                .schedule_all(tokens.iter().copied(), retry);
        }
    }
}

fn far_future() -> Instant {
    Instant::now() + std::time::Duration::from_secs(60 * 60 * 24 * 365)
}

fn renewable(e: &Entry) -> bool {
    !e.capped && !e.lost_counted && e.control.stop_reason().is_none()
}

fn apply(shared: &Shared, tokens: &[LeaseToken], outcomes: Vec<RenewOutcome>, sent: Instant) {
    let renew_after = shared.settings.renew_after;
    // The leases this call renewed are due again together, as one group.
    let mut renewed = Vec::new();
    for (t, o) in tokens.iter().zip(outcomes) {
        match o {
            RenewOutcome::Renewed {
                expires_at,
                renewals,
            } => {
                let mut map = shared.inflight.lock();
                let mut queue = 0;
                if let Some(e) = map.entries.get_mut(t) {
                    queue = e.queue;
                    if e.renewed_at <= sent {
                        e.renewed_at = sent;
                        renewed.push(*t);
                    } else {
                        let next = e.renewed_at + renew_after;
                        map.schedule_all([*t], next);
                    }
                }
                drop(map);
                add(&shared.metrics.renewed, 1);
                shared.export.at(queue).renewed.increment(1);
                tracing::trace!(event = "renew", item = %t.id, attempt = t.attempt, %expires_at, renewals, "renewed");
            }
            RenewOutcome::LimitReached { limit } => {
                if let Some(e) = shared.inflight.lock().entries.get_mut(t) {
                    e.capped = true;
                }
                add(&shared.metrics.renewal_capped, 1);
                tracing::warn!(
                    event = "renew",
                    item = %t.id,
                    attempt = t.attempt,
                    limit,
                    "renewal cap reached; the handler self-stops half a lease after its last renewal",
                );
            }
            RenewOutcome::LeaseLost => {
                // A renewal can cross its attempt's own finalize: the outcome commits
                // first and the renewal then finds the item finished. Only an attempt
                // whose outcome is not yet sent learns "lost" here; a sent outcome's
                // own answer tells whether the lease was lost.
                if !shared.inflight.outcome_pending(t) {
                    tracing::debug!(event = "renew", item = %t.id, attempt = t.attempt, "renewal crossed the attempt's finalize");
                    continue;
                }
                shared.count_lost(t);
                let stopped = shared.inflight.stop_attempt(t, StopReason::LeaseLost);
                tracing::warn!(
                    event = "lost",
                    item = %t.id,
                    attempt = t.attempt,
                    handler_cancelled = stopped,
                    "renewal refused: lease lost",
                );
            }
        }
    }
    if !renewed.is_empty() {
        shared
            .inflight
            .lock()
            .schedule_all(renewed, sent + renew_after);
    }
}
