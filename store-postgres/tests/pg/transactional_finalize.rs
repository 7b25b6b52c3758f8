//! complete / fail / release inside the application's transaction (seed 003's
//! ownership-verified finalize): one commit for the business row and the item.

use super::*;
use sqlx::{Connection, PgConnection};

async fn business(ctx: &Ctx) -> PgConnection {
    let mut conn = PgConnection::connect(&common::url()).await.unwrap();
    sqlx::raw_sql(&format!(
        "CREATE TABLE {}.payments (item uuid NOT NULL, attempt int4 NOT NULL)",
        ctx.schema
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    conn
}

async fn payments(ctx: &Ctx, conn: &mut PgConnection) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {}.payments", ctx.schema))
        .fetch_one(conn)
        .await
        .unwrap()
}

async fn pay(ctx: &Ctx, conn: &mut PgConnection, lease: &Lease) {
    sqlx::query(&format!(
        "INSERT INTO {}.payments VALUES ($1, $2)",
        ctx.schema
    ))
    .bind(lease.item.id.as_uuid())
    .bind(i32::try_from(lease.token.attempt).unwrap())
    .execute(conn)
    .await
    .unwrap();
}

/// One item claimed by `w1`, and a business connection.
async fn claimed(ctx: &Ctx) -> (PgConnection, Lease) {
    ctx.store
        .enqueue_one(NewItem::new(q(), b"pay".to_vec()))
        .await
        .unwrap();
    let lease = ctx
        .store
        .claim_one(q(), owner(1), LEASE)
        .await
        .unwrap()
        .unwrap();
    (business(ctx).await, lease)
}

#[tokio::test]
async fn a_committed_transaction_finishes_the_item_and_writes_the_business_row_together() {
    let Some(ctx) = Ctx::new().await else { return };
    let (mut conn, lease) = claimed(&ctx).await;
    let mut tx = conn.begin().await.unwrap();
    pay(&ctx, &mut tx, &lease).await;
    let answer = ctx
        .store
        .complete_in_tx(&mut tx, CompleteParams::new(vec![lease.token]))
        .await
        .unwrap();
    assert_eq!(answer, vec![TokenOutcome::Accepted]);
    let before = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
    assert_eq!(
        before.state,
        ItemState::Running,
        "invisible before the commit"
    );
    tx.commit().await.unwrap();
    assert_eq!(payments(&ctx, &mut conn).await, 1);
    assert!(ctx.store.item_get(lease.item.id).await.unwrap().is_none());
    assert_eq!(ctx.store.queue_counts(&q()).await.unwrap().pending(), 0);
    ctx.finish().await;
}

#[tokio::test]
async fn a_rolled_back_transaction_leaves_neither_and_the_item_running_under_its_lease() {
    let Some(ctx) = Ctx::new().await else { return };
    let (mut conn, lease) = claimed(&ctx).await;
    let mut tx = conn.begin().await.unwrap();
    pay(&ctx, &mut tx, &lease).await;
    let answer = ctx
        .store
        .complete_in_tx(&mut tx, CompleteParams::new(vec![lease.token]))
        .await
        .unwrap();
    assert_eq!(answer, vec![TokenOutcome::Accepted]);
    tx.rollback().await.unwrap();
    assert_eq!(payments(&ctx, &mut conn).await, 0);
    let it = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
    assert_eq!(
        (it.state, it.attempt, it.owner.as_ref(), it.lease_expires_at),
        (
            ItemState::Running,
            lease.token.attempt,
            Some(&owner(1)),
            Some(lease.expires_at)
        ),
        "still running under the same lease"
    );
    // The same worker retries with the same token while the lease lasts.
    let mut tx = conn.begin().await.unwrap();
    pay(&ctx, &mut tx, &lease).await;
    let answer = ctx
        .store
        .complete_in_tx(&mut tx, CompleteParams::new(vec![lease.token]))
        .await
        .unwrap();
    assert_eq!(answer, vec![TokenOutcome::Accepted]);
    tx.commit().await.unwrap();
    assert_eq!(payments(&ctx, &mut conn).await, 1);
    assert!(ctx.store.item_get(lease.item.id).await.unwrap().is_none());
    ctx.finish().await;
}

#[tokio::test]
async fn a_stale_token_inside_the_transaction_answers_lease_lost_and_the_rollback_leaves_the_business_table_unchanged(
) {
    let Some(ctx) = Ctx::new().await else { return };
    let (mut conn, stale) = claimed(&ctx).await;
    ctx.clock.advance(LEASE + Duration::from_secs(1));
    let peer = ctx.peer().await;
    let current = peer.claim_one(q(), owner(2), LEASE).await.unwrap().unwrap();
    assert_eq!(current.token.attempt, stale.token.attempt + 1);
    for op in ["complete", "fail", "release"] {
        let mut tx = conn.begin().await.unwrap();
        pay(&ctx, &mut tx, &stale).await;
        let lost = match op {
            "complete" => {
                ctx.store
                    .complete_in_tx(&mut tx, CompleteParams::new(vec![stale.token]))
                    .await
                    .unwrap()
                    == vec![TokenOutcome::LeaseLost]
            }
            "fail" => {
                ctx.store
                    .fail_in_tx(
                        &mut tx,
                        FailParams::one(Failure::permanent(stale.token, "declined")),
                    )
                    .await
                    .unwrap()
                    == vec![FailOutcome::LeaseLost]
            }
            _ => {
                ctx.store
                    .release_in_tx(&mut tx, ReleaseParams::new(vec![stale.token]))
                    .await
                    .unwrap()
                    == vec![TokenOutcome::LeaseLost]
            }
        };
        assert!(lost, "{op} with a stale token answers lease lost");
        tx.rollback().await.unwrap();
        assert_eq!(
            payments(&ctx, &mut conn).await,
            0,
            "{op}: the business table is unchanged"
        );
        let it = ctx.store.item_get(stale.item.id).await.unwrap().unwrap();
        assert_eq!(
            (it.state, it.attempt, it.owner.as_ref()),
            (ItemState::Running, current.token.attempt, Some(&owner(2))),
            "{op}: the current attempt is untouched"
        );
    }
    peer.complete_one(current.token).await.unwrap();
    peer.close().await;
    ctx.finish().await;
}

#[tokio::test]
async fn a_failure_and_a_release_commit_with_the_business_row() {
    let Some(ctx) = Ctx::new().await else { return };
    let (mut conn, lease) = claimed(&ctx).await;
    let mut tx = conn.begin().await.unwrap();
    pay(&ctx, &mut tx, &lease).await;
    let delay = Duration::from_secs(60);
    let answer = ctx
        .store
        .fail_in_tx(
            &mut tx,
            FailParams::one(Failure::retry_after(lease.token, delay, "gateway down")),
        )
        .await
        .unwrap();
    assert_eq!(
        answer,
        vec![FailOutcome::Retrying {
            run_at: ctx.clock.now() + delay
        }]
    );
    tx.commit().await.unwrap();
    let it = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
    assert_eq!(it.state, ItemState::Ready);
    assert_eq!(it.last_error.as_deref(), Some("gateway down"));
    assert_eq!(payments(&ctx, &mut conn).await, 1);

    ctx.clock.advance(delay);
    let again = ctx
        .store
        .claim_one(q(), owner(1), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.token.attempt, 2);
    let before = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
    let mut tx = conn.begin().await.unwrap();
    pay(&ctx, &mut tx, &again).await;
    let answer = ctx
        .store
        .release_in_tx(&mut tx, ReleaseParams::new(vec![again.token]))
        .await
        .unwrap();
    assert_eq!(answer, vec![TokenOutcome::Accepted]);
    tx.commit().await.unwrap();
    let it = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
    assert_eq!(it.state, ItemState::Ready);
    assert_eq!(
        it.max_attempts,
        before.max_attempts + 1,
        "a release spends no attempt"
    );
    assert_eq!(payments(&ctx, &mut conn).await, 2);
    ctx.finish().await;
}

#[tokio::test]
async fn while_the_transaction_is_open_no_peer_can_take_the_item_and_after_its_commit_there_is_nothing_to_take(
) {
    let Some(ctx) = Ctx::new().await else { return };
    let (mut conn, lease) = claimed(&ctx).await;
    let peer = ctx.peer().await;
    let mut tx = conn.begin().await.unwrap();
    pay(&ctx, &mut tx, &lease).await;
    let answer = ctx
        .store
        .complete_in_tx(&mut tx, CompleteParams::new(vec![lease.token]))
        .await
        .unwrap();
    assert_eq!(answer, vec![TokenOutcome::Accepted]);
    // The lease runs out before the commit; the answer still holds: the finished
    // row stays locked, and recovery and claims pass over locked rows.
    ctx.clock.advance(LEASE + Duration::from_secs(1));
    assert_eq!(
        peer.recover_expired(RecoverParams::new(100))
            .await
            .unwrap()
            .requeued,
        0
    );
    assert!(peer
        .claim_one(q(), owner(2), LEASE)
        .await
        .unwrap()
        .is_none());
    tx.commit().await.unwrap();
    assert!(peer
        .claim_one(q(), owner(2), LEASE)
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        peer.recover_expired(RecoverParams::new(100))
            .await
            .unwrap()
            .requeued,
        0
    );
    assert_eq!(payments(&ctx, &mut conn).await, 1);
    peer.close().await;
    ctx.finish().await;
}

#[tokio::test]
async fn completing_a_stream_head_in_a_transaction_promotes_the_next_item_at_the_commit() {
    let Some(ctx) = Ctx::new().await else { return };
    let s = StreamKey::new("order-7").unwrap();
    ctx.store
        .enqueue(EnqueueParams::new(vec![
            NewItem::new(q(), b"first".to_vec()).stream(s.clone()),
            NewItem::new(q(), b"second".to_vec()).stream(s),
        ]))
        .await
        .unwrap();
    let head = ctx
        .store
        .claim_one(q(), owner(1), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(head.item.payload, b"first");
    let mut conn = business(&ctx).await;
    let mut tx = conn.begin().await.unwrap();
    pay(&ctx, &mut tx, &head).await;
    ctx.store
        .complete_in_tx(&mut tx, CompleteParams::new(vec![head.token]))
        .await
        .unwrap();
    assert!(
        ctx.store
            .claim_one(q(), owner(1), LEASE)
            .await
            .unwrap()
            .is_none(),
        "the next item waits for the commit"
    );
    tx.commit().await.unwrap();
    let next = ctx
        .store
        .claim_one(q(), owner(1), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        next.item.payload, b"second",
        "G9 holds across the transaction"
    );
    ctx.finish().await;
}

#[tokio::test]
async fn bad_params_answer_invalid_input_and_leave_the_callers_transaction_usable() {
    let Some(ctx) = Ctx::new().await else { return };
    let (mut conn, lease) = claimed(&ctx).await;
    let mut tx = conn.begin().await.unwrap();
    pay(&ctx, &mut tx, &lease).await;
    let e = ctx
        .store
        .complete_in_tx(&mut tx, CompleteParams::new(vec![]))
        .await
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("tokens"), "{e}");
    let e = ctx
        .store
        .fail_in_tx(&mut tx, FailParams::new(vec![]))
        .await
        .unwrap_err();
    assert!(e.invalid_field().is_some(), "{e}");
    let e = ctx
        .store
        .release_in_tx(&mut tx, ReleaseParams::new(vec![]))
        .await
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("tokens"), "{e}");
    tx.commit().await.unwrap();
    assert_eq!(
        payments(&ctx, &mut conn).await,
        1,
        "the caller's own row is kept"
    );
    let it = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
    assert_eq!(it.state, ItemState::Running, "nothing written to the item");
    ctx.finish().await;
}

