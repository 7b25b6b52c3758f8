//! The wake signal on real stores: a worker whose every poll wait is 10 s picks up an
//! item within a fraction of that once it is enqueued, through the same handle
//! (in-process signal) or, on Postgres and Redis, through another connection pool
//! (NOTIFY) or store (pub/sub).

// The shared body runs outside #[test] functions; a failure there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Backend, Place};
use tenure::runtime::{Job, PollPolicy, Worker};
use tenure::{NewItem, QueueName, Store, StoreExt};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(10);

async fn an_enqueue_wakes_a_worker_waiting_10_s(backend: Backend, through_a_peer: bool) {
    let Some(place) = Place::new(backend).await else {
        return;
    };
    let queue = QueueName::new("wake").unwrap();
    let worker_store = place.open().await.unwrap();
    let producer = if through_a_peer {
        place.open().await.unwrap()
    } else {
        worker_store.clone()
    };
    if backend == Backend::Postgres || backend == Backend::Redis {
        // The listener fires once when its LISTEN (SUBSCRIBE) is in place. Wait for that first, so
        // the wake below can only come from the peer's NOTIFY.
        let signal = worker_store
            .wake_signal()
            .expect("the store hands out a signal");
        tokio::time::timeout(WAIT, signal.notified())
            .await
            .expect("the listener started");
    }
    let (tx, mut handled) = mpsc::unbounded_channel();
    let worker = Worker::builder(worker_store)
        .queue(queue.clone())
        .maintenance(false)
        .poll(PollPolicy::new(WAIT, WAIT))
        .handler(move |_job: Job| {
            let tx = tx.clone();
            async move {
                tx.send(Instant::now()).unwrap();
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    // Wait for the first (empty) poll to be answered: from then on the worker is in,
    // or about to enter, a 10 s wait, and only the wake signal ends it early.
    let deadline = Instant::now() + WAIT;
    while worker.metrics().polls == 0 {
        assert!(Instant::now() < deadline, "the worker never polled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(worker.metrics().claimed, 0);
    let enqueued = Instant::now();
    producer
        .enqueue_one(NewItem::new(queue, b"now".to_vec()))
        .await
        .unwrap();
    let ran = tokio::time::timeout(WAIT, handled.recv())
        .await
        .expect("the item waited for the poll")
        .unwrap();
    let latency = ran - enqueued;
    println!(
        "{} (peer {through_a_peer}): picked up {latency:?} after the enqueue",
        backend.name()
    );
    assert!(
        latency < Duration::from_secs(3),
        "woken, not polled: {latency:?}"
    );
    worker.shutdown(Duration::from_secs(5)).await;
    place.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_an_enqueue_through_the_same_handle_wakes_the_worker() {
    an_enqueue_wakes_a_worker_waiting_10_s(Backend::Memory, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_enqueue_through_the_same_handle_wakes_the_worker() {
    an_enqueue_wakes_a_worker_waiting_10_s(Backend::Sqlite, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_enqueue_through_another_pool_wakes_the_worker_by_notify() {
    an_enqueue_wakes_a_worker_waiting_10_s(Backend::Postgres, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_an_enqueue_through_another_store_wakes_the_worker_by_pub_sub() {
    an_enqueue_wakes_a_worker_waiting_10_s(Backend::Redis, true).await;
}
