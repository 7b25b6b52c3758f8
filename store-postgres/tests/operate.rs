//! PostgreSQL-specific behaviour of the operator's operations beyond the conformance
//! suite: an existing schema upgrades to them, a claim that is in flight when a pause
//! commits (forced by a held lock) keeps its lease while later claims take nothing,
//! and listings read through their index.
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use sqlx::Connection;
use tenure_core::*;
use tenure_postgres::PgStore;
use tenure_test_support::postgres::{self as common, Ctx};

const LEASE: Duration = Duration::from_secs(30);

fn q() -> QueueName {
    QueueName::new("q").unwrap()
}

#[tokio::test]
async fn a_version_3_schema_upgrades_and_lists_pauses_and_cancels_its_items() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let mut ids = Vec::new();
    for i in 0..3u8 {
        ids.push(
            ctx.store
                .enqueue_one(NewItem::new(q(), vec![i]))
                .await
                .unwrap()
                .id,
        );
    }
    // Back to version 3: no listing index, no paused queues.
    sqlx::raw_sql(&format!(
        "DROP INDEX {s}.items_list; DROP TABLE {s}.paused_queues; \
         DELETE FROM {s}.tenure_migrations WHERE version = 4",
        s = ctx.schema
    ))
    .execute(&mut ctx.admin)
    .await
    .unwrap();
    ctx.store.migrate().await.unwrap();
    let versions: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT version FROM {}.tenure_migrations ORDER BY version",
        ctx.schema
    ))
    .fetch_all(&mut ctx.admin)
    .await
    .unwrap();
    assert_eq!(
        versions,
        (1..=tenure_postgres::schema_version()).collect::<Vec<_>>()
    );
    let page = ctx
        .store
        .item_list(ItemListParams::new(q(), ListState::Ready))
        .await
        .unwrap();
    assert_eq!(page.items.iter().map(|i| i.id).collect::<Vec<_>>(), ids);
    assert!(ctx.store.queue_pause(PauseParams::new(q())).await.unwrap());
    let me = OwnerId::new("w").unwrap();
    assert!(ctx.store.claim_one(q(), me, LEASE).await.unwrap().is_none());
    ctx.store.cancel_one(ids[0]).await.unwrap();
    assert_eq!(ctx.store.queue_counts(&q()).await.unwrap().ready, 2);
    ctx.finish().await;
}

/// Waits until a backend of this schema's statements waits for a lock (the claim),
/// failing after ten seconds.
async fn until_a_claim_waits(admin: &mut sqlx::PgConnection, schema: &str) {
    let start = Instant::now();
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND position($1 in query) > 0",
        )
        .bind(format!("{schema}.items"))
        .fetch_one(&mut *admin)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the claim never waited"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The race is forced, not timed: a transaction holds item B of scope k as running,
/// uncommitted, so a claim that picked A (also of scope k) waits on the scope's unique
/// index in the middle of its statement. The pause commits while it waits. The claim
/// then takes A (it started before the pause): its claimer is told so, the item is
/// its, and its lease runs on; every claim that starts after the pause takes nothing.
#[tokio::test]
async fn a_claim_in_flight_when_a_pause_commits_keeps_its_lease_and_later_claims_take_nothing() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let k = ScopeKey::new("k").unwrap();
    let a = ctx
        .store
        .enqueue_one(NewItem::new(q(), b"a".to_vec()).scope(k.clone()))
        .await
        .unwrap()
        .id;
    let b = ctx
        .store
        .enqueue_one(NewItem::new(q(), b"b".to_vec()).scope(k))
        .await
        .unwrap()
        .id;
    let loose = ctx
        .store
        .enqueue_one(NewItem::new(q(), b"c".to_vec()))
        .await
        .unwrap()
        .id;
    let mut blocker = common::admin().await.unwrap();
    sqlx::raw_sql(&format!(
        "BEGIN; UPDATE {}.items SET state = 'running', owner = 'blocker', \
         lease_expires_at = 0, attempt = attempt + 1 WHERE id = '{b}'",
        ctx.schema
    ))
    .execute(&mut blocker)
    .await
    .unwrap();
    let racer = ctx.peer().await;
    let early = OwnerId::new("early").unwrap();
    let claim = tokio::spawn({
        let early = early.clone();
        async move { racer.claim(ClaimParams::new(q(), early, 1, LEASE)).await }
    });
    until_a_claim_waits(&mut ctx.admin, &ctx.schema).await;
    assert!(ctx.store.queue_pause(PauseParams::new(q())).await.unwrap());
    let late = OwnerId::new("late").unwrap();
    let during = ctx
        .store
        .claim(ClaimParams::new(q(), late.clone(), 10, LEASE))
        .await
        .unwrap();
    assert!(during.is_empty(), "a claim after the pause took {during:?}");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut blocker)
        .await
        .unwrap();
    let told = claim.await.unwrap().unwrap();
    let tokens: Vec<_> = told.iter().map(|l| l.token.item_attempt()).collect();
    assert_eq!(tokens, vec![(a, 1)], "the in-flight claim's answer");
    let it = ctx.store.item_get(a).await.unwrap().unwrap();
    assert_eq!((it.state, it.owner), (ItemState::Running, Some(early)));
    let after = ctx
        .store
        .claim(ClaimParams::new(q(), late, 10, LEASE))
        .await
        .unwrap();
    assert!(after.is_empty(), "a claim after the pause took {after:?}");
    for id in [b, loose] {
        assert_eq!(
            ctx.store.item_get(id).await.unwrap().unwrap().state,
            ItemState::Ready
        );
    }
    let counts = ctx.store.queue_counts(&q()).await.unwrap();
    assert_eq!((counts.running, counts.ready, counts.paused), (1, 2, true));
    ctx.store.complete_one(told[0].token).await.unwrap();
    ctx.finish().await;
}

