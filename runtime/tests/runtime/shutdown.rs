//! Graceful shutdown: stop claiming, wait up to the grace, release what is unfinished.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_core::{ClaimParams, ItemState, OwnerId, Store};
use tenure_runtime::{Job, StopReason, Worker};
use tokio::time::{sleep, Instant};

use crate::support::{enqueue, item, memory, queue, until, Probe};

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_running_handlers_and_writes_their_outcomes() {
    let store = Probe::new(memory());
    let ids = enqueue(&store, &["a", "b"]).await;
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .maintenance(false)
        .handler(|_job: Job| async {
            sleep(Duration::from_secs(2)).await;
            Ok(())
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(1), || worker.metrics().in_flight == 2).await;
    let started = Instant::now();
    let report = worker.shutdown(Duration::from_secs(5)).await;
    assert!(Instant::now() - started < Duration::from_secs(3));
    assert!(report.drained);
    assert_eq!((report.released, report.abandoned), (0, 0));
    assert_eq!(report.metrics.completed, 2);
    for id in ids {
        assert_eq!(item(&store, id).await.state, ItemState::Done);
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_claiming_and_releases_unfinished_leases_so_a_peer_takes_them_at_once() {
    let store = Probe::new(memory());
    let ids = enqueue(&store, &["a", "b", "c"]).await;
    let reasons: Arc<Mutex<Vec<Option<StopReason>>>> = Arc::default();
    let r = reasons.clone();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(4)
        .maintenance(false)
        .handler(move |job: Job| {
            let r = r.clone();
            async move {
                job.cancelled().await;
                r.lock().unwrap().push(job.stop_reason());
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(1), || worker.metrics().in_flight == 3).await;
    let polls = store.calls().claims.len();
    let report = worker.shutdown(Duration::from_secs(3)).await;

    assert_eq!(
        store.calls().claims.len(),
        polls,
        "no poll during the grace, though a slot was free"
    );
    assert!(!report.drained);
    assert_eq!((report.released, report.abandoned), (3, 0));
    assert_eq!(store.calls().releases, vec![3], "one release call");
    assert!(
        store.calls().completes.is_empty(),
        "their Ok after the cancellation is discarded"
    );
    assert_eq!(
        *reasons.lock().unwrap(),
        vec![Some(StopReason::Shutdown); 3]
    );
    for id in &ids {
        let it = item(&store, *id).await;
        assert_eq!((it.state, it.attempt, it.stalls), (ItemState::Ready, 1, 0));
    }
    let peer = store
        .claim(ClaimParams::new(
            queue(),
            OwnerId::new("peer").unwrap(),
            10,
            Duration::from_secs(30),
        ))
        .await
        .unwrap();
    assert_eq!(
        peer.len(),
        3,
        "claimable at once, without waiting for expiry"
    );
    assert!(peer.iter().all(|l| l.token.attempt == 2));
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_ignores_its_cancellation_is_dropped_before_its_lease_is_released() {
    let store = Probe::new(memory());
    let id = enqueue(&store, &["stubborn"]).await[0];
    let still_running = Arc::new(Mutex::new(None::<Instant>));
    let s = still_running.clone();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .maintenance(false)
        .handler(move |_job: Job| {
            let s = s.clone();
            async move {
                loop {
                    *s.lock().unwrap() = Some(Instant::now());
                    sleep(Duration::from_millis(100)).await;
                }
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(1), || worker.metrics().in_flight == 1).await;
    let report = worker.shutdown(Duration::from_secs(1)).await;
    let released_at = Instant::now();
    assert_eq!(report.released, 1);
    let last_step = still_running.lock().unwrap().unwrap();
    sleep(Duration::from_secs(1)).await;
    assert_eq!(
        *still_running.lock().unwrap(),
        Some(last_step),
        "the handler no longer runs"
    );
    assert!(last_step <= released_at);
    assert_eq!(item(&store, id).await.state, ItemState::Ready);
}

#[tokio::test(start_paused = true)]
async fn shutdown_removes_the_instance_from_the_registry_at_once() {
    let store = Probe::new(memory());
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .maintenance(false)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    let me = worker.instance().clone();
    let listed = |store: Probe<_>| async move {
        store
            .instance_list()
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect::<Vec<_>>()
    };
    let mut registered = false;
    for _ in 0..100 {
        if listed(store.clone()).await.contains(&me) {
            registered = true;
            break;
        }
        sleep(Duration::from_millis(10)).await;
    }
    assert!(registered, "the first heartbeat registers the instance");
    let report = worker.shutdown(Duration::from_secs(1)).await;
    assert!(report.deregistered);
    assert!(
        !listed(store.clone()).await.contains(&me),
        "gone without waiting to be evicted as stale"
    );
}