#[tokio::test]
async fn a_failing_finalize_leaves_the_callers_transaction_usable() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let (mut conn, lease) = claimed(&ctx).await;
    let mut tx = conn.begin().await.unwrap();
    pay(&ctx, &mut tx, &lease).await;
    sqlx::raw_sql("SET LOCAL lock_timeout = '50ms'")
        .execute(&mut *tx)
        .await
        .unwrap();
    // Another session holds the items table: the fenced statement fails inside
    // its savepoint.
    let mut blocker = ctx.admin.begin().await.unwrap();
    sqlx::raw_sql(&format!(
        "LOCK TABLE {}.items IN ACCESS EXCLUSIVE MODE",
        ctx.schema
    ))
    .execute(&mut *blocker)
    .await
    .unwrap();
    let e = ctx
        .store
        .complete_in_tx(&mut tx, CompleteParams::new(vec![lease.token]))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("lock"), "{e}");
    blocker.rollback().await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT 1::int8")
        .fetch_one(&mut *tx)
        .await
        .expect("the transaction is still usable");
    assert_eq!(n, 1);
    tx.commit().await.unwrap();
    assert_eq!(payments(&ctx, &mut conn).await, 1);
    let it = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
    assert_eq!(
        it.state,
        ItemState::Running,
        "the failed call changed nothing"
    );
    ctx.finish().await;
}

#[tokio::test]
#[allow(deprecated)]
async fn the_former_name_enqueue_with_still_enqueues_in_the_callers_transaction() {
    let Some(ctx) = Ctx::new().await else { return };
    let mut conn = PgConnection::connect(&common::url()).await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    let out = ctx
        .store
        .enqueue_with(
            &mut tx,
            EnqueueParams::one(NewItem::new(q(), b"x".to_vec())),
        )
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert!(ctx.store.item_get(out[0].id).await.unwrap().is_none());
    ctx.finish().await;
}
