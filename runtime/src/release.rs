//! Giving leases back unfinished, so peers take the items at once: leases claimed
//! after shutdown began, prefetched ones whose renewal came before their slot, the rest
//! of a stream run on shutdown, and the attempts shutdown stopped.
//!
//! State: writes `inflight` (forgets the attempts given back).

use std::time::Duration;

use tenure_core::{Lease, LeaseToken, ReleaseParams, TokenOutcome};

use crate::metrics::add;
use crate::shared::Shared;

/// How long shutdown waits for the last finalize flush and the lease release.
pub(crate) const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// Gives `tokens` back in as few calls as the store's batch limit allows; returns how
/// many the store accepted and how many calls went unanswered.
pub(crate) async fn release(shared: &Shared, tokens: &[LeaseToken]) -> (u64, u64) {
    let mut accepted = 0u64;
    let mut unanswered = 0u64;
    for chunk in tokens.chunks(shared.settings.limits.max_batch.max(1)) {
        let call = shared.store.release(ReleaseParams::new(chunk.to_vec()));
        match tokio::time::timeout(FLUSH_WAIT, call).await {
            Ok(Ok(outcomes)) => {
                for (t, o) in chunk.iter().zip(outcomes) {
                    match o {
                        TokenOutcome::Accepted => {
                            accepted += 1;
                            tracing::info!(event = "release", item = %t.id, attempt = t.attempt, "lease released");
                        }
                        TokenOutcome::LeaseLost | TokenOutcome::OutOfOrder => {
                            shared.count_lost(t);
                            tracing::warn!(event = "lost", item = %t.id, attempt = t.attempt, "lease lost before release");
                        }
                    }
                }
            }
            Ok(Err(e)) => {
                add(&shared.metrics.store_errors, 1);
                unanswered += chunk.len() as u64;
                tracing::warn!(error = %e, count = chunk.len(), "release failed; the leases will expire");
            }
            Err(_) => {
                add(&shared.metrics.store_errors, 1);
                unanswered += chunk.len() as u64;
                tracing::warn!(
                    count = chunk.len(),
                    "release timed out; the leases will expire"
                );
            }
        }
    }
    shared.inflight.remove_all(tokens);
    add(&shared.metrics.released, accepted);
    (accepted, unanswered)
}

/// Releases leases claimed after shutdown began (the claim call was already out).
pub(crate) async fn release_unstarted(shared: &Shared, leases: Vec<Lease>) {
    let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
    release(shared, &tokens).await;
}
