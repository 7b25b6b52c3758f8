//! Coalesced lease renewal: one `renew` call per flush, each with its own timeout.

use std::sync::Arc;

use tokio::time::{sleep_until, timeout, Instant};
use tokio_util::sync::CancellationToken;

use crate::model::{LeaseToken, RenewOutcome};
use crate::store::RenewParams;

use super::handler::StopReason;
use super::metrics::add;
use super::worker::Shared;

/// Renews every in-flight lease a third of a lease after its last successful renewal.
///
/// Leases due within `renew_coalesce` of the earliest go in the same call, so one store
/// call renews many leases. A lease the store caps (G4) is not renewed again and its
/// attempt self-stops at half a lease; one answered "lease lost" has its handler
/// cancelled at once. A call that fails or outlives `renew_timeout` is retried
/// `renew_timeout` after it was sent.
pub(crate) async fn renew_loop(shared: Arc<Shared>, stop: CancellationToken) {
    let s = &shared.settings;
    let mut retry_at: Option<Instant> = None;
    loop {
        let next_due = earliest_due(&shared);
        let wake_at = match (next_due, retry_at) {
            (Some(due), Some(retry)) => Some(due.max(retry)),
            (due, _) => due,
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = shared.renew_wake.notified() => continue,
            _ = sleep_until(wake_at.unwrap_or_else(far_future)), if wake_at.is_some() => {}
        }
        let tokens = due_tokens(&shared, Instant::now() + s.renew_coalesce);
        if tokens.is_empty() {
            continue;
        }
        let sent = Instant::now();
        let count = tokens.len();
        let call = shared
            .store
            .renew(RenewParams::new(tokens.clone(), s.lease));
        match timeout(s.renew_timeout, call).await {
            Ok(Ok(outcomes)) if outcomes.len() == count => {
                retry_at = None;
                apply(&shared, &tokens, outcomes, sent);
                tracing::debug!(event = "renew", count, "leases renewed");
            }
            Ok(Ok(outcomes)) => {
                add(&shared.metrics.store_errors, 1);
                tracing::warn!(
                    count,
                    answers = outcomes.len(),
                    "renewal answered the wrong number of tokens"
                );
                retry_at = Some(sent + s.renew_timeout);
            }
            Ok(Err(e)) => {
                add(&shared.metrics.store_errors, 1);
                tracing::warn!(event = "renew", error = %e, count, "renewal failed; retrying");
                retry_at = Some(sent + s.renew_timeout);
            }
            Err(_) => {
                add(&shared.metrics.store_errors, 1);
                tracing::warn!(event = "renew", timeout = ?s.renew_timeout, count, "renewal timed out; retrying");
                retry_at = Some(sent + s.renew_timeout);
            }
        }
    }
}

fn far_future() -> Instant {
    Instant::now() + std::time::Duration::from_secs(60 * 60 * 24 * 365)
}

fn renewable(e: &super::worker::Entry) -> bool {
    !e.capped && !e.lost_counted && e.stop.get().is_none()
}

fn earliest_due(shared: &Shared) -> Option<Instant> {
    let after = shared.settings.renew_after;
    shared
        .inflight()
        .values()
        .filter(|e| renewable(e))
        .map(|e| e.renewed_at + after)
        .min()
}

/// Tokens due by `by`, earliest first, at most one store batch.
fn due_tokens(shared: &Shared, by: Instant) -> Vec<LeaseToken> {
    let after = shared.settings.renew_after;
    let mut due: Vec<(Instant, LeaseToken)> = shared
        .inflight()
        .iter()
        .filter(|(_, e)| renewable(e) && e.renewed_at + after <= by)
        .map(|(t, e)| (e.renewed_at, *t))
        .collect();
    due.sort();
    due.truncate(shared.settings.limits.max_batch.max(1));
    due.into_iter().map(|(_, t)| t).collect()
}

fn apply(shared: &Shared, tokens: &[LeaseToken], outcomes: Vec<RenewOutcome>, sent: Instant) {
    for (t, o) in tokens.iter().zip(outcomes) {
        match o {
            RenewOutcome::Renewed {
                expires_at,
                renewals,
            } => {
                if let Some(e) = shared.inflight().get_mut(t) {
                    e.renewed_at = e.renewed_at.max(sent);
                }
                add(&shared.metrics.renewed, 1);
                tracing::trace!(event = "renew", item = %t.id, attempt = t.attempt, %expires_at, renewals, "renewed");
            }
            RenewOutcome::LimitReached { limit } => {
                if let Some(e) = shared.inflight().get_mut(t) {
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
                shared.count_lost(t);
                let stopped = shared.stop_attempt(t, StopReason::LeaseLost);
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
}
