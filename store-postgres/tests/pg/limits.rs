//! Queue limits (G16, G17) on PostgreSQL beyond the conformance suite: one key
//! hammered from many pools at once, and the upgrade of a version-9 schema.

use super::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The running items of `key` in the schema, read by the admin connection.
async fn running_of(admin: &mut sqlx::PgConnection, schema: &str, key: &str) -> i64 {
    sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {schema}.items WHERE state = 'running' AND limit_key = $1"
    ))
    .bind(key)
    .fetch_one(admin)
    .await
    .unwrap()
}

/// Eight handles, each on its own pool, claim one key with a limit of 2 at once and
/// over and over, each holding what it got for a moment before it completes it. The
/// key's running count, read by the claimers and by a watcher on its own connection,
/// never exceeds 2, and every item runs.
#[tokio::test]
async fn one_key_with_a_limit_of_two_hammered_from_eight_pools_never_runs_three() {
    let Some(ctx) = Ctx::new().await else { return };
    const LIMIT: usize = 2;
    const ITEMS: usize = 40;
    let key = LimitKey::new("api").unwrap();
    ctx.store
        .limits_set(LimitsParams::new(
            q(),
            QueueLimits::new().per_key(u32::try_from(LIMIT).unwrap()),
        ))
        .await
        .unwrap();
    ctx.store
        .enqueue(EnqueueParams::new(
            (0..ITEMS)
                .map(|_| NewItem::new(q(), b"x".to_vec()).limit_key(key.clone()))
                .collect(),
        ))
        .await
        .unwrap();
    let mut peers = Vec::new();
    for _ in 0..8 {
        peers.push(ctx.peer().await);
    }
    let held = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut watcher_conn = common::admin().await.unwrap();
    let watch = {
        let (schema, stop) = (ctx.schema.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut seen = 0;
            while !stop.load(Ordering::Relaxed) {
                seen = seen.max(running_of(&mut watcher_conn, &schema, "api").await);
            }
            seen
        })
    };
    let start = Arc::new(tokio::sync::Barrier::new(peers.len()));
    let mut joins = Vec::new();
    for (i, peer) in peers.into_iter().enumerate() {
        let (held, most, done, start) = (
            Arc::clone(&held),
            Arc::clone(&most),
            Arc::clone(&done),
            Arc::clone(&start),
        );
        joins.push(tokio::spawn(async move {
            start.wait().await;
            let deadline = Instant::now() + Duration::from_secs(60);
            while done.load(Ordering::SeqCst) < ITEMS && Instant::now() < deadline {
                let got = peer
                    .claim(ClaimParams::new(q(), owner(i), 2, LEASE))
                    .await
                    .unwrap();
                if got.is_empty() {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                // Counted after the claim committed and before the complete is sent:
                // never more than the store holds.
                let now_held = held.fetch_add(got.len(), Ordering::SeqCst) + got.len();
                most.fetch_max(now_held, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                held.fetch_sub(got.len(), Ordering::SeqCst);
                for l in got {
                    peer.complete_one(l.token).await.unwrap();
                    done.fetch_add(1, Ordering::SeqCst);
                }
            }
            peer.close().await;
        }));
    }
    for j in joins {
        j.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let seen = watch.await.unwrap();
    assert_eq!(done.load(Ordering::SeqCst), ITEMS, "every item ran");
    assert!(
        most.load(Ordering::SeqCst) <= LIMIT,
        "the claimers held {} at once",
        most.load(Ordering::SeqCst)
    );
    assert!(
        seen <= LIMIT as i64,
        "the watcher saw {seen} running at once"
    );
    assert!(seen >= 1, "the watcher saw the key run");
    ctx.finish().await;
}

/// What migrations 10 to 13 add goes, leaving a version-9 schema.
fn undo_limits(s: &str) -> String {
    format!(
        "DROP INDEX {s}.items_running_limit; DROP INDEX {s}.items_claim_key; \
         ALTER TABLE {s}.items DROP COLUMN limit_key, DROP COLUMN fairness_key, \
             DROP COLUMN weight, DROP COLUMN ftag, DROP COLUMN lq; \
         DROP TABLE {s}.queue_limits, {s}.queue_limit_keys, {s}.limit_starts, \
             {s}.limit_defers, {s}.fair_queues, {s}.fair_tenants; \
         DELETE FROM {s}.tenure_migrations WHERE version >= 10"
    )
}

/// A version-9 schema with items ready and running upgrades to the limits schema: the
/// index of running items by key is built concurrently ahead of migration 11, version
/// 9's insert goes on working after it, and a limit set after the upgrade counts the
/// item version 9 left running.
#[tokio::test]
async fn a_version_9_schema_with_items_upgrades_to_limits_and_its_running_items_count() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let s = ctx.schema.clone();
    ctx.store
        .enqueue(EnqueueParams::new(
            (0..4).map(|_| NewItem::new(q(), b"x".to_vec())).collect(),
        ))
        .await
        .unwrap();
    sqlx::raw_sql(&undo_limits(&s))
        .execute(&mut ctx.admin)
        .await
        .unwrap();
    // Version 9's claim on the version-9 schema.
    let running: i64 = sqlx::query_scalar(&format!(
        "WITH c AS (UPDATE {s}.items SET state = 'running', attempt = 1, owner = 'w9', \
             lease_expires_at = $1, lease = 1 \
         WHERE id = (SELECT id FROM {s}.items WHERE state = 'ready' ORDER BY seq LIMIT 1) \
         RETURNING 1) SELECT count(*) FROM c"
    ))
    .bind((ctx.clock.now() + LEASE).as_micros())
    .fetch_one(&mut ctx.admin)
    .await
    .unwrap();
    assert_eq!(running, 1, "one item running under version 9");

    ctx.store.migrate().await.unwrap();
    let versions: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT version FROM {s}.tenure_migrations ORDER BY version"
    ))
    .fetch_all(&mut ctx.admin)
    .await
    .unwrap();
    assert_eq!(
        versions,
        (1..=tenure_postgres::schema_version()).collect::<Vec<_>>()
    );
    let valid: bool = sqlx::query_scalar(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND c.relname = 'items_running_limit'",
    )
    .bind(&s)
    .fetch_one(&mut ctx.admin)
    .await
    .unwrap();
    assert!(
        valid,
        "the index of running items by key is built and valid"
    );

    // Version 9's insert, which names no column of migration 10, still works.
    sqlx::query(&format!(
        "INSERT INTO {s}.items (id, queue, payload, priority, run_at, state, head, attempt, \
             renewals, stalls, max_attempts, max_stalls, max_renewals, created_at, \
             updated_at, phash) \
         VALUES ($1, 'q', 'v9', 0, $2, 'ready', true, 0, 0, 0, 3, 3, 100, $2, $2, 0)"
    ))
    .bind(uuid::Uuid::now_v7())
    .bind(ctx.clock.now().as_micros())
    .execute(&mut ctx.admin)
    .await
    .unwrap();
    // A queue-wide limit of 2 counts the item version 9 left running.
    ctx.store
        .limits_set(LimitsParams::new(q(), QueueLimits::new().concurrency(2)))
        .await
        .unwrap();
    let got = ctx
        .store
        .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
        .await
        .unwrap();
    assert_eq!(
        got.len(),
        1,
        "one slot left beside version 9's running item"
    );
    for l in got {
        ctx.store.complete_one(l.token).await.unwrap();
    }
    // Without limits, the ordinary claim takes the rest.
    assert!(ctx.store.limits_clear(&q()).await.unwrap());
    let rest = ctx
        .store
        .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
        .await
        .unwrap();
    assert_eq!(
        rest.len(),
        3,
        "the ready items left, version 9's insert included"
    );
    ctx.finish().await;
}

