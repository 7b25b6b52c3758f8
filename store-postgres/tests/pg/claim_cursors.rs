//! Claim cursors (migration 9): a claim scans from its queue's cursor, which no
//! committed ready head is below. Every case moves the cursor as far as it goes, then
//! writes rows below it in each way the store can (a smaller priority, an earlier
//! `run_at`, a stream's next item promoted with its old `run_at`, a release, a
//! requeue), and checks both the claim order (G8) and the invariant itself.
use super::*;
use sqlx::Connection;

/// Moves the cursor of `q` as far as it goes now.
async fn advance(ctx: &mut Ctx) {
    sqlx::query(&format!(
        "SELECT {}.tenure_cursor_advance($1, ARRAY['q'])",
        ctx.schema
    ))
    .bind(ctx.clock.now().as_micros())
    .execute(&mut ctx.admin)
    .await
    .unwrap();
}

/// The ready heads of `q` below its cursor: none, or a claim would miss them.
async fn below_cursor(ctx: &mut Ctx) -> i64 {
    sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.items i JOIN {s}.claim_cursors c ON c.queue = i.queue \
         WHERE i.queue = 'q' AND i.state = 'ready' AND i.head \
             AND (i.priority, i.run_at, i.seq) < (c.priority, c.run_at, c.seq)",
        s = ctx.schema
    ))
    .fetch_one(&mut ctx.admin)
    .await
    .unwrap()
}

async fn cursor(ctx: &mut Ctx) -> Option<(i16, i64, i64)> {
    sqlx::query_as(&format!(
        "SELECT priority, run_at, seq FROM {}.claim_cursors WHERE queue = 'q'",
        ctx.schema
    ))
    .fetch_optional(&mut ctx.admin)
    .await
    .unwrap()
}

async fn claim_ids(ctx: &Ctx, n: u32) -> Vec<Lease> {
    ctx.store
        .claim(ClaimParams::new(q(), owner(1), n, LEASE))
        .await
        .unwrap()
}

