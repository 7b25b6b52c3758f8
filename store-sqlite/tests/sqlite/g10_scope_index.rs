use super::*;

#[tokio::test]
async fn the_schema_refuses_a_second_running_item_of_one_scope_even_without_the_claim() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let c = clock();
    let store = open(&path, &c).await;
    let scope = ScopeKey::new("account-7").unwrap();
    for _ in 0..2 {
        store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()).scope(scope.clone()))
            .await
            .unwrap();
    }
    let conn = store.connection().unwrap();
    conn.execute(
        "UPDATE tenure_items SET state = 'running' WHERE seq = (SELECT min(seq) FROM tenure_items)",
        [],
    )
    .unwrap();
    let e = conn
        .execute(
            "UPDATE tenure_items SET state = 'running' WHERE seq = (SELECT max(seq) FROM tenure_items)",
            [],
        )
        .unwrap_err();
    assert!(e.to_string().contains("UNIQUE"), "{e}");
}

#[tokio::test]
async fn one_batch_takes_one_item_per_scope_and_the_next_unscoped_items() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let store = open(&db(&dir), &c).await;
    let a = ScopeKey::new("a").unwrap();
    let mut ids = Vec::new();
    for item in [
        NewItem::new(q(), b"1".to_vec()).scope(a.clone()),
        NewItem::new(q(), b"2".to_vec()).scope(a.clone()),
        NewItem::new(q(), b"3".to_vec()),
        NewItem::new(q(), b"4".to_vec()).scope(a.clone()),
    ] {
        ids.push(store.enqueue_one(item).await.unwrap().id);
    }
    let leases = store
        .claim(ClaimParams::new(q(), me(1), 10, LEASE))
        .await
        .unwrap();
    let got: Vec<_> = leases.iter().map(|l| l.item.id).collect();
    assert_eq!(got, vec![ids[0], ids[2]]);
}
