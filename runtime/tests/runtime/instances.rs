//! Registration and heartbeat on their own timer; maintenance only on the leader
//! (G12, G13); Faulted, never Follower, when the store does not answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_core::{ClaimParams, HeartbeatParams, ItemState, OwnerId, QueueName, Store, StoreExt};
use tenure_runtime::{Job, Role, Worker};
use tokio::time::Instant;

use crate::support::{enqueue, gaps_ms, item, memory, queue, until, Probe};

fn idle_worker(store: Probe<tenure_memory::MemoryStore>) -> tenure_runtime::WorkerBuilder {
    Worker::builder(store)
        .queue(queue())
        .handler(|_job: Job| async { Ok(()) })
}

#[tokio::test(start_paused = true)]
async fn the_instance_registers_before_its_first_claim_and_heartbeats_on_its_own_timer() {
    let store = Probe::new(memory());
    let worker = idle_worker(store.clone())
        .heartbeat(Duration::from_secs(1), Duration::from_secs(5))
        .maintenance(false)
        .spawn()
        .unwrap();
    // 30 s idle: the claim loop has backed off to 10 s between polls.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let calls = store.calls();
    assert!(calls.heartbeats[0] <= calls.claims[0].0);
    assert!(calls.heartbeats.len() >= 30);
    assert!(
        gaps_ms(&calls.heartbeats).iter().all(|g| *g == 1000),
        "one heartbeat a second whatever the poll does"
    );
    let claim_times: Vec<Instant> = calls.claims.iter().map(|c| c.0).collect();
    assert!(gaps_ms(&claim_times).last() == Some(&10_000));
    let listed = store.instance_list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(&listed[0].id, worker.instance());
}

#[tokio::test(start_paused = true)]
async fn maintenance_runs_only_on_the_holder_of_the_leader_lease() {
    let shared = memory();
    let (a, b) = (Probe::new(shared.clone()), Probe::new(shared.clone()));
    let wa = idle_worker(a.clone())
        .maintenance_interval(Duration::from_secs(1))
        .spawn()
        .unwrap();
    let wb = idle_worker(b.clone())
        .maintenance_interval(Duration::from_secs(1))
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;

    let (leader, follower, lp, fp) = match (wa.role(), wb.role()) {
        (Role::Leader { .. }, Role::Follower { .. }) => (&wa, &wb, &a, &b),
        (Role::Follower { .. }, Role::Leader { .. }) => (&wb, &wa, &b, &a),
        other => panic!("expected one leader and one follower, got {other:?}"),
    };
    assert_eq!(
        follower.role(),
        Role::Follower {
            holder: leader.instance().clone()
        }
    );
    let (l, f) = (lp.calls(), fp.calls());
    assert!(
        l.recovers >= 9 && l.purges >= 9 && l.evicts >= 9,
        "the leader maintains every second"
    );
    assert_eq!(
        (f.recovers, f.purges, f.evicts),
        (0, 0, 0),
        "the follower never does"
    );
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_store_makes_the_role_faulted_never_follower() {
    let store = Probe::new(memory());
    let worker = idle_worker(store.clone())
        .maintenance_interval(Duration::from_secs(1))
        .spawn()
        .unwrap();
    let mut changes = worker.role_changes();
    let seen: Arc<Mutex<Vec<Role>>> = Arc::default();
    let s = seen.clone();
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let role = changes.borrow_and_update().clone();
            s.lock().unwrap().push(role);
        }
    });
    until(Duration::from_secs(5), || {
        matches!(worker.role(), Role::Leader { .. })
    })
    .await;
    store.inner.set_available(false);
    until(Duration::from_secs(5), || {
        matches!(worker.role(), Role::Faulted { .. })
    })
    .await;
    if let Role::Faulted { error } = worker.role() {
        assert!(error.contains("unavailable"), "{error}");
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    store.inner.set_available(true);
    until(Duration::from_secs(5), || {
        matches!(worker.role(), Role::Leader { .. })
    })
    .await;
    let seen = seen.lock().unwrap().clone();
    assert!(
        !seen.iter().any(|r| matches!(r, Role::Follower { .. })),
        "{seen:?}"
    );
    assert!(
        matches!(
            seen.as_slice(),
            [
                Role::Leader { .. },
                Role::Faulted { .. },
                Role::Leader { .. }
            ]
        ),
        "{seen:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_leader_evicts_a_silent_instance_and_the_item_it_held_runs_at_once() {
    let store = Probe::new(memory());
    let id = enqueue(&store, &["held"]).await[0];
    let ghost = OwnerId::new("ghost").unwrap();
    store
        .instance_heartbeat(HeartbeatParams::new(ghost.clone()))
        .await
        .unwrap();
    let held = store
        .claim_one(queue(), ghost, Duration::from_secs(3600))
        .await
        .unwrap()
        .unwrap();
    let worker = idle_worker(store.clone())
        .heartbeat(Duration::from_secs(1), Duration::from_secs(5))
        .maintenance_interval(Duration::from_secs(1))
        .spawn()
        .unwrap();
    until(Duration::from_secs(30), || worker.metrics().completed == 1).await;
    let it = item(&store, id).await;
    assert_eq!((it.state, it.attempt, it.stalls), (ItemState::Done, 2, 1));
    assert!(
        store.complete_one(held.token).await.is_err(),
        "the ghost's late complete is fenced"
    );
    assert!(!store
        .instance_list()
        .await
        .unwrap()
        .iter()
        .any(|i| i.id.as_str() == "ghost"));
}

#[tokio::test(start_paused = true)]
async fn the_leader_recovers_expired_leases_of_queues_nobody_claims_from() {
    let store = Probe::new(memory());
    let other = QueueName::new("other").unwrap();
    let id = crate::support::enqueue_items(
        &store,
        vec![tenure_core::NewItem::new(other.clone(), b"x".to_vec())],
    )
    .await[0];
    let taken = store
        .claim(ClaimParams::new(
            other,
            OwnerId::new("gone").unwrap(),
            1,
            Duration::from_secs(2),
        ))
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    let _worker = idle_worker(store.clone())
        .maintenance_interval(Duration::from_secs(1))
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let it = item(&store, id).await;
    assert_eq!((it.state, it.stalls), (ItemState::Ready, 1));
}
