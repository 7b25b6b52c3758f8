use super::*;

async fn head_flags(store: &SqliteStore) -> Vec<(Vec<u8>, i64)> {
    let conn = store.connection().unwrap();
    let mut stmt = conn
        .prepare("SELECT payload, head FROM tenure_items ORDER BY seq")
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows
}

#[tokio::test]
async fn only_the_first_unfinished_item_of_a_stream_is_marked_head_and_the_mark_moves_on() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let store = open(&db(&dir), &c).await;
    let s = StreamKey::new("order-1").unwrap();
    for p in [b"a", b"b", b"c"] {
        store
            .enqueue_one(NewItem::new(q(), p.to_vec()).stream(s.clone()))
            .await
            .unwrap();
    }
    store
        .enqueue_one(NewItem::new(q(), b"free".to_vec()))
        .await
        .unwrap();
    assert_eq!(
        head_flags(&store).await,
        vec![
            (b"a".to_vec(), 1),
            (b"b".to_vec(), 0),
            (b"c".to_vec(), 0),
            (b"free".to_vec(), 1)
        ]
    );
    let first = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
    assert_eq!(first.item.payload, b"a");
    store.complete_one(first.token).await.unwrap();
    assert_eq!(
        head_flags(&store).await,
        vec![
            (b"b".to_vec(), 1),
            (b"c".to_vec(), 0),
            (b"free".to_vec(), 1)
        ]
    );
}
