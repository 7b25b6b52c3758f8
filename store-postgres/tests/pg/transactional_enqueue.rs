use super::*;
use sqlx::Connection;

#[tokio::test]
async fn items_enqueued_in_a_committed_transaction_are_claimable() {
    let Some(ctx) = Ctx::new().await else { return };
    let mut conn = sqlx::PgConnection::connect(&common::url()).await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    let out = ctx
        .store
        .enqueue_in_tx(
            &mut tx,
            EnqueueParams::one(NewItem::new(q(), b"x".to_vec())),
        )
        .await
        .unwrap();
    assert!(
        ctx.store
            .claim_one(q(), owner(1), LEASE)
            .await
            .unwrap()
            .is_none(),
        "invisible before the commit"
    );
    tx.commit().await.unwrap();
    let l = ctx
        .store
        .claim_one(q(), owner(1), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(l.item.id, out[0].id);
    ctx.finish().await;
}

#[tokio::test]
async fn a_rolled_back_transaction_leaves_no_item_no_stream_count_and_no_dedup_key() {
    let Some(ctx) = Ctx::new().await else { return };
    let mut conn = sqlx::PgConnection::connect(&common::url()).await.unwrap();
    let key = DedupKey::new("order-1").unwrap();
    let stream = StreamKey::new("s").unwrap();
    let mut tx = conn.begin().await.unwrap();
    let out = ctx
        .store
        .enqueue_in_tx(
            &mut tx,
            EnqueueParams::one(
                NewItem::new(q(), b"x".to_vec())
                    .dedup_key(key.clone())
                    .stream(stream.clone()),
            ),
        )
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert!(ctx.store.item_get(out[0].id).await.unwrap().is_none());
    let again = ctx
        .store
        .enqueue_one(
            NewItem::new(q(), b"y".to_vec())
                .dedup_key(key)
                .stream(stream),
        )
        .await
        .unwrap();
    assert!(!again.duplicate, "the rolled-back key was never recorded");
    let l = ctx
        .store
        .claim_one(q(), owner(1), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(l.item.id, again.id, "the stream has no phantom head");
    ctx.finish().await;
}

#[tokio::test]
async fn a_failed_enqueue_leaves_the_callers_transaction_usable() {
    let Some(ctx) = Ctx::new().await else { return };
    let mut conn = sqlx::PgConnection::connect(&common::url()).await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    let first = NewItem::new(q(), b"a".to_vec());
    let id = first.id;
    ctx.store
        .enqueue_in_tx(&mut tx, EnqueueParams::one(first))
        .await
        .unwrap();
    // The same id again violates the primary key inside the savepoint.
    let dup = NewItem::new(q(), b"b".to_vec()).with_id(id);
    assert!(ctx
        .store
        .enqueue_in_tx(&mut tx, EnqueueParams::one(dup))
        .await
        .is_err());
    let n: i64 = sqlx::query_scalar("SELECT 1::int8")
        .fetch_one(&mut *tx)
        .await
        .expect("the transaction is still usable");
    assert_eq!(n, 1);
    tx.commit().await.unwrap();
    assert!(ctx.store.item_get(id).await.unwrap().is_some());
    ctx.finish().await;
}

#[tokio::test]
async fn fairness_keys_enqueued_in_the_callers_transaction_are_served_by_share() {
    let Some(ctx) = Ctx::new().await else { return };
    let (big, small) = (
        FairnessKey::new("big").unwrap(),
        FairnessKey::new("small").unwrap(),
    );
    let mut conn = sqlx::PgConnection::connect(&common::url()).await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    ctx.store
        .enqueue_in_tx(
            &mut tx,
            EnqueueParams::new(
                (0..5)
                    .map(|_| NewItem::new(q(), b"x".to_vec()).fairness_key(big.clone()))
                    .collect(),
            ),
        )
        .await
        .unwrap();
    let one = NewItem::new(q(), b"y".to_vec()).fairness_key(small);
    let small_id = one.id;
    ctx.store
        .enqueue_in_tx(&mut tx, EnqueueParams::one(one))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let got = ctx
        .store
        .claim(ClaimParams::new(q(), owner(1), 2, LEASE))
        .await
        .unwrap();
    assert!(
        got.iter().any(|l| l.item.id == small_id),
        "the small tenant is served within the first turn"
    );
    ctx.finish().await;
}

#[tokio::test]
async fn a_limit_key_enqueued_in_the_callers_transaction_is_kept_for_its_claims() {
    let Some(ctx) = Ctx::new().await else { return };
    ctx.store
        .limits_set(LimitsParams::new(q(), QueueLimits::new().per_key(1)))
        .await
        .unwrap();
    let key = LimitKey::new("customer-7").unwrap();
    let mut conn = sqlx::PgConnection::connect(&common::url()).await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    ctx.store
        .enqueue_in_tx(
            &mut tx,
            EnqueueParams::new(
                (0..3)
                    .map(|_| NewItem::new(q(), b"x".to_vec()).limit_key(key.clone()))
                    .collect(),
            ),
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let got = ctx
        .store
        .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "one running item of the key at a time");
    ctx.finish().await;
}
