//! Queue limits (G16) on the claim paths the conformance suite does not combine with
//! them: a partitioned claim, a claim with stream runs, a claim of several queues of
//! which one is limited, and an item hash written without a limit key (as every item
//! written before limits is).

// Test bodies: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tenure_test_support::redis as common;

use std::time::Duration;

use tenure_core::{
    ClaimParams, EnqueueParams, HeartbeatParams, LimitKey, LimitsParams, NewItem, OwnerId,
    Partitioning, QueueLimits, QueueName, Store, StreamKey,
};
use tenure_redis::{RedisConfig, RedisStore};

const LEASE: Duration = Duration::from_secs(30);

async fn store() -> Option<RedisStore> {
    let prefix = format!("lim_{}", uuid::Uuid::now_v7().simple());
    common::on_shared_server(
        RedisConfig::new(common::url())
            .prefix(&prefix)
            .listen(false),
    )
    .await
}

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn keyed(queue: &QueueName, key: &str, n: usize) -> Vec<NewItem> {
    (0..n)
        .map(|_| NewItem::new(queue.clone(), b"x".to_vec()).limit_key(LimitKey::new(key).unwrap()))
        .collect()
}

async fn limit(store: &RedisStore, queue: &QueueName, limits: QueueLimits) {
    store
        .limits_set(LimitsParams::new(queue.clone(), limits))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_partitioned_claim_keeps_a_key_limit() {
    let Some(store) = store().await else { return };
    let (work, owner) = (q("work"), OwnerId::new("w").unwrap());
    store
        .instance_heartbeat(HeartbeatParams::new(owner.clone()))
        .await
        .unwrap();
    limit(&store, &work, QueueLimits::new().per_key(2)).await;
    let mut items = keyed(&work, "a", 5);
    items.extend(keyed(&work, "b", 1));
    store.enqueue(EnqueueParams::new(items)).await.unwrap();
    let got = store
        .claim(ClaimParams::new(work, owner, 10, LEASE).partitioned(Partitioning::new(4)))
        .await
        .unwrap();
    assert_eq!(got.len(), 3, "2 of a, 1 of b");
}

#[tokio::test]
async fn a_stream_run_stops_at_a_key_limit() {
    let Some(store) = store().await else { return };
    let (work, owner) = (q("work"), OwnerId::new("w").unwrap());
    limit(&store, &work, QueueLimits::new().per_key(2)).await;
    let s = StreamKey::new("s").unwrap();
    let items = (0..5)
        .map(|_| {
            NewItem::new(work.clone(), b"x".to_vec())
                .stream(s.clone())
                .limit_key(LimitKey::new("a").unwrap())
        })
        .collect();
    store.enqueue(EnqueueParams::new(items)).await.unwrap();
    let got = store
        .claim(ClaimParams::new(work, owner, 10, LEASE).stream_runs(5))
        .await
        .unwrap();
    assert_eq!(got.len(), 2, "the head and one behind it");
}

#[tokio::test]
async fn a_claim_of_several_queues_limits_only_the_limited_one() {
    let Some(store) = store().await else { return };
    let (limited, free, owner) = (q("limited"), q("free"), OwnerId::new("w").unwrap());
    limit(&store, &limited, QueueLimits::new().concurrency(1)).await;
    let mut items = keyed(&limited, "a", 3);
    items.extend(keyed(&free, "a", 3));
    store.enqueue(EnqueueParams::new(items)).await.unwrap();
    let got = store
        .claim(
            ClaimParams::new(limited.clone(), owner, 10, LEASE)
                .queues(vec![limited.clone(), free.clone()]),
        )
        .await
        .unwrap();
    let of = |queue: &QueueName| got.iter().filter(|l| l.item.queue == *queue).count();
    assert_eq!((of(&limited), of(&free)), (1, 3));
}

#[tokio::test]
async fn an_item_written_without_a_limit_key_counts_under_the_queue_limit_only() {
    let Some(store) = store().await else { return };
    let (work, owner) = (q("work"), OwnerId::new("w").unwrap());
    // No limit key: the item hash has no `lk`, as items written before limits.
    let plain = (0..4)
        .map(|_| NewItem::new(work.clone(), b"x".to_vec()))
        .collect();
    store.enqueue(EnqueueParams::new(plain)).await.unwrap();
    limit(&store, &work, QueueLimits::new().concurrency(3).per_key(1)).await;
    let got = store
        .claim(ClaimParams::new(work, owner, 10, LEASE))
        .await
        .unwrap();
    assert_eq!(
        got.len(),
        3,
        "keyless items pass the per-key limit, not the queue's"
    );
}
