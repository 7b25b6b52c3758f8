//! Redis Cluster on throwaway nodes: queue families with a prefix each spread over
//! the primaries and drain; wake-ups travel over the prefix's shard channel;
//! `wait_replicas` waits on the primary that owns the prefix's slot alone.

// Test bodies: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tenure_test_support::redis as common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tenure_core::{EnqueueParams, ErrorKind, NewItem, QueueName, Store, StoreExt, WakeHealth};
use tenure_redis::{RedisConfig, RedisStore};
use tenure_runtime::{Job, Worker};
use tenure_test_support::redis::{ask, eventually, TempCluster};

const NODE_TIMEOUT: Duration = Duration::from_millis(1_000);

fn queue() -> QueueName {
    QueueName::new("work").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queue_families_with_a_prefix_each_spread_over_the_primaries_and_all_drain() {
    let Some(cluster) = TempCluster::start(3, 0, NODE_TIMEOUT, &[]).await else {
        return;
    };
    // The cluster is new, so fixed prefixes are free; their slots are fixed too.
    let families = [
        "emails",
        "thumbnails",
        "billing",
        "reports",
        "search",
        "exports",
    ];
    const PER_FAMILY: usize = 200;
    let mut owners: BTreeMap<&str, (u16, u16)> = BTreeMap::new();
    for f in families {
        let slot = cluster.keyslot(&format!("{{{f}}}")).await;
        owners.insert(f, (slot, cluster.primary_of(slot).await.unwrap()));
    }
    let primaries: BTreeSet<u16> = owners.values().map(|(_, p)| *p).collect();
    println!("family -> (slot, primary port): {owners:?}");
    assert!(
        primaries.len() > 1,
        "the families' slots all landed on one primary: {owners:?}"
    );

    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    let mut stores = Vec::new();
    for f in families {
        let store = RedisStore::connect(RedisConfig::new(cluster.url()).prefix(f).keep_done(true))
            .await
            .unwrap();
        let items: Vec<NewItem> = (0..PER_FAMILY)
            .map(|n| NewItem::new(queue(), n.to_string().into_bytes()))
            .collect();
        store.enqueue(EnqueueParams::new(items)).await.unwrap();
        let done = done.clone();
        workers.push(
            Worker::builder(store.clone())
                .queue(queue())
                .concurrency(4)
                .handler(move |_job: Job| {
                    let done = done.clone();
                    async move {
                        done.fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    }
                })
                .spawn()
                .unwrap(),
        );
        stores.push((f, store));
    }
    for (f, store) in &stores {
        eventually(
            Duration::from_secs(60),
            &format!("{f} to drain"),
            || async {
                let c = store.queue_counts(&queue()).await.ok()?;
                (c.done == PER_FAMILY as u64 && c.pending() == 0).then_some(())
            },
        )
        .await;
    }
    for w in workers {
        w.shutdown(Duration::from_secs(5)).await;
    }
    assert_eq!(done.load(Ordering::Relaxed), families.len() * PER_FAMILY);
    // Each family's keys live in its slot, on the primary that owns it.
    for (f, (slot, primary)) in &owners {
        let here: i64 = ask(
            *primary,
            redis::cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(*slot),
        )
        .await
        .unwrap();
        assert!(here > PER_FAMILY as i64, "{f}: {here} keys in slot {slot}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_store_hears_a_peers_enqueue_over_the_prefixs_shard_channel() {
    let Some(cluster) = TempCluster::start(3, 0, NODE_TIMEOUT, &[]).await else {
        return;
    };
    let prefix = format!("w_{}", uuid::Uuid::now_v7().simple());
    let store = RedisStore::connect(RedisConfig::new(cluster.url()).prefix(&prefix))
        .await
        .unwrap();
    let signal = store.wake_signal().unwrap();
    let mut health = signal.health_changes();
    tokio::time::timeout(
        Duration::from_secs(20),
        health.wait_for(|h| *h == WakeHealth::Healthy),
    )
    .await
    .expect("the listener subscribed")
    .unwrap();
    // The subscription sits on the primary owning the prefix's slot.
    let channel = format!("{{{prefix}}}:wake");
    let owner = cluster
        .primary_of(cluster.keyslot(&channel).await)
        .await
        .unwrap();
    let subscribers: (String, i64) =
        ask(owner, redis::cmd("PUBSUB").arg("SHARDNUMSUB").arg(&channel))
            .await
            .unwrap();
    assert_eq!(subscribers.1, 1, "subscribed on the slot's primary");
    while tokio::time::timeout(Duration::from_millis(50), signal.notified())
        .await
        .is_ok()
    {}
    let peer = RedisStore::connect(
        RedisConfig::new(cluster.url())
            .prefix(&prefix)
            .listen(false),
    )
    .await
    .unwrap();
    peer.enqueue_one(NewItem::new(queue(), b"x".to_vec()))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), signal.notified())
        .await
        .expect("the peer's enqueue woke the store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_replicas_waits_on_the_primary_of_the_prefixs_slot_alone_and_a_lost_library_is_loaded_again(
) {
    let Some(mut cluster) = TempCluster::start(3, 1, NODE_TIMEOUT, &[]).await else {
        return;
    };
    let prefix = format!("r_{}", uuid::Uuid::now_v7().simple());
    let store = RedisStore::connect(
        RedisConfig::new(cluster.url())
            .prefix(&prefix)
            .listen(false)
            .wait_replicas(1, Duration::from_millis(300)),
    )
    .await
    .unwrap();
    // Connected (to every node) before any replica stops.
    store.ping().await.unwrap();
    let owner = cluster
        .primary_of(cluster.keyslot(&format!("{{{prefix}}}")).await)
        .await
        .unwrap();
    let own_replica = cluster.replicas_of(owner).await[0];
    let mut others = Vec::new();
    for p in cluster.ports.clone() {
        let role = common::info_field(p, "replication", "role").await;
        if p != own_replica && role.as_deref() == Some("slave") {
            others.push(p);
        }
    }
    assert_eq!(others.len(), 2);
    // Every other shard's replica stopped: a WAIT sent to every primary would get 0
    // acknowledgements from two of them; the store's goes to its own primary.
    for p in &others {
        cluster.node(*p).pause();
    }
    store
        .enqueue_one(NewItem::new(queue(), b"a".to_vec()))
        .await
        .unwrap();
    // Its own replica stopped: now the write is not acknowledged.
    cluster.node(own_replica).pause();
    let err = store
        .enqueue_one(NewItem::new(queue(), b"b".to_vec()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    for p in others.iter().chain([&own_replica]) {
        cluster.node(*p).resume();
    }
    // A primary without the function library gets it loaded by the next call.
    let _: () = ask(owner, redis::cmd("FUNCTION").arg("FLUSH"))
        .await
        .unwrap();
    let lease = store
        .claim_one(
            queue(),
            tenure_core::OwnerId::new("w").unwrap(),
            Duration::from_secs(30),
        )
        .await
        .unwrap()
        .expect("an item is ready");
    store.complete_one(lease.token).await.unwrap();
    let libraries: Vec<redis::Value> = ask(owner, redis::cmd("FUNCTION").arg("LIST"))
        .await
        .unwrap();
    assert_eq!(libraries.len(), 1, "loaded again on the slot's primary");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_on_a_cluster_with_every_key_of_the_queue_under_its_hash_tag() {
    use tenure_core::{
        ClaimParams, CompleteParams, DeferParams, LimitKey, LimitsParams, OwnerId, QueueLimits,
        Rate,
    };
    let Some(cluster) = TempCluster::start(3, 0, NODE_TIMEOUT, &[]).await else {
        return;
    };
    let prefix = format!("l_{}", uuid::Uuid::now_v7().simple());
    let store = RedisStore::connect(RedisConfig::new(cluster.url()).prefix(&prefix))
        .await
        .unwrap();
    let (a, b) = (LimitKey::new("a").unwrap(), LimitKey::new("b").unwrap());
    let limits = QueueLimits::new()
        .per_key(2)
        .key_override(b.clone(), 1)
        .key_rate(Rate::new(3, Duration::from_secs(3600)));
    // A function that touched a key outside the prefix's slot would fail here.
    assert_eq!(
        store
            .limits_set(LimitsParams::new(queue(), limits.clone()))
            .await
            .unwrap(),
        None
    );
    let mut items: Vec<NewItem> = (0..6)
        .map(|n| NewItem::new(queue(), vec![n]).limit_key(a.clone()))
        .collect();
    items.extend((0..2).map(|n| NewItem::new(queue(), vec![n]).limit_key(b.clone())));
    store.enqueue(EnqueueParams::new(items)).await.unwrap();
    let owner = OwnerId::new("w").unwrap();
    let lease = Duration::from_secs(60);
    let claim = || store.claim(ClaimParams::new(queue(), owner.clone(), 10, lease));
    let first = claim().await.unwrap();
    assert_eq!(first.len(), 3, "2 of a, 1 of b");
    let tokens: Vec<_> = first.iter().map(|l| l.token).collect();
    store.complete(CompleteParams::new(tokens)).await.unwrap();
    // a has one start left in its window, b its second item.
    assert_eq!(claim().await.unwrap().len(), 2);
    assert_eq!(
        claim().await.unwrap().len(),
        0,
        "a's rate and b's slot are used"
    );
    assert!(store.limits_wait(&[queue()]).await.unwrap().is_some());
    store
        .limits_defer(DeferParams::new(queue(), Some(b), Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(store.limits_get(&queue()).await.unwrap(), Some(limits));
    assert_eq!(store.limits_list().await.unwrap().len(), 1);
    assert!(store.limits_clear(&queue()).await.unwrap());
    assert_eq!(store.limits_list().await.unwrap().len(), 0);
    assert_eq!(claim().await.unwrap().len(), 3, "no limits: a's last three");
}
