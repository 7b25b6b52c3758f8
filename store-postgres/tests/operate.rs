//! PostgreSQL-specific behaviour of the operator's operations beyond the conformance
//! suite: an existing schema upgrades to them, a claim that is in flight when a pause
//! commits (forced by a held lock) keeps its lease while later claims take nothing,
//! and listings read through their index.
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used)]
mod common;

use std::time::{Duration, Instant};

use common::Ctx;
use tenure_core::*;

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
    assert_eq!(versions, vec![1, 2, 3, 4, 5, 6]);
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
