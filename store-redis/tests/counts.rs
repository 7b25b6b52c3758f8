//! `queue_counts` on Redis reads counters and index sizes kept in the write path; this
//! drives Redis and the memory store (which counts its items one by one) through the
//! same steps on one manual clock and holds their counts equal after every step.

// Test bodies: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tenure_test_support::redis as common;

use std::time::Duration;

use tenure_core::{
    ClaimParams, CompleteParams, DiscardParams, FailParams, Failure, ItemId, LeaseToken,
    ManualClock, NewItem, OwnerId, QueueName, ReleaseParams, RequeueParams, Store, StoreExt,
    StreamKey, Timestamp,
};
use tenure_memory::MemoryStore;
use tenure_redis::{RedisConfig, RedisStore};

const LEASE: Duration = Duration::from_secs(30);

async fn same_counts(redis: &RedisStore, memory: &MemoryStore, q: &QueueName, step: &str) {
    let (r, m) = (
        redis.queue_counts(q).await.unwrap(),
        memory.queue_counts(q).await.unwrap(),
    );
    // The five counts this test is about; the oldest ready item's age and the pause
    // are the conformance suite's (op_inspection).
    let counts = |c: &tenure_core::QueueCounts| (c.ready, c.scheduled, c.running, c.dead, c.done);
    assert_eq!(
        counts(&r),
        counts(&m),
        "after {step}: redis {r:?}, memory {m:?}"
    );
}

async fn claim(store: &impl Store, q: &QueueName, n: u32) -> Vec<LeaseToken> {
    let owner = OwnerId::new("w").unwrap();
    let leases = store
        .claim(ClaimParams::new(q.clone(), owner, n, LEASE))
        .await
        .unwrap();
    leases.iter().map(|l| l.token).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_match_the_memory_store_through_every_transition() {
    let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
    let prefix = format!("n_{}", uuid::Uuid::now_v7().simple());
    let Some(redis) = common::on_shared_server(
        RedisConfig::new(common::url())
            .prefix(&prefix)
            .clock(clock.clone())
            .keep_done(true)
            .listen(false),
    )
    .await
    else {
        return;
    };
    let memory = MemoryStore::new(clock.clone()).keep_done(true);
    let q = QueueName::new("counts").unwrap();
    let s = StreamKey::new("s").unwrap();
    // Due, delayed, a stream head and a delayed item held behind it.
    let mut items = vec![
        NewItem::new(q.clone(), b"a".to_vec()),
        NewItem::new(q.clone(), b"b".to_vec()).delay(Duration::from_secs(60)),
        NewItem::new(q.clone(), b"c".to_vec()).stream(s.clone()),
        NewItem::new(q.clone(), b"d".to_vec())
            .stream(s.clone())
            .delay(Duration::from_secs(90)),
    ];
    for i in &mut items {
        let id = ItemId::new();
        *i = i.clone().with_id(id);
    }
    for store in [&redis as &dyn Store, &memory as &dyn Store] {
        store
            .enqueue(tenure_core::EnqueueParams::new(items.clone()))
            .await
            .unwrap();
    }
    same_counts(&redis, &memory, &q, "the enqueue").await;
    let (rt, mt) = (claim(&redis, &q, 1).await, claim(&memory, &q, 1).await);
    same_counts(&redis, &memory, &q, "one claim").await;
    let retry =
        |t: LeaseToken| FailParams::one(Failure::retry_after(t, Duration::from_secs(30), "x"));
    redis.fail(retry(rt[0])).await.unwrap();
    memory.fail(retry(mt[0])).await.unwrap();
    same_counts(&redis, &memory, &q, "a failure retried in 30 s").await;
    let (rt, mt) = (claim(&redis, &q, 10).await, claim(&memory, &q, 10).await);
    same_counts(&redis, &memory, &q, "a batch claim").await;
    redis.release(ReleaseParams::new(rt.clone())).await.unwrap();
    memory
        .release(ReleaseParams::new(mt.clone()))
        .await
        .unwrap();
    same_counts(&redis, &memory, &q, "a release").await;
    clock.advance(Duration::from_secs(61));
    same_counts(&redis, &memory, &q, "61 s later").await;
    let (rt, mt) = (claim(&redis, &q, 10).await, claim(&memory, &q, 10).await);
    same_counts(&redis, &memory, &q, "claiming everything due").await;
    redis
        .complete(CompleteParams::new(rt[..1].to_vec()))
        .await
        .unwrap();
    memory
        .complete(CompleteParams::new(mt[..1].to_vec()))
        .await
        .unwrap();
    let dead = |t: LeaseToken| FailParams::one(Failure::permanent(t, "gone"));
    redis.fail(dead(rt[1])).await.unwrap();
    memory.fail(dead(mt[1])).await.unwrap();
    same_counts(&redis, &memory, &q, "a complete and a permanent failure").await;
    clock.advance(LEASE);
    redis.recover_expired(Default::default()).await.unwrap();
    memory.recover_expired(Default::default()).await.unwrap();
    same_counts(&redis, &memory, &q, "recovering the rest").await;
    redis
        .dead_requeue(RequeueParams::new(vec![rt[1].id]))
        .await
        .unwrap();
    memory
        .dead_requeue(RequeueParams::new(vec![mt[1].id]))
        .await
        .unwrap();
    same_counts(&redis, &memory, &q, "a requeue").await;
    let (rt, mt) = (claim(&redis, &q, 10).await, claim(&memory, &q, 10).await);
    for t in &rt {
        redis.fail(dead(*t)).await.unwrap();
    }
    for t in &mt {
        memory.fail(dead(*t)).await.unwrap();
    }
    redis
        .dead_discard(DiscardParams::new(rt.iter().map(|t| t.id).collect()))
        .await
        .unwrap();
    memory
        .dead_discard(DiscardParams::new(mt.iter().map(|t| t.id).collect()))
        .await
        .unwrap();
    same_counts(&redis, &memory, &q, "discarding what died").await;
    clock.advance(Duration::from_secs(120));
    same_counts(&redis, &memory, &q, "once the held item is due").await;
    while let Some(l) = redis
        .claim_one(q.clone(), OwnerId::new("w").unwrap(), LEASE)
        .await
        .unwrap()
    {
        redis.complete_one(l.token).await.unwrap();
    }
    while let Some(l) = memory
        .claim_one(q.clone(), OwnerId::new("w").unwrap(), LEASE)
        .await
        .unwrap()
    {
        memory.complete_one(l.token).await.unwrap();
    }
    same_counts(&redis, &memory, &q, "draining the queue").await;
    let end = redis.queue_counts(&q).await.unwrap();
    assert_eq!(end.pending(), 0, "{end:?}");
    redis.remove_prefix().await.unwrap();
}