/// A handle that just heard the schema has no limits, and trusts that for a moment,
/// still obeys a limit another handle set before its next claim: `limits_set` returns
/// only once that trust has run out.
#[tokio::test]
async fn a_limit_set_through_one_handle_binds_the_next_claim_of_another_that_saw_none() {
    let Some(ctx) = Ctx::new().await else { return };
    let peer = ctx.peer().await;
    let key = LimitKey::new("k").unwrap();
    ctx.store
        .enqueue(EnqueueParams::new(
            (0..5)
                .map(|_| NewItem::new(q(), b"x".to_vec()).limit_key(key.clone()))
                .collect(),
        ))
        .await
        .unwrap();
    let other = QueueName::new("other").unwrap();
    assert!(peer
        .claim(ClaimParams::new(other.clone(), owner(2), 1, LEASE))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        peer.limits_wait(std::slice::from_ref(&other))
            .await
            .unwrap(),
        None,
        "nothing waits on time without limits"
    );
    ctx.store
        .limits_set(LimitsParams::new(q(), QueueLimits::new().per_key(1)))
        .await
        .unwrap();
    let got = peer
        .claim(ClaimParams::new(q(), owner(2), 10, LEASE))
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "the peer's claim obeys the new limit");
    assert_eq!(
        peer.limits_wait(&[q()]).await.unwrap(),
        Some(LEASE),
        "the held-back items wait for the running lease's expiry"
    );
    peer.close().await;
    ctx.finish().await;
}

