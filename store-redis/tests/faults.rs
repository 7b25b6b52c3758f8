//! Faults on Redis: a killed connection answers `Unavailable` and the same store works
//! again by itself; a server that goes away and comes back is the same, and one that
//! lost the function library gets it again; a function
//! that refuses its input leaves nothing written.

// Test bodies: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tenure_test_support::redis as common;

use std::time::Duration;

use common::{admin, TempRedis};
use tenure_core::{
    DedupKey, EnqueueParams, ErrorKind, ItemId, NewItem, OwnerId, QueueName, Store, StoreExt,
};
use tenure_redis::{RedisConfig, RedisStore};

const LEASE: Duration = Duration::from_secs(30);

fn queue() -> QueueName {
    QueueName::new("faults").unwrap()
}

fn prefix() -> String {
    format!("f_{}", uuid::Uuid::now_v7().simple())
}

/// A store on `server` with a prefix of its own and no listener.
fn config(server: &TempRedis) -> RedisConfig {
    RedisConfig::new(server.url())
        .prefix(&prefix())
        .listen(false)
}

/// Connects with `config` and enqueues one item; returns the store and its id.
async fn open_with_item(config: RedisConfig) -> (RedisStore, ItemId) {
    let store = RedisStore::connect(config).await.unwrap();
    let id = store
        .enqueue_one(NewItem::new(queue(), b"x".to_vec()))
        .await
        .unwrap()
        .id;
    (store, id)
}

