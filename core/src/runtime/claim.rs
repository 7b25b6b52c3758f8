//! The claim loop: claims only up to free slots, polls adaptively, wakes on a signal.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Waker};

use tokio::time::{sleep, timeout, Instant};

use crate::error::Error;
use crate::store::{ClaimParams, HeartbeatParams, WakeSignal};

use super::metrics::add;
use super::worker::{release_unstarted, Shared};

async fn woken(signal: Option<&WakeSignal>) {
    match signal {
        Some(s) => s.notified().await,
        None => std::future::pending().await,
    }
}

/// Takes a wake the signal may have stored for an enqueue that the claim about to be
/// sent will see anyway, so it does not cause a second, empty poll.
fn absorb_wake(signal: Option<&WakeSignal>) {
    if let Some(s) = signal {
        let notified = std::pin::pin!(s.notified());
        let mut cx = Context::from_waker(Waker::noop());
        let _ = notified.poll(&mut cx);
    }
}

/// Claims until shutdown. After a claim that filled every slot it asked for, the loop
/// claims again as soon as a slot is free; otherwise it waits
/// [`PollPolicy::wait`](super::PollPolicy::wait) for the count of consecutive empty
/// polls (a failed claim counts as empty), or less if the store's wake signal fires.
pub(crate) async fn claim_loop(shared: Arc<Shared>) {
    let s = &shared.settings;
    let stop = shared.stop_claiming.clone();
    let wake = shared.store.wake_signal();
    // Register before the first claim (G12), but never wait long for it.
    tokio::select! {
        _ = shared.first_heartbeat.cancelled() => {}
        _ = stop.cancelled() => return,
        _ = sleep(s.heartbeat_interval) => {}
    }
    let mut empty: u32 = 0;
    let mut poll_now = true;
    // Set after registering again for a refused partitioned claim, so a store that
    // keeps refusing gets the ordinary backoff, not a tight loop.
    let mut registered_again = false;
    loop {
        if !poll_now {
            let wait = s.poll.wait(empty);
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = sleep(wait) => {}
                _ = woken(wake.as_ref()) => {
                    tracing::trace!(event = "wake", "woken: polling at once");
                }
            }
        }
        let first = tokio::select! {
            _ = stop.cancelled() => return,
            p = Arc::clone(&shared.slots).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let mut permits = vec![first];
        while permits.len() < s.claim_batch {
            match Arc::clone(&shared.slots).try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
        let asked = permits.len();
        let limit = u32::try_from(asked).unwrap_or(u32::MAX);
        let mut params = ClaimParams::new(s.queues[0].clone(), s.instance.clone(), limit, s.lease)
            .queues(s.queues.clone());
        if let Some(p) = s.partitioning {
            params = params.partitioned(p);
        }
        absorb_wake(wake.as_ref());
        let sent = Instant::now();
        match shared.store.claim(params).await {
            Ok(mut leases) => {
                registered_again = false;
                if leases.len() > asked {
                    let extra = leases.split_off(asked);
                    tracing::error!(
                        asked,
                        got = asked + extra.len(),
                        "the store answered more leases than asked; releasing the extra ones"
                    );
                    release_unstarted(&shared, extra).await;
                }
                let got = leases.len();
                if stop.is_cancelled() {
                    if got > 0 {
                        tracing::info!(count = got, "claimed during shutdown; releasing at once");
                        release_unstarted(&shared, leases).await;
                    }
                    return;
                }
                add(&shared.metrics.polls, 1);
                add(&shared.metrics.claimed, got as u64);
                if got == 0 {
                    empty = empty.saturating_add(1);
                    poll_now = false;
                    tracing::trace!(event = "claim", asked, count = 0, empty, "nothing to claim");
                } else {
                    empty = 0;
                    poll_now = got >= asked;
                    tracing::debug!(event = "claim", asked, count = got, "claimed");
                }
                for (lease, permit) in leases.into_iter().zip(permits) {
                    shared.start_job(lease, permit, sent);
                }
            }
            Err(Error::NotFound {
                what: "instance", ..
            }) if s.partitioning.is_some()
                && !registered_again
                && register_again(&shared).await =>
            {
                // A partitioned claim needs a registered owner (G14), and this instance
                // was evicted (a long pause, say): it registered again at once instead
                // of waiting for its next heartbeat, and claims again.
                add(&shared.metrics.store_errors, 1);
                registered_again = true;
                poll_now = true;
                tracing::warn!(
                    event = "claim",
                    "the instance was not registered; registered again"
                );
                continue;
            }
            Err(e) => {
                registered_again = false;
                add(&shared.metrics.store_errors, 1);
                empty = empty.saturating_add(1);
                poll_now = false;
                tracing::warn!(event = "claim", error = %e, "claim failed; backing off");
            }
        }
    }
}

/// Registers the instance again (one heartbeat, limited to one heartbeat interval);
/// true when the store recorded it.
async fn register_again(shared: &Shared) -> bool {
    let s = &shared.settings;
    let call = shared
        .store
        .instance_heartbeat(HeartbeatParams::new(s.instance.clone()));
    matches!(timeout(s.heartbeat_interval, call).await, Ok(Ok(())))
}
