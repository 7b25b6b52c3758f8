//! The pub/sub listener's health on the wake signal: `Down` until it is subscribed,
//! `Down` again from a lost connection until it has reconnected on its own, and the
//! publish of another store's enqueue wakes it once it is back.

// Test bodies: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tenure_test_support::redis as common;

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

/// G16: a slot freed in one process wakes the workers of another at once, not at
/// the next lease expiry: a finish in a queue with limits publishes the hint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_in_a_limited_queue_wakes_the_other_processes() {
    use tenure_core::{
        ClaimParams, CompleteParams, FailParams, Failure, LimitsParams, OwnerId, QueueLimits,
        ReleaseParams,
    };
    let Some(server) = TempRedis::start(&["--appendonly", "no"]).await else {
        return;
    };
    let prefix = format!("s_{}", uuid::Uuid::now_v7().simple());
    let store = RedisStore::connect(RedisConfig::new(server.url()).prefix(&prefix))
        .await
        .unwrap();
    let signal = store.wake_signal().unwrap();
    let mut changes = signal.health_changes();
    health_becomes(&mut changes, WakeHealth::Healthy).await;
    let peer = RedisStore::connect(RedisConfig::new(server.url()).prefix(&prefix).listen(false))
        .await
        .unwrap();
    let q = QueueName::new("q").unwrap();
    peer.limits_set(LimitsParams::new(
        q.clone(),
        QueueLimits::new().concurrency(1),
    ))
    .await
    .unwrap();
    for _ in 0..3 {
        peer.enqueue_one(NewItem::new(q.clone(), b"x".to_vec()))
            .await
            .unwrap();
    }
    let owner = OwnerId::new("w").unwrap();
    let drain = || async {
        while tokio::time::timeout(Duration::from_millis(50), signal.notified())
            .await
            .is_ok()
        {}
    };
    let claim_one = || async {
        let mut l = peer
            .claim(ClaimParams::new(
                q.clone(),
                owner.clone(),
                5,
                Duration::from_secs(60),
            ))
            .await
            .unwrap();
        assert_eq!(l.len(), 1, "a concurrency of 1");
        l.remove(0).token
    };
    let signal = &signal;
    let woken = |what: &'static str| async move {
        tokio::time::timeout(Duration::from_secs(10), signal.notified())
            .await
            .unwrap_or_else(|_| panic!("the hint of the peer's {what} arrived"));
    };
    let t = claim_one().await;
    drain().await;
    peer.complete(CompleteParams::new(vec![t])).await.unwrap();
    woken("complete").await;
    let t = claim_one().await;
    drain().await;
    peer.release(ReleaseParams::new(vec![t])).await.unwrap();
    woken("release").await;
    let t = claim_one().await;
    drain().await;
    peer.fail(FailParams::new(vec![Failure::permanent(t, "x")]))
        .await
        .unwrap();
    woken("fail").await;
}
