use super::*;

#[tokio::test]
async fn the_stalled_error_written_by_sql_matches_the_state_machine() {
    let Some((store, mut admin, schema, clock)) = open(false).await else {
        return;
    };
    let it = store
        .enqueue_one(NewItem::new(q("q"), b"x".to_vec()).max_stalls(2))
        .await
        .unwrap();
    for _ in 0..2 {
        store.claim_one(q("q"), owner("w"), LEASE).await.unwrap();
        clock.advance(LEASE);
        store
            .recover_expired(tenure_core::RecoverParams::default())
            .await
            .unwrap();
    }
    let item = store.item_get(it.id).await.unwrap().unwrap();
    assert_eq!(item.state, tenure_core::ItemState::Dead);
    assert_eq!(item.last_error, Some(machine::stalled_error(2)));
    store.close().await;
    drop_schema(&mut admin, &schema).await;
}
