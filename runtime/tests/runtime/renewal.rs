//! Renewal: coalesced, well before expiry, capped (G4).

use std::sync::Arc;
use std::time::Duration;

use tenure_core::{duration_micros, ClaimParams, ItemState, NewItem, OwnerId, Store};
use tenure_runtime::{Job, StopReason, Worker};
use tokio::time::{sleep, Instant};

use crate::support::{enqueue_items, item, memory, queue, until, Probe, Seen, TokioClock};

#[tokio::test(start_paused = true)]
async fn leases_are_renewed_in_one_call_per_flush_well_before_they_expire() {
    let store = Probe::new(memory());
    let clock = TokioClock::new();
    let lease = Duration::from_secs(3);
    let ids = enqueue_items(
        &store,
        (0..8u8)
            .map(|i| NewItem::new(queue(), vec![i]).max_renewals(20))
            .collect(),
    )
    .await;
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(8)
        .lease_duration(lease)
        .maintenance(false)
        .handler(|_job: Job| async {
            sleep(Duration::from_secs(10)).await;
            Ok(())
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(1), || worker.metrics().in_flight == 8).await;

    // For the 10 s the handlers run, a peer polls every 100 ms: a claim recovers
    // expired leases first, so it would take any lease that lapsed. Every sampled
    // lease keeps more than half a lease ahead of the store's clock.
    let peer = OwnerId::new("peer").unwrap();
    for _ in 0..95 {
        sleep(Duration::from_millis(100)).await;
        let taken = store
            .inner
            .claim(ClaimParams::new(queue(), peer.clone(), 8, lease))
            .await
            .unwrap();
        assert!(taken.is_empty(), "a lease lapsed");
        for id in &ids {
            let it = item(&store, *id).await;
            let left = it.lease_expires_at.unwrap().as_micros() - clock_now(&clock);
            assert!(
                left > duration_micros(lease / 2),
                "only {left} µs left on a {lease:?} lease"
            );
        }
    }
    until(Duration::from_secs(2), || worker.metrics().completed == 8).await;

    let calls = store.calls();
    assert!(
        calls.renews.iter().all(|(_, tokens)| *tokens == 8),
        "every call carries all eight leases: {:?}",
        calls.renews
    );
    assert!(
        (9..=11).contains(&calls.renews.len()),
        "about one call per third of a lease over 10 s, not one per lease: {}",
        calls.renews.len()
    );
    assert_eq!(worker.metrics().renewed, 8 * calls.renews.len() as u64);
    for id in ids {
        let it = item(&store, id).await;
        assert_eq!((it.state, it.attempt), (ItemState::Done, 1));
    }
}

fn clock_now(clock: &TokioClock) -> i64 {
    use tenure_core::Clock;
    clock.now().as_micros()
}

#[tokio::test(start_paused = true)]
async fn after_the_renewal_cap_the_handler_self_stops_and_the_expired_item_is_reclaimed() {
    let store = Probe::new(memory());
    let lease = Duration::from_secs(3);
    let id = enqueue_items(
        &store,
        vec![NewItem::new(queue(), b"x".to_vec()).max_renewals(2)],
    )
    .await[0];
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .lease_duration(lease)
        .maintenance(false)
        .handler(move |job: Job| {
            let s = s.clone();
            async move {
                if job.attempt() == 1 {
                    job.cancelled().await;
                }
                let stalls = job.item().stalls;
                s.lock()
                    .unwrap()
                    .push((job.attempt(), stalls, job.stop_reason(), Instant::now()));
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(30), || worker.metrics().completed == 1).await;

    let seen = seen.lock().unwrap().clone();
    let calls = store.calls();
    let claimed_at = calls.claims[0].0;
    let renew_at: Vec<Instant> = calls.renews.iter().map(|r| r.0).collect();
    assert_eq!(
        renew_at,
        vec![
            claimed_at + Duration::from_secs(1),
            claimed_at + Duration::from_secs(2),
            claimed_at + Duration::from_secs(3),
        ],
        "two renewals, a third refused by the cap, then no more"
    );
    let m = worker.metrics();
    assert_eq!((m.renewed, m.renewal_capped, m.self_stopped), (2, 1, 1));

    let last_renewal = renew_at[1];
    assert_eq!(seen.len(), 2);
    let (attempt, _, reason, stopped_at) = seen[0];
    assert_eq!((attempt, reason), (1, Some(StopReason::SelfStop)));
    assert_eq!(
        stopped_at,
        last_renewal + lease / 2,
        "self-stop half a lease after the last renewal"
    );
    let reclaim = calls
        .claims
        .iter()
        .find(|c| c.2 == 1 && c.0 > claimed_at)
        .unwrap()
        .0;
    assert!(
        reclaim >= last_renewal + lease,
        "the item is claimed again only once the capped lease expired"
    );
    let (attempt, stalls, reason, _) = seen[1];
    assert_eq!(
        (attempt, stalls, reason),
        (2, 1, None),
        "the expiry counted a stall"
    );
    let it = item(&store, id).await;
    assert_eq!((it.state, it.attempt, it.stalls), (ItemState::Done, 2, 1));
    assert!(calls.fails.is_empty(), "the capped attempt wrote nothing");
}

/// A renewal sent while the handler runs can be answered after that attempt's own
/// complete committed: the store then finds the item finished and answers "lease
/// lost". That answer is about a finished attempt, not a lost one.
#[tokio::test(start_paused = true)]
async fn a_renewal_answered_after_its_attempts_complete_committed_is_not_a_lost_lease() {
    let store = Probe::new(memory());
    let ids = enqueue_items(&store, vec![NewItem::new(queue(), b"x".to_vec())]).await;
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .lease_duration(Duration::from_secs(60))
        .renew_timeout(Duration::from_secs(5))
        .maintenance(false)
        .handler(|_job: Job| async {
            // Past the renewal point (a third of the lease): the renewal is on its way.
            sleep(Duration::from_secs(21)).await;
            Ok(())
        })
        .spawn()
        .unwrap();
    store.hang_renewals(true);
    until(Duration::from_secs(21), || !store.calls().renews.is_empty()).await;
    until(Duration::from_secs(3), || worker.metrics().completed == 1).await;
    assert_eq!(item(&store, ids[0]).await.state, ItemState::Done);
    // The renewal now reaches the store, after the complete.
    store.unpark_renewals();
    sleep(Duration::from_secs(1)).await;
    let report = worker.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        store.calls().renewed_tokens.len(),
        1,
        "one renewal was sent"
    );
    assert_eq!(
        (report.metrics.completed, report.metrics.lost),
        (1, 0),
        "{report:?}"
    );
}
