//! The LISTEN connection's health as the worker sees it (seed 001): a killed listener
//! backend pins the claim loop to its base until the listener has reconnected on its
//! own, then the loop relaxes again and NOTIFY wakes it as before.
//!
//! The test runs in a throwaway database of its own, so it can refuse new connections
//! (`ALLOW_CONNECTIONS false`) to keep the listener down while it measures, without
//! touching any other test's connections.
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tenure_test_support::postgres as common;

use sqlx::{Connection, PgConnection};
use tenure_core::{NewItem, QueueName, Store, StoreExt, WakeHealth};
use tenure_postgres::{PgConfig, PgStore};
use tenure_runtime::{Job, PollPolicy, Worker};
use tokio::sync::watch;

/// The server URL with its database replaced by `db`.
fn url_for(db: &str) -> String {
    let url = common::url();
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b.to_owned(), format!("?{q}")),
        None => (url.clone(), String::new()),
    };
    let (server, _) = base.rsplit_once('/').expect("the URL names a database");
    format!("{server}/{db}{query}")
}

async fn health_becomes(changes: &mut watch::Receiver<WakeHealth>, want: WakeHealth) {
    tokio::time::timeout(Duration::from_secs(20), changes.wait_for(|h| *h == want))
        .await
        .unwrap_or_else(|_| panic!("the wake-up health did not become {want}"))
        .expect("the signal lives");
}

/// Claims the worker had answered during `window` from now.
async fn polls_during(worker: &Worker, window: Duration) -> u64 {
    let before = worker.metrics().polls;
    tokio::time::sleep(window).await;
    worker.metrics().polls - before
}

async fn allow_connections(admin: &mut PgConnection, db: &str, allow: bool) {
    sqlx::raw_sql(&format!(
        "ALTER DATABASE {db} WITH ALLOW_CONNECTIONS {allow}"
    ))
    .execute(admin)
    .await
    .expect("alter database");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_listener_pins_the_claim_loop_to_its_base_until_it_reconnects_then_it_relaxes() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let db = format!("tenure_l_{}", uuid::Uuid::now_v7().simple());
    sqlx::raw_sql(&format!("CREATE DATABASE {db}"))
        .execute(&mut admin)
        .await
        .expect("create database");
    let schema = common::fresh_schema();
    // One pooled connection, opened before the listener goes down and reused
    // throughout, so the claims keep working while new connections are refused.
    let store = PgStore::connect(
        PgConfig::new(url_for(&db))
            .schema(&schema)
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(10)),
    )
    .await
    .expect("connect");
    let signal = store.wake_signal().expect("a wake signal");
    let mut changes = signal.health_changes();
    health_becomes(&mut changes, WakeHealth::Healthy).await;

    let queue = QueueName::new("q").unwrap();
    let ran: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let r = ran.clone();
    let base = Duration::from_millis(20);
    let worker = Worker::builder(store.clone())
        .queue(queue.clone())
        .maintenance(false)
        .poll(PollPolicy::new(base, Duration::from_secs(10)))
        .handler(move |_job: Job| {
            let r = r.clone();
            async move {
                r.lock().unwrap().push(Instant::now());
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    // The first poll, then the relaxed 5 s baseline.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let relaxed = polls_during(&worker, Duration::from_millis(500)).await;
    assert!(
        relaxed <= 1,
        "healthy LISTEN: the loop waits 5 s, not {base:?} ({relaxed} polls in 500 ms)"
    );

    allow_connections(&mut admin, &db, false).await;
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = $1 AND query ILIKE 'LISTEN%'",
    )
    .bind(&db)
    .fetch_all(&mut admin)
    .await
    .expect("terminate the listener");
    assert_eq!(killed, vec![true], "exactly the listener's backend");
    health_becomes(&mut changes, WakeHealth::Down).await;
    let pinned = polls_during(&worker, Duration::from_millis(500)).await;
    assert!(
        pinned >= 5,
        "listener down: the loop polls every {base:?} ({pinned} polls in 500 ms)"
    );

    allow_connections(&mut admin, &db, true).await;
    health_becomes(&mut changes, WakeHealth::Healthy).await;
    // Past the catch-up poll the reconnect fires.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = polls_during(&worker, Duration::from_millis(500)).await;
    assert!(
        again <= 1,
        "reconnected: the loop relaxes again ({again} polls in 500 ms)"
    );

    // And the NOTIFY of another process's enqueue reaches the loop again, long before
    // its relaxed poll would.
    // (A store sends NOTIFY only when it listens too.)
    let peer = PgStore::connect(PgConfig::new(url_for(&db)).schema(&schema))
        .await
        .expect("peer");
    let sent = Instant::now();
    peer.enqueue_one(NewItem::new(queue, b"after".to_vec()))
        .await
        .unwrap();
    let deadline = sent + Duration::from_secs(3);
    while ran.lock().unwrap().is_empty() {
        if Instant::now() >= deadline {
            let rows: Vec<(Option<String>, Option<String>)> =
                sqlx::query_as("SELECT state, query FROM pg_stat_activity WHERE datname = $1")
                    .bind(&db)
                    .fetch_all(&mut admin)
                    .await
                    .unwrap();
            panic!(
                "the NOTIFY did not wake the loop: {:?} {rows:?} {:?}",
                worker.metrics(),
                signal.health()
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    worker.shutdown(Duration::from_secs(5)).await;
    peer.close().await;
    store.close().await;
    drop(signal);
    sqlx::raw_sql(&format!("DROP DATABASE {db} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .expect("drop database");
    admin.close().await.ok();
}
