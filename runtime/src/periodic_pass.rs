//! The leader's periodic pass: each maintenance round, the leader enqueues every
//! periodic job's due ticks ahead of time, as scheduled items with a dedup key per
//! tick, and records how far each job is covered in its term (the jobs and their
//! rules are [`Periodic`]'s).
//!
//! State: reads the settings' periodic jobs and clock; writes their coverage.

use std::time::Duration;

use tenure_core::{EnqueueParams, NewItem, Result, Timestamp};

use crate::metrics::add;
use crate::periodic::Periodic;
use crate::shared::Shared;

/// One pass of the leader holding `term`: enqueues every job's due ticks, ahead of time
/// up to two maintenance intervals, and records how far each job is covered once the
/// store has answered for it. A new term starts with nothing covered, so the missed
/// tick rule applies to what the previous leader may have left.
pub(crate) async fn enqueue_due(shared: &Shared, term: u64, call_timeout: Duration) {
    let periodics = &shared.settings.periodics;
    if periodics.jobs.is_empty() {
        return;
    }
    let lookahead = shared.settings.maintenance_interval * 2;
    let now = shared.settings.clock.now();
    let horizon = now + lookahead;
    let covered: Vec<Option<Timestamp>> = periodics.covered(term);
    for (i, job) in periodics.jobs.iter().enumerate() {
        let from = covered.get(i).copied().flatten();
        let (ticks, cut) = job.due(from, now, horizon, lookahead);
        let reached = match (cut, ticks.last()) {
            (true, Some(last)) => *last,
            _ => horizon,
        };
        if !ticks.is_empty() && !enqueue_ticks(shared, job, &ticks, lookahead, call_timeout).await {
            continue;
        }
        periodics.cover(term, i, reached);
    }
}

/// Enqueues `ticks` of `job` in as few calls as the store's batch limit allows; true
/// when the store answered for every one.
async fn enqueue_ticks(
    shared: &Shared,
    job: &Periodic,
    ticks: &[Timestamp],
    lookahead: Duration,
    call_timeout: Duration,
) -> bool {
    let items: Result<Vec<NewItem>> = ticks.iter().map(|t| job.item(*t, lookahead)).collect();
    let items = match items {
        Ok(items) => items,
        Err(e) => {
            tracing::error!(event = "periodic", name = %job.name(), error = %e, "cannot build the periodic item");
            return false;
        }
    };
    for (chunk, chunk_ticks) in items
        .chunks(shared.settings.limits.max_batch.max(1))
        .zip(ticks.chunks(shared.settings.limits.max_batch.max(1)))
    {
        let call = shared.store.enqueue(EnqueueParams::new(chunk.to_vec()));
        match tokio::time::timeout(call_timeout, call).await {
            Ok(Ok(answers)) => {
                for (tick, answer) in chunk_ticks.iter().zip(answers) {
                    if answer.duplicate {
                        tracing::debug!(event = "periodic", name = %job.name(), tick = %tick, item = %answer.id, "tick already enqueued");
                    } else {
                        tracing::info!(event = "periodic", name = %job.name(), queue = %job.queue(), tick = %tick, item = %answer.id, "periodic item enqueued");
                    }
                }
            }
            Ok(Err(e)) => {
                add(&shared.metrics.store_errors, 1);
                tracing::warn!(event = "periodic", name = %job.name(), error = %e, "enqueueing a periodic tick failed; the next pass tries again");
                return false;
            }
            Err(_) => {
                add(&shared.metrics.store_errors, 1);
                tracing::warn!(event = "periodic", name = %job.name(), "enqueueing a periodic tick timed out; the next pass tries again");
                return false;
            }
        }
    }
    true
}
