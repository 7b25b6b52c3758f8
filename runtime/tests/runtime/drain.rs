//! The heartbeat off-switch for a graceful drain (seed 001): a silent instance is
//! evicted by its peer, which takes over its work (G12).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_core::{ErrorKind, Partitioning, Store};
use tenure_runtime::{Job, JobError, StopReason, Worker};
use tokio::time::Instant;

use crate::support::{enqueue, memory, queue, until, Probe};

#[tokio::test(start_paused = true)]
async fn a_worker_whose_heartbeat_is_switched_off_is_evicted_by_its_peer_which_takes_its_item() {
    let shared = memory();
    let (a, b) = (Probe::new(shared.clone()), Probe::new(shared.clone()));
    let stopped: Arc<Mutex<Vec<Option<StopReason>>>> = Arc::default();
    let st = stopped.clone();
    // B holds the item in a handler that runs until told to stop.
    let draining = Worker::builder(b.clone())
        .queue(queue())
        .heartbeat(Duration::from_secs(1), Duration::from_secs(5))
        .maintenance(false)
        .handler(move |job: Job| {
            let st = st.clone();
            async move {
                job.cancelled().await;
                st.lock().unwrap().push(job.stop_reason());
                Err::<(), _>(JobError::retry("stopped"))
            }
        })
        .spawn()
        .unwrap();
    enqueue(&b, &["held"]).await;
    until(Duration::from_secs(5), || draining.metrics().in_flight == 1).await;

    let ran: Arc<Mutex<Vec<(u32, Instant)>>> = Arc::default();
    let r = ran.clone();
    let peer = Worker::builder(a.clone())
        .queue(queue())
        .heartbeat(Duration::from_secs(1), Duration::from_secs(5))
        .maintenance_interval(Duration::from_secs(1))
        .handler(move |job: Job| {
            let r = r.clone();
            async move {
                r.lock().unwrap().push((job.attempt(), Instant::now()));
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(ran.lock().unwrap().is_empty(), "the item is held by B");

    let off_at = Instant::now();
    draining.set_heartbeat(false);
    assert!(!draining.heartbeat_enabled());
    until(Duration::from_secs(60), || peer.metrics().completed == 1).await;
    let (attempt, at) = ran.lock().unwrap()[0];
    assert_eq!(attempt, 2, "the peer runs the evicted instance's item anew");
    assert!(
        at >= off_at + Duration::from_secs(4),
        "not before B has been silent for stale_after: {:?}",
        at - off_at
    );
    assert!(
        b.calls().heartbeats.iter().all(|h| *h <= off_at),
        "no heartbeat after the switch"
    );
    let listed = a.instance_list().await.unwrap();
    assert!(!listed.iter().any(|i| &i.id == draining.instance()));
    assert!(listed.iter().any(|i| &i.id == peer.instance()));

    // B learns at its next renewal that its lease is gone, and writes nothing.
    until(Duration::from_secs(30), || draining.metrics().lost == 1).await;
    until(Duration::from_secs(5), || {
        !stopped.lock().unwrap().is_empty()
    })
    .await;
    assert_eq!(stopped.lock().unwrap()[0], Some(StopReason::LeaseLost));
    assert_eq!(draining.metrics().failed, 0);

    // Switched on again, it registers at once.
    let on_at = Instant::now();
    draining.set_heartbeat(true);
    until(Duration::from_secs(1), || {
        b.calls().heartbeats.last().is_some_and(|h| *h >= on_at)
    })
    .await;
    assert_eq!(b.calls().heartbeats.last(), Some(&on_at));
    let listed = a.instance_list().await.unwrap();
    assert!(listed.iter().any(|i| &i.id == draining.instance()));
}

#[tokio::test(start_paused = true)]
async fn a_worker_started_with_its_heartbeat_off_never_registers_and_claims_at_once() {
    let store = Probe::new(memory());
    enqueue(&store, &["one"]).await;
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .heartbeat(Duration::from_secs(1), Duration::from_secs(5))
        .heartbeat_enabled(false)
        .maintenance(false)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    let started = Instant::now();
    until(Duration::from_secs(5), || worker.metrics().completed == 1).await;
    assert_eq!(
        store.calls().claims[0].0,
        started,
        "no wait for a registration"
    );
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(store.calls().heartbeats.is_empty());
    assert!(store.instance_list().await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_worker_refuses_to_start_with_its_heartbeat_off() {
    let err = Worker::builder(Probe::new(memory()))
        .queue(queue())
        .partitioned(Partitioning::default())
        .heartbeat_enabled(false)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("heartbeat_enabled"), "{err}");
}
