//! The instance heartbeat (its own timer) and leader-gated maintenance: recovery,
//! the purge, eviction of stale instances, the queue depth sample, and (through the
//! periodic pass) the periodic jobs.
//!
//! State: reads the heartbeat switch of `standing`
//! ([`Standing`](crate::standing::Standing)); writes its first registration and the
//! role.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{sleep, timeout};
use tokio_util::sync::CancellationToken;

use tenure_core::{
    EvictParams, HeartbeatParams, LeaderParams, LeaderStatus, PurgeParams, RecoverParams,
};

use crate::export::sample_queues;
use crate::metrics::add;
use crate::periodic_pass::enqueue_due;
use crate::shared::Shared;
use crate::standing::Role;

/// Most rows one maintenance step handles.
const MAINTENANCE_LIMIT: u32 = 1_000;

/// Registers the instance at once, then heartbeats every `heartbeat_interval`, each
/// call limited to one interval (G12). While the off-switch is off it sends nothing
/// (peers may then evict the instance); switched on, it heartbeats at once.
pub(crate) async fn heartbeat_loop(shared: Arc<Shared>, stop: CancellationToken) {
    let s = &shared.settings;
    let mut on = shared.standing.heartbeat_on.subscribe();
    loop {
        if !*on.borrow_and_update() {
            // The claim loop must not wait for a registration that is not coming.
            shared.standing.first_heartbeat.cancel();
            tracing::info!(
                event = "heartbeat",
                stale_after = ?s.stale_after,
                "heartbeat off: peers may evict this instance once it is stale"
            );
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = on.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    continue;
                }
            }
        }
        let call = shared
            .store
            .instance_heartbeat(HeartbeatParams::new(s.instance.clone()));
        match timeout(s.heartbeat_interval, call).await {
            Ok(Ok(())) => tracing::trace!(event = "heartbeat", "heartbeat recorded"),
            Ok(Err(e)) => {
                add(&shared.metrics.store_errors, 1);
                tracing::warn!(event = "heartbeat", error = %e, "heartbeat failed");
            }
            Err(_) => {
                add(&shared.metrics.store_errors, 1);
                tracing::warn!(event = "heartbeat", "heartbeat timed out");
            }
        }
        shared.standing.first_heartbeat.cancel();
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = sleep(s.heartbeat_interval) => {}
            // Switched off (or on again): the top of the loop decides.
            _ = on.changed() => {}
        }
    }
}

/// Every `maintenance_interval` tries the leader lease (G13) and, as leader, recovers
/// expired leases, purges finished items and old dedup keys, and evicts stale
/// instances. A store error makes the role Faulted, never Follower. Resigns on stop.
pub(crate) async fn maintenance_loop(shared: Arc<Shared>, stop: CancellationToken) {
    let s = &shared.settings;
    let params = LeaderParams::new(s.leader_name.clone(), s.instance.clone(), s.leader_lease);
    let call_timeout = s.maintenance_interval.max(Duration::from_millis(100));
    loop {
        let role = match timeout(call_timeout, shared.store.leader_acquire(params.clone())).await {
            Ok(Ok(LeaderStatus::Leader { term, .. })) => Role::Leader { term },
            Ok(Ok(LeaderStatus::Follower { holder, .. })) => Role::Follower { holder },
            Ok(Err(e)) => {
                add(&shared.metrics.store_errors, 1);
                Role::Faulted {
                    error: e.to_string(),
                }
            }
            Err(_) => {
                add(&shared.metrics.store_errors, 1);
                Role::Faulted {
                    error: format!("leader acquisition timed out after {call_timeout:?}"),
                }
            }
        };
        shared.standing.role.send_if_modified(|current| {
            if *current == role {
                return false;
            }
            tracing::info!(event = "role", from = %current, to = %role, "maintenance role changed");
            *current = role.clone();
            true
        });
        if matches!(role, Role::Leader { .. }) {
            maintain(&shared, call_timeout).await;
        }
        if let Role::Leader { term } = role {
            enqueue_due(&shared, term, call_timeout).await;
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = sleep(s.maintenance_interval) => {}
        }
    }
    if matches!(*shared.standing.role.borrow(), Role::Leader { .. }) {
        match timeout(call_timeout, shared.store.leader_resign(params)).await {
            Ok(Ok(_)) => tracing::info!(event = "role", "leader lease resigned"),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not resign the leader lease; it will expire")
            }
            Err(_) => tracing::warn!("resigning the leader lease timed out; it will expire"),
        }
        shared.standing.role.send_replace(Role::Starting);
    }
}

async fn maintain(shared: &Shared, call_timeout: Duration) {
    let s = &shared.settings;
    let store = &shared.store;
    match timeout(
        call_timeout,
        store.recover_expired(RecoverParams::new(MAINTENANCE_LIMIT)),
    )
    .await
    {
        Ok(Ok(r)) if r.requeued + r.dead > 0 => {
            tracing::info!(
                event = "recover",
                requeued = r.requeued,
                dead = r.dead,
                "expired leases recovered"
            );
        }
        Ok(Ok(_)) => {}
        Ok(Err(e)) => failed(shared, "recover", &e.to_string()),
        Err(_) => failed(shared, "recover", "timed out"),
    }
    match timeout(
        call_timeout,
        store.purge(PurgeParams::new(s.keep_done_for, MAINTENANCE_LIMIT)),
    )
    .await
    {
        Ok(Ok(p)) if p.items + p.dedup_keys > 0 => {
            tracing::debug!(
                event = "purge",
                items = p.items,
                dedup_keys = p.dedup_keys,
                "purged"
            );
        }
        Ok(Ok(_)) => {}
        Ok(Err(e)) => failed(shared, "purge", &e.to_string()),
        Err(_) => failed(shared, "purge", "timed out"),
    }
    match timeout(
        call_timeout,
        store.instance_evict_stale(EvictParams::new(s.stale_after)),
    )
    .await
    {
        Ok(Ok(ev)) if !ev.instances.is_empty() => {
            tracing::info!(event = "evict", instances = ?ev.instances, released = ev.released, "stale instances evicted");
        }
        Ok(Ok(_)) => {}
        Ok(Err(e)) => failed(shared, "evict", &e.to_string()),
        Err(_) => failed(shared, "evict", "timed out"),
    }
    sample_queues(
        &shared.export,
        &*shared.store,
        &shared.metrics,
        call_timeout,
    )
    .await;
}

fn failed(shared: &Shared, step: &'static str, error: &str) {
    add(&shared.metrics.store_errors, 1);
    tracing::warn!(event = step, %error, "maintenance step failed");
}
