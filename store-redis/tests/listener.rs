//! The pub/sub listener's health on the wake signal: `Down` until it is subscribed,
//! `Down` again from a lost connection until it has reconnected on its own, and the
//! publish of another store's enqueue wakes it once it is back.

// Test bodies: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::TempRedis;
use tenure_core::{NewItem, QueueName, Store, StoreExt, WakeHealth};
use tenure_redis::{RedisConfig, RedisStore};
use tokio::sync::watch;

async fn health_becomes(changes: &mut watch::Receiver<WakeHealth>, want: WakeHealth) {
    tokio::time::timeout(Duration::from_secs(20), changes.wait_for(|h| *h == want))
        .await
        .unwrap_or_else(|_| panic!("the wake-up health did not become {want}"))
        .expect("the signal lives");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_subscription_is_down_until_the_listener_has_reconnected_by_itself() {
    let Some(mut server) = TempRedis::start(&["--appendonly", "no"]).await else {
        return;
    };
    let prefix = format!("l_{}", uuid::Uuid::now_v7().simple());
    let store = RedisStore::connect(RedisConfig::new(server.url()).prefix(&prefix))
        .await
        .unwrap();
    let signal = store.wake_signal().unwrap();
    let mut changes = signal.health_changes();
    health_becomes(&mut changes, WakeHealth::Healthy).await;

    server.kill();
    health_becomes(&mut changes, WakeHealth::Down).await;
    server.boot().await;
    health_becomes(&mut changes, WakeHealth::Healthy).await;

    // Drop the wake-ups the reconnect left stored, then see a peer's publish arrive.
    while tokio::time::timeout(Duration::from_millis(50), signal.notified())
        .await
        .is_ok()
    {}
    let peer = RedisStore::connect(RedisConfig::new(server.url()).prefix(&prefix).listen(false))
        .await
        .unwrap();
    peer.enqueue_one(NewItem::new(QueueName::new("q").unwrap(), b"x".to_vec()))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), signal.notified())
        .await
        .expect("the publish of the peer's enqueue arrived");
}

#[tokio::test]
async fn without_listen_the_signal_is_local() {
    let store = RedisStore::connect(
        RedisConfig::new("redis://127.0.0.1:1")
            .prefix("nolisten")
            .listen(false),
    )
    .await
    .unwrap();
    assert_eq!(
        store.wake_signal().map(|s| s.health()),
        Some(WakeHealth::Local)
    );
}
