//! complete / fail / release inside the application's transaction (seed 003's
//! ownership-verified finalize): one commit for the business row and the item.

use super::*;
use tenure_core::{
    CompleteParams, FailOutcome, FailParams, Failure, Lease, ReleaseParams, TokenOutcome,
};

fn business(conn: &rusqlite::Connection) {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS payments (item BLOB NOT NULL, attempt INTEGER NOT NULL)",
    )
    .unwrap();
}

fn payments(conn: &rusqlite::Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM payments", [], |r| r.get(0))
        .unwrap()
}

fn pay(tx: &rusqlite::Transaction<'_>, lease: &Lease) {
    tx.execute(
        "INSERT INTO payments VALUES (?1, ?2)",
        rusqlite::params![&lease.item.id.as_bytes()[..], lease.token.attempt],
    )
    .unwrap();
}

fn immediate(conn: &mut rusqlite::Connection) -> rusqlite::Transaction<'_> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap()
}

/// A store with one item claimed by `w1`, and a business connection.
async fn claimed(dir: &TempDir, c: &ManualClock) -> (SqliteStore, rusqlite::Connection, Lease) {
    let store = open(&db(dir), c).await;
    store
        .enqueue_one(NewItem::new(q(), b"pay".to_vec()))
        .await
        .unwrap();
    let lease = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
    let conn = store.connection().unwrap();
    business(&conn);
    (store, conn, lease)
}

#[tokio::test]
async fn a_committed_transaction_finishes_the_item_and_writes_the_business_row_together() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let (store, mut conn, lease) = claimed(&dir, &c).await;
    let tx = immediate(&mut conn);
    pay(&tx, &lease);
    let answer = store
        .complete_in_tx(&tx, CompleteParams::new(vec![lease.token]))
        .unwrap();
    assert_eq!(answer, vec![TokenOutcome::Accepted]);
    tx.commit().unwrap();
    assert_eq!(payments(&conn), 1);
    assert!(
        store.item_get(lease.item.id).await.unwrap().is_none(),
        "finished"
    );
    assert_eq!(store.queue_counts(&q()).await.unwrap().pending(), 0);
}

#[tokio::test]
async fn a_rolled_back_transaction_leaves_neither_and_the_item_running_under_its_lease() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let (store, mut conn, lease) = claimed(&dir, &c).await;
    let tx = immediate(&mut conn);
    pay(&tx, &lease);
    let answer = store
        .complete_in_tx(&tx, CompleteParams::new(vec![lease.token]))
        .unwrap();
    assert_eq!(answer, vec![TokenOutcome::Accepted]);
    tx.rollback().unwrap();
    assert_eq!(payments(&conn), 0);
    let it = store.item_get(lease.item.id).await.unwrap().unwrap();
    assert_eq!(
        (it.state, it.attempt, it.owner.as_ref(), it.lease_expires_at),
        (
            ItemState::Running,
            lease.token.attempt,
            Some(&me(1)),
            Some(lease.expires_at)
        ),
        "still running under the same lease"
    );
    // The same worker retries with the same token while the lease lasts.
    let tx = immediate(&mut conn);
    pay(&tx, &lease);
    let answer = store
        .complete_in_tx(&tx, CompleteParams::new(vec![lease.token]))
        .unwrap();
    assert_eq!(answer, vec![TokenOutcome::Accepted]);
    tx.commit().unwrap();
    assert_eq!(payments(&conn), 1);
    assert!(store.item_get(lease.item.id).await.unwrap().is_none());
}

#[tokio::test]
async fn a_stale_token_inside_the_transaction_answers_lease_lost_and_the_rollback_leaves_the_business_table_unchanged(
) {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let (store, mut conn, stale) = claimed(&dir, &c).await;
    // The lease expires and a peer re-claims the item: attempt 2.
    c.advance(LEASE + Duration::from_secs(1));
    let peer = open(&db(&dir), &c).await;
    let current = peer.claim_one(q(), me(2), LEASE).await.unwrap().unwrap();
    assert_eq!(current.token.attempt, stale.token.attempt + 1);
    for op in ["complete", "fail", "release"] {
        let tx = immediate(&mut conn);
        pay(&tx, &stale);
        let lost = match op {
            "complete" => {
                store
                    .complete_in_tx(&tx, CompleteParams::new(vec![stale.token]))
                    .unwrap()
                    == vec![TokenOutcome::LeaseLost]
            }
            "fail" => {
                store
                    .fail_in_tx(
                        &tx,
                        FailParams::one(Failure::permanent(stale.token, "declined")),
                    )
                    .unwrap()
                    == vec![FailOutcome::LeaseLost]
            }
            _ => {
                store
                    .release_in_tx(&tx, ReleaseParams::new(vec![stale.token]))
                    .unwrap()
                    == vec![TokenOutcome::LeaseLost]
            }
        };
        assert!(lost, "{op} with a stale token answers lease lost");
        tx.rollback().unwrap();
        assert_eq!(payments(&conn), 0, "{op}: the business table is unchanged");
        let it = store.item_get(stale.item.id).await.unwrap().unwrap();
        assert_eq!(
            (it.state, it.attempt, it.owner.as_ref()),
            (ItemState::Running, current.token.attempt, Some(&me(2))),
            "{op}: the current attempt is untouched"
        );
    }
    peer.complete_one(current.token).await.unwrap();
}