/// Kills every client connection of `server` but the admin one that asks; answers how
/// many went.
async fn kill_client_connections(server: &TempRedis) -> i64 {
    let mut admin = admin(&server.url()).await;
    redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"][..])
        .query_async(&mut admin)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_connection_answers_unavailable_then_the_store_reconnects_by_itself() {
    let Some(server) = TempRedis::start(&["--appendonly", "no"]).await else {
        return;
    };
    // One connection, so the call after the kill is sure to go over the dead one.
    let (store, id) = open_with_item(config(&server).connections(1)).await;
    // Kill every client connection but this one: the store's connection goes.
    let killed = kill_client_connections(&server).await;
    assert_eq!(killed, 1, "the store held one connection");
    let err = store.queue_counts(&queue()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.is_retryable());
    // The next call opens a new connection on its own and sees the data.
    let lease = store
        .claim_one(queue(), OwnerId::new("w").unwrap(), LEASE)
        .await
        .unwrap()
        .expect("the item is still there");
    assert_eq!(lease.item.id, id);
    store.complete_one(lease.token).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_default_connections_each_killed_one_is_unavailable_once_then_replaced() {
    let Some(server) = TempRedis::start(&["--appendonly", "no"]).await else {
        return;
    };
    let (store, _) = open_with_item(config(&server)).await;
    // Calls take turns on the connections: enough calls open every one of them.
    for _ in 0..8 {
        store.queue_counts(&queue()).await.unwrap();
    }
    let killed = kill_client_connections(&server).await;
    assert!(
        killed > 1,
        "the store spreads its calls over several connections"
    );
    let first = store.queue_counts(&queue()).await.unwrap_err();
    assert_eq!(first.kind(), ErrorKind::Unavailable, "{first}");
    // Each dead connection answers one call Unavailable and is then replaced, so
    // after at most `killed` failures every call succeeds again.
    let mut failures = 1;
    while store.queue_counts(&queue()).await.is_err() {
        failures += 1;
        assert!(
            failures <= killed,
            "{failures} failures for {killed} dead connections"
        );
    }
    for _ in 0..8 {
        let counts = store.queue_counts(&queue()).await.unwrap();
        assert_eq!(counts.ready, 1, "the data survived the kill");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_lost_the_function_library_gets_it_again_on_the_next_call() {
    let Some(server) = TempRedis::start(&["--appendonly", "no"]).await else {
        return;
    };
    let (store, id) = open_with_item(config(&server)).await;
    let mut admin = admin(&server.url()).await;
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(libraries.len(), 1, "the first call loaded the library");
    // As after a restart without persistence: the data stays, the functions go.
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut admin)
        .await
        .unwrap();
    // The same connection, the same store: the call loads the library and runs.
    let lease = store
        .claim_one(queue(), OwnerId::new("w").unwrap(), LEASE)
        .await
        .unwrap()
        .expect("the item is still there");
    assert_eq!(lease.item.id, id);
    store.complete_one(lease.token).await.unwrap();
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(libraries.len(), 1, "loaded again, once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_goes_away_is_unavailable_and_the_store_works_again_once_it_is_back() {
    let Some(mut server) =
        TempRedis::start(&["--appendonly", "yes", "--appendfsync", "always"]).await
    else {
        return;
    };
    let (store, id) =
        open_with_item(config(&server).connect_timeout(Duration::from_millis(500))).await;
    server.kill();
    for _ in 0..3 {
        let err = store.item_get(id).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    }
    let err = store
        .leader_acquire(tenure_core::LeaderParams::new(
            tenure_core::LeaderName::new("m").unwrap(),
            OwnerId::new("w").unwrap(),
            LEASE,
        ))
        .await
        .unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::Unavailable,
        "never a Follower: {err}"
    );
    server.boot().await;
    // The same store, no rebuild: the item survived (AOF always), and so did the
    // function library, which the AOF keeps like the data.
    let item = store
        .item_get(id)
        .await
        .unwrap()
        .expect("the item survived");
    assert_eq!(item.payload, b"x");
    let lease = store
        .claim_one(queue(), OwnerId::new("w").unwrap(), LEASE)
        .await
        .unwrap()
        .expect("claimable after the restart");
    assert_eq!(lease.item.id, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enqueue_refused_for_an_existing_id_writes_nothing_of_its_batch() {
    let Some(server) = TempRedis::start(&["--appendonly", "no"]).await else {
        return;
    };
    let store = RedisStore::connect(config(&server)).await.unwrap();
    let existing = store
        .enqueue_one(NewItem::new(queue(), b"first".to_vec()))
        .await
        .unwrap()
        .id;
    let before = store.queue_counts(&queue()).await.unwrap();
    // Two good items (one keyed, one in a stream) ahead of one whose id exists: the
    // script checks all three before its first write, so it writes none.
    let keyed = NewItem::new(queue(), b"a".to_vec()).dedup_key(DedupKey::new("k").unwrap());
    let streamed =
        NewItem::new(queue(), b"b".to_vec()).stream(tenure_core::StreamKey::new("s").unwrap());
    let clash = NewItem::new(queue(), b"c".to_vec()).with_id(existing);
    let (keyed_id, streamed_id) = (keyed.id, streamed.id);
    let err = store
        .enqueue(EnqueueParams::new(vec![keyed, streamed, clash]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    // The system clock moved on, so the oldest item's wait grew; the counts did not.
    let after = store.queue_counts(&queue()).await.unwrap();
    assert_eq!(
        after.with_oldest_ready_age(None),
        before.with_oldest_ready_age(None)
    );
    for id in [keyed_id, streamed_id] {
        assert!(
            store.item_get(id).await.unwrap().is_none(),
            "{id} was written"
        );
    }
    // Neither the dedup key nor the stream was recorded: both are new.
    let again = NewItem::new(queue(), b"a2".to_vec()).dedup_key(DedupKey::new("k").unwrap());
    let again_id = again.id;
    let told = store.enqueue_one(again).await.unwrap();
    assert_eq!((told.id, told.duplicate), (again_id, false));
    let later =
        NewItem::new(queue(), b"b2".to_vec()).stream(tenure_core::StreamKey::new("s").unwrap());
    let later_id = later.id;
    store.enqueue_one(later).await.unwrap();
    let owner = OwnerId::new("w").unwrap();
    let mut claimed: Vec<ItemId> = Vec::new();
    while let Some(l) = store
        .claim_one(queue(), owner.clone(), LEASE)
        .await
        .unwrap()
    {
        claimed.push(l.item.id);
    }
    assert!(
        claimed.contains(&later_id),
        "the stream had no phantom head from the refused batch: {claimed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_too_few_replicas_acknowledged_is_unavailable_and_stays_applied() {
    let Some(server) = TempRedis::start(&["--appendonly", "no"]).await else {
        return;
    };
    // No replica will ever acknowledge: every write waits 50 ms and is told so.
    let store = RedisStore::connect(config(&server).wait_replicas(1, Duration::from_millis(50)))
        .await
        .unwrap();
    let item = NewItem::new(queue(), b"x".to_vec());
    let id = item.id;
    let err = store.enqueue_one(item).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    // Reads do not wait; the write was applied on the primary.
    let got = store
        .item_get(id)
        .await
        .unwrap()
        .expect("applied on the primary");
    assert_eq!(got.payload, b"x");
}
