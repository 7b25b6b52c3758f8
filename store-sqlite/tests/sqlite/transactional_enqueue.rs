use super::*;

fn business(conn: &rusqlite::Connection) {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS payments (key TEXT PRIMARY KEY, amount INTEGER)",
    )
    .unwrap();
}

fn payments(conn: &rusqlite::Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM payments", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_committed_transaction_keeps_the_business_row_and_its_item() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let store = open(&db(&dir), &c).await;
    let mut conn = store.connection().unwrap();
    business(&conn);
    let key = DedupKey::new("pay-1").unwrap();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    tx.execute("INSERT INTO payments VALUES ('pay-1', 100)", [])
        .unwrap();
    let out = store
        .enqueue_in_tx(
            &tx,
            EnqueueParams::one(NewItem::new(q(), b"reconcile".to_vec()).dedup_key(key.clone())),
        )
        .unwrap();
    tx.commit().unwrap();
    store.notify_enqueued();
    assert_eq!(payments(&conn), 1);
    let item = store.item_get(out[0].id).await.unwrap().expect("committed");
    assert_eq!(item.payload, b"reconcile");
    let again = store
        .enqueue_one(NewItem::new(q(), b"again".to_vec()).dedup_key(key))
        .await
        .unwrap();
    assert!(again.duplicate, "the key was committed with the item");
    assert_eq!(again.id, out[0].id);
}

#[tokio::test]
async fn a_rolled_back_transaction_leaves_neither_row_nor_item_nor_dedup_key() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let store = open(&db(&dir), &c).await;
    let mut conn = store.connection().unwrap();
    business(&conn);
    let key = DedupKey::new("pay-2").unwrap();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    tx.execute("INSERT INTO payments VALUES ('pay-2', 100)", [])
        .unwrap();
    let out = store
        .enqueue_in_tx(
            &tx,
            EnqueueParams::one(NewItem::new(q(), b"reconcile".to_vec()).dedup_key(key.clone())),
        )
        .unwrap();
    tx.rollback().unwrap();
    assert_eq!(payments(&conn), 0);
    assert!(store.item_get(out[0].id).await.unwrap().is_none());
    assert_eq!(store.queue_counts(&q()).await.unwrap().pending(), 0);
    let later = store
        .enqueue_one(NewItem::new(q(), b"retry".to_vec()).dedup_key(key))
        .await
        .unwrap();
    assert!(!later.duplicate, "the rolled-back key was forgotten");
}

#[tokio::test]
async fn a_failing_enqueue_in_tx_writes_none_of_its_items_and_keeps_the_callers_rows() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let store = open(&db(&dir), &c).await;
    let taken = store
        .enqueue_one(NewItem::new(q(), b"x".to_vec()))
        .await
        .unwrap()
        .id;
    let mut conn = store.connection().unwrap();
    business(&conn);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    tx.execute("INSERT INTO payments VALUES ('pay-3', 1)", [])
        .unwrap();
    let e = store
        .enqueue_in_tx(
            &tx,
            EnqueueParams::new(vec![
                NewItem::new(q(), b"new".to_vec()),
                NewItem::new(q(), b"dup".to_vec()).with_id(taken),
            ]),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    let bad = store
        .enqueue_in_tx(&tx, EnqueueParams::new(vec![]))
        .unwrap_err();
    assert_eq!(bad.invalid_field(), Some("items"));
    tx.commit().unwrap();
    assert_eq!(payments(&conn), 1);
    assert_eq!(
        store.queue_counts(&q()).await.unwrap().ready,
        1,
        "only the earlier item"
    );
}

#[tokio::test]
async fn a_file_without_the_store_schema_is_a_schema_conflict() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let store = open(&db(&dir), &c).await;
    let other = dir.path().join("other.db");
    let mut conn = rusqlite::Connection::open(&other).unwrap();
    let tx = conn.transaction().unwrap();
    let e = store
        .enqueue_in_tx(&tx, EnqueueParams::one(NewItem::new(q(), b"x".to_vec())))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert!(e.to_string().contains("open a SqliteStore"), "{e}");
}