#[tokio::test]
async fn a_failure_and_a_release_commit_with_the_business_row() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let (store, mut conn, lease) = claimed(&dir, &c).await;
    let tx = immediate(&mut conn);
    pay(&tx, &lease);
    let delay = Duration::from_secs(60);
    let answer = store
        .fail_in_tx(
            &tx,
            FailParams::one(Failure::retry_after(lease.token, delay, "gateway down")),
        )
        .unwrap();
    assert_eq!(
        answer,
        vec![FailOutcome::Retrying {
            run_at: tenure_core::Clock::now(&c) + delay
        }]
    );
    tx.commit().unwrap();
    let it = store.item_get(lease.item.id).await.unwrap().unwrap();
    assert_eq!(it.state, ItemState::Ready);
    assert_eq!(it.last_error.as_deref(), Some("gateway down"));
    assert_eq!(payments(&conn), 1);

    c.advance(delay);
    let again = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
    assert_eq!(again.token.attempt, 2);
    let before = store.item_get(lease.item.id).await.unwrap().unwrap();
    let tx = immediate(&mut conn);
    pay(&tx, &again);
    let answer = store
        .release_in_tx(&tx, ReleaseParams::new(vec![again.token]))
        .unwrap();
    assert_eq!(answer, vec![TokenOutcome::Accepted]);
    tx.commit().unwrap();
    let it = store.item_get(lease.item.id).await.unwrap().unwrap();
    assert_eq!(it.state, ItemState::Ready);
    assert_eq!(
        it.max_attempts,
        before.max_attempts + 1,
        "a release spends no attempt"
    );
    assert_eq!(payments(&conn), 2);
}

#[tokio::test]
async fn while_the_transaction_is_open_no_peer_can_take_the_item_and_after_its_commit_there_is_nothing_to_take(
) {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let (store, mut conn, lease) = claimed(&dir, &c).await;
    let peer = SqliteStore::open(
        SqliteConfig::new(db(&dir))
            .clock(c.clone())
            .busy_timeout(Duration::from_millis(1))
            .busy_retries(1),
    )
    .await
    .unwrap();
    let tx = immediate(&mut conn);
    pay(&tx, &lease);
    let answer = store
        .complete_in_tx(&tx, CompleteParams::new(vec![lease.token]))
        .unwrap();
    assert_eq!(answer, vec![TokenOutcome::Accepted]);
    // The lease runs out before the commit; the answer still holds.
    c.advance(LEASE + Duration::from_secs(1));
    let e = peer.claim_one(q(), me(2), LEASE).await.unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::Unavailable,
        "the write lock is held: {e}"
    );
    tx.commit().unwrap();
    assert!(peer.claim_one(q(), me(2), LEASE).await.unwrap().is_none());
    assert_eq!(payments(&conn), 1);
}

#[tokio::test]
async fn completing_a_stream_head_in_a_transaction_promotes_the_next_item_at_the_commit() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let store = open(&db(&dir), &c).await;
    let s = StreamKey::new("order-7").unwrap();
    store
        .enqueue(EnqueueParams::new(vec![
            NewItem::new(q(), b"first".to_vec()).stream(s.clone()),
            NewItem::new(q(), b"second".to_vec()).stream(s),
        ]))
        .await
        .unwrap();
    let head = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
    assert_eq!(head.item.payload, b"first");
    let mut conn = store.connection().unwrap();
    business(&conn);
    let tx = immediate(&mut conn);
    pay(&tx, &head);
    store
        .complete_in_tx(&tx, CompleteParams::new(vec![head.token]))
        .unwrap();
    tx.commit().unwrap();
    let next = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
    assert_eq!(
        next.item.payload, b"second",
        "G9 holds across the transaction"
    );
}

#[tokio::test]
async fn bad_params_answer_invalid_input_and_leave_the_callers_transaction_as_it_was() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let (store, mut conn, lease) = claimed(&dir, &c).await;
    let tx = immediate(&mut conn);
    pay(&tx, &lease);
    let e = store
        .complete_in_tx(&tx, CompleteParams::new(vec![]))
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("tokens"), "{e}");
    let e = store.fail_in_tx(&tx, FailParams::new(vec![])).unwrap_err();
    assert!(e.invalid_field().is_some(), "{e}");
    let e = store
        .release_in_tx(&tx, ReleaseParams::new(vec![]))
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("tokens"), "{e}");
    tx.commit().unwrap();
    assert_eq!(payments(&conn), 1, "the caller's own row is kept");
    let it = store.item_get(lease.item.id).await.unwrap().unwrap();
    assert_eq!(it.state, ItemState::Running, "nothing written to the item");
}

#[tokio::test]
async fn a_file_without_the_store_schema_is_a_schema_conflict() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let (store, _conn, lease) = claimed(&dir, &c).await;
    let mut other = rusqlite::Connection::open(dir.path().join("other.db")).unwrap();
    let tx = other.transaction().unwrap();
    let e = store
        .complete_in_tx(&tx, CompleteParams::new(vec![lease.token]))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
}