/// The payloads of `leases`, in claim order.
fn payloads(leases: &[Lease]) -> Vec<String> {
    leases
        .iter()
        .map(|l| String::from_utf8(l.item.payload.clone()).unwrap())
        .collect()
}

/// G16 with G8: a claim whose first round met only a saturated key's items reads the
/// next round key by key (`candidates_keys.sql`), and takes exactly what the walk of
/// `items_claim` would: the open keys' items and the unkeyed ones in claim order,
/// each key up to its limit. The items were enqueued before the queue had limits, so
/// the unkeyed one is seen only if `limits_set` marked it (`lq`).
#[tokio::test]
async fn a_claim_past_a_saturated_key_takes_the_other_items_in_order() {
    let Some(ctx) = Ctx::new().await else { return };
    let store = &ctx.store;
    let key = |k: &str| LimitKey::new(k).unwrap();
    let mut items: Vec<NewItem> = (0..150)
        .map(|_| NewItem::new(q(), b"hot".to_vec()).limit_key(key("hot")))
        .collect();
    items.push(NewItem::new(q(), b"c1".to_vec()).limit_key(key("cold1")));
    items.push(NewItem::new(q(), b"u1".to_vec()));
    items.push(NewItem::new(q(), b"c1b".to_vec()).limit_key(key("cold1")));
    items.push(NewItem::new(q(), b"c1c".to_vec()).limit_key(key("cold1")));
    items.push(NewItem::new(q(), b"c2".to_vec()).limit_key(key("cold2")));
    store.enqueue(EnqueueParams::new(items)).await.unwrap();
    store
        .limits_set(LimitsParams::new(q(), QueueLimits::new().per_key(2)))
        .await
        .unwrap();
    let claim = |n: u32| store.claim(ClaimParams::new(q(), owner(1), n, LEASE));
    let hot = claim(2).await.unwrap();
    assert_eq!(payloads(&hot), ["hot", "hot"]);
    let rest = claim(10).await.unwrap();
    assert_eq!(payloads(&rest), ["c1", "u1", "c1b", "c2"]);
    assert!(
        claim(10).await.unwrap().is_empty(),
        "every key is at its limit"
    );
    store.complete_one(hot[0].token).await.unwrap();
    assert_eq!(payloads(&claim(10).await.unwrap()), ["hot"]);
    store.complete_one(rest[0].token).await.unwrap();
    assert_eq!(payloads(&claim(10).await.unwrap()), ["c1c"]);
    ctx.finish().await;
}

/// G18: a claim of a fair queue reads the tagged heads in fair order from
/// `items_claim_fair`, and still serves a head without a tag (enqueued by a handle
/// that had not seen the queue turn fair), which counts as tag 1: once it is among the
/// queue's first heads in G8 order, it goes first.
#[tokio::test]
async fn an_untagged_head_of_a_fair_queue_is_served_as_the_oldest() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let tenant = |t: &str| FairnessKey::new(t).unwrap();
    let mut items = vec![NewItem::new(q(), b"late".to_vec())];
    items.extend((0..5).map(|_| NewItem::new(q(), b"a".to_vec()).fairness_key(tenant("a"))));
    items.push(NewItem::new(q(), b"b".to_vec()).fairness_key(tenant("b")));
    ctx.store.enqueue(EnqueueParams::new(items)).await.unwrap();
    sqlx::query(&format!(
        "UPDATE {}.items SET ftag = NULL WHERE payload = 'late'",
        ctx.schema
    ))
    .execute(&mut ctx.admin)
    .await
    .unwrap();
    let leases = ctx
        .store
        .claim(ClaimParams::new(q(), owner(1), 3, LEASE))
        .await
        .unwrap();
    assert_eq!(payloads(&leases), ["late", "a", "b"]);
    ctx.finish().await;
}