#[tokio::test]
async fn listings_read_through_the_listing_index() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let s = &ctx.schema;
    for (what, sql) in [
        (
            "an item page",
            format!(
                "SELECT * FROM {s}.items i WHERE i.queue = 'q' AND i.state = 'dead' \
                 AND i.seq > 0 ORDER BY i.seq LIMIT 10"
            ),
        ),
        (
            "a lease page",
            format!(
                "SELECT * FROM {s}.items i WHERE i.queue = 'q' AND i.state = 'running' \
                 AND (i.lease_expires_at, i.seq) > (0, 0) ORDER BY i.lease_expires_at, i.seq LIMIT 10"
            ),
        ),
    ] {
        sqlx::raw_sql("SET enable_seqscan = off").execute(&mut ctx.admin).await.unwrap();
        let plan: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN {sql}"))
            .fetch_all(&mut ctx.admin)
            .await
            .unwrap();
        let plan = plan.join("\n");
        assert!(
            plan.contains("items_list") || plan.contains("items_running"),
            "{what} reads through an index:\n{plan}"
        );
        assert!(!plan.contains("LockRows"), "{what} takes no row lock:\n{plan}");
    }
    ctx.finish().await;
}

/// Takes a fresh schema back to version 3 (no listing index, no paused queues), as
/// an existing deployment before migration 4.
async fn back_to_version_3(ctx: &mut Ctx) {
    sqlx::raw_sql(&format!(
        "DROP INDEX {s}.items_list; DROP TABLE {s}.paused_queues; \
         DELETE FROM {s}.tenure_migrations WHERE version = 4",
        s = ctx.schema
    ))
    .execute(&mut ctx.admin)
    .await
    .unwrap();
}

/// `Some(valid)` for the listing index, `None` when it does not exist.
async fn listing_index(admin: &mut sqlx::PgConnection, schema: &str) -> Option<bool> {
    sqlx::query_scalar(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND c.relname = 'items_list'",
    )
    .bind(schema)
    .fetch_optional(admin)
    .await
    .unwrap()
}

async fn versions(admin: &mut sqlx::PgConnection, schema: &str) -> Vec<i32> {
    sqlx::query_scalar(&format!(
        "SELECT version FROM {schema}.tenure_migrations ORDER BY version"
    ))
    .fetch_all(admin)
    .await
    .unwrap()
}