#[tokio::test]
async fn rows_written_below_a_moved_cursor_are_claimed_in_order() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let mut plain = Vec::new();
    for _ in 0..6 {
        let it = NewItem::new(q(), b"x".to_vec()).priority(5);
        plain.push(it.id);
        ctx.store.enqueue_one(it).await.unwrap();
    }
    for l in claim_ids(&ctx, 3).await {
        ctx.store.complete_one(l.token).await.unwrap();
    }
    advance(&mut ctx).await;
    let at = cursor(&mut ctx).await.expect("the cursor exists");
    assert_eq!(at.0, 5, "the cursor is on the fourth item");
    assert_eq!(below_cursor(&mut ctx).await, 0);

    // A smaller priority.
    let urgent = NewItem::new(q(), b"u".to_vec()).priority(1);
    ctx.store.enqueue_one(urgent.clone()).await.unwrap();
    assert_eq!(
        below_cursor(&mut ctx).await,
        0,
        "the enqueue lowered the cursor"
    );
    let got = claim_ids(&ctx, 1).await;
    assert_eq!(got[0].item.id, urgent.id, "G8: the smaller priority first");
    ctx.store.complete_one(got[0].token).await.unwrap();
    advance(&mut ctx).await;

    // An earlier run_at, and a stream whose next item is promoted with its old run_at.
    let ago = |s: u64| ctx.clock.now() - Duration::from_secs(s);
    let early = NewItem::new(q(), b"e".to_vec())
        .priority(5)
        .run_at(ago(3600));
    let st = StreamKey::new("s").unwrap();
    let (s1, s2) = (
        NewItem::new(q(), b"1".to_vec())
            .priority(5)
            .run_at(ago(7200))
            .stream(st.clone()),
        NewItem::new(q(), b"2".to_vec())
            .priority(5)
            .run_at(ago(7200))
            .stream(st.clone()),
    );
    for it in [&early, &s1, &s2] {
        ctx.store.enqueue_one(it.clone()).await.unwrap();
    }
    assert_eq!(below_cursor(&mut ctx).await, 0);
    let got = claim_ids(&ctx, 1).await;
    assert_eq!(got[0].item.id, s1.id, "the stream's head is the earliest");
    advance(&mut ctx).await;
    ctx.store.complete_one(got[0].token).await.unwrap();
    assert_eq!(
        below_cursor(&mut ctx).await,
        0,
        "the promote lowered the cursor"
    );
    let got = claim_ids(&ctx, 2).await;
    let ids: Vec<ItemId> = got.iter().map(|l| l.item.id).collect();
    assert_eq!(
        ids,
        vec![s2.id, early.id],
        "G8 by run_at, the promoted item first"
    );

    // A release and a dead item's requeue put rows back below a moved cursor.
    advance(&mut ctx).await;
    ctx.store.release_one(got[0].token).await.unwrap();
    ctx.store
        .fail_one(Failure::permanent(got[1].token, "boom"))
        .await
        .unwrap();
    ctx.store
        .dead_requeue(RequeueParams::new(vec![early.id]))
        .await
        .unwrap();
    assert_eq!(below_cursor(&mut ctx).await, 0);
    let got = claim_ids(&ctx, 10).await;
    let ids: Vec<ItemId> = got.iter().map(|l| l.item.id).collect();
    assert_eq!(ids.len(), 5, "{ids:?}");
    assert!(ids.contains(&s2.id), "the released item is claimed");
    assert!(ids.contains(&early.id), "the requeued item is claimed");
    for l in got {
        ctx.store.complete_one(l.token).await.unwrap();
    }
    // Nothing ready: the cursor moves to the clock, and the next enqueue is above it.
    advance(&mut ctx).await;
    let empty = cursor(&mut ctx).await.unwrap();
    assert_eq!(empty.1, ctx.clock.now().as_micros());
    ctx.clock.advance(Duration::from_secs(1));
    let next = NewItem::new(q(), b"n".to_vec()).priority(5);
    ctx.store.enqueue_one(next.clone()).await.unwrap();
    assert_eq!(
        cursor(&mut ctx).await.unwrap(),
        empty,
        "no cursor write on enqueue"
    );
    assert_eq!(claim_ids(&ctx, 1).await[0].item.id, next.id);
    ctx.finish().await;
}

/// An advance never moves past a row whose writer has not committed: while a
/// transaction that enqueued below the cursor is open, the advance does nothing, and
/// once it commits the row is claimed first.
#[tokio::test]
async fn an_advance_leaves_the_cursor_alone_while_a_writer_is_in_flight() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    for _ in 0..3 {
        ctx.store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()).priority(5))
            .await
            .unwrap();
    }
    let first = claim_ids(&ctx, 1).await;
    ctx.store.complete_one(first[0].token).await.unwrap();
    advance(&mut ctx).await;
    let before = cursor(&mut ctx).await.unwrap();
    let mut conn = sqlx::PgConnection::connect(&common::url()).await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    let urgent = NewItem::new(q(), b"u".to_vec()).priority(0);
    ctx.store
        .enqueue_in_tx(&mut tx, EnqueueParams::one(urgent.clone()))
        .await
        .unwrap();
    // Complete another so there is somewhere to move to, then try to move.
    let second = claim_ids(&ctx, 1).await;
    ctx.store.complete_one(second[0].token).await.unwrap();
    advance(&mut ctx).await;
    assert_eq!(
        cursor(&mut ctx).await.unwrap(),
        before,
        "the writer in flight holds the cursor where it is"
    );
    tx.commit().await.unwrap();
    assert_eq!(below_cursor(&mut ctx).await, 0);
    assert_eq!(claim_ids(&ctx, 1).await[0].item.id, urgent.id);
    ctx.finish().await;
}