/// Migration 4 on a table of 1,000,000 rows: its index is built concurrently, so the
/// claims and completes of the workers running meanwhile go on while it builds. A plain `CREATE INDEX` holds a lock that
/// blocks every write to the table until it is done: not one claim would finish while
/// the build runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_4_builds_its_index_on_a_million_rows_while_claims_go_on() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    back_to_version_3(&mut ctx).await;
    let s = ctx.schema.clone();
    // A million dead rows of another queue, with ascending ids (a cheap primary key).
    let started = Instant::now();
    sqlx::raw_sql(&format!(
        "INSERT INTO {s}.items (id, queue, payload, priority, run_at, state, head, \
             attempt, renewals, stalls, max_attempts, max_stalls, max_renewals, created_at, \
             updated_at) \
         SELECT lpad(to_hex(i), 32, '0')::uuid, 'bulk', '\\x00', 0, 0, 'dead', true, 1, 0, \
             0, 1, 1, 6, 0, 0 \
         FROM generate_series(1, 1000000) AS i; ANALYZE {s}.items"
    ))
    .execute(&mut ctx.admin)
    .await
    .unwrap();
    println!("1,000,000 rows inserted in {:?}", started.elapsed());
    let items: Vec<NewItem> = (0..2_000)
        .map(|_| NewItem::new(q(), b"x".to_vec()))
        .collect();
    ctx.store.enqueue(EnqueueParams::new(items)).await.unwrap();

    let migrator = PgStore::connect(common::config(&s, &ctx.clock).migrate_on_connect(false))
        .await
        .unwrap();
    let migration = tokio::spawn(async move {
        let t = Instant::now();
        migrator.migrate().await.map(|()| t.elapsed())
    });
    // The workers that run while a deploy migrates are the previous version's: their
    // claim (a SKIP LOCKED pick and update of a ready head) and fenced delete, on a
    // connection of their own.
    let mut worker = sqlx::PgConnection::connect(&common::url()).await.unwrap();
    let claim = format!(
        "UPDATE {s}.items SET state = 'running', attempt = attempt + 1 \
         WHERE id = (SELECT id FROM {s}.items WHERE queue = 'q' AND state = 'ready' AND head \
                     ORDER BY priority, run_at, seq LIMIT 1 FOR UPDATE SKIP LOCKED) \
         RETURNING id, attempt"
    );
    let complete = format!("DELETE FROM {s}.items WHERE id = $1 AND attempt = $2");
    // Claims that started and finished while the build was in progress.
    let building = "SELECT count(*) FROM pg_stat_progress_create_index \
                    WHERE relid = to_regclass($1)";
    let table = format!("{s}.items");
    let (mut during, mut seen_building) = (0u32, false);
    while !migration.is_finished() {
        let before: i64 = sqlx::query_scalar(building)
            .bind(&table)
            .fetch_one(&mut ctx.admin)
            .await
            .unwrap();
        let lease: Option<(uuid::Uuid, i32)> = sqlx::query_as(&claim)
            .fetch_optional(&mut worker)
            .await
            .unwrap();
        if let Some((id, attempt)) = lease {
            let done = sqlx::query(&complete)
                .bind(id)
                .bind(attempt)
                .execute(&mut worker)
                .await
                .unwrap();
            assert_eq!(done.rows_affected(), 1);
        }
        let after: i64 = sqlx::query_scalar(building)
            .bind(&table)
            .fetch_one(&mut ctx.admin)
            .await
            .unwrap();
        seen_building |= before > 0;
        if before > 0 && after > 0 && lease.is_some() {
            during += 1;
        }
    }
    let took = migration.await.unwrap().unwrap();
    println!(
        "migration 4 on 1,000,000 rows took {took:?}; {during} claims and completes \
         finished while its index was being built"
    );
    assert!(seen_building, "the index build was never seen in progress");
    assert!(
        during >= 3,
        "claims finished while the index was being built: {during}"
    );
    assert_eq!(listing_index(&mut ctx.admin, &s).await, Some(true));
    assert!(versions(&mut ctx.admin, &s).await.contains(&4));
    ctx.finish().await;
}

/// An INVALID index, as a concurrent build that was interrupted leaves behind, is
/// dropped and built again: a plain `IF NOT EXISTS` would keep it, unusable.
#[tokio::test]
async fn an_invalid_index_left_by_an_interrupted_build_is_built_again() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    back_to_version_3(&mut ctx).await;
    let s = ctx.schema.clone();
    // What a cancelled CREATE INDEX CONCURRENTLY leaves: the index, marked invalid.
    sqlx::raw_sql(&format!(
        "CREATE INDEX items_list ON {s}.items (queue, state, seq); \
         UPDATE pg_index SET indisvalid = false \
         WHERE indexrelid = '{s}.items_list'::regclass"
    ))
    .execute(&mut ctx.admin)
    .await
    .unwrap();
    assert_eq!(listing_index(&mut ctx.admin, &s).await, Some(false));
    ctx.store.migrate().await.unwrap();
    assert_eq!(
        listing_index(&mut ctx.admin, &s).await,
        Some(true),
        "the listing index is valid after the migration"
    );
    assert!(versions(&mut ctx.admin, &s).await.contains(&4));
    ctx.finish().await;
}
