use super::*;

/// The overlap is forced: claimer A's claim is held open in a transaction while
/// claimer B's claim picks another item of the same scope (its NOT EXISTS cannot
/// see A's uncommitted running row) and blocks on the partial unique index. When
/// A commits, the index refuses B's row; B's call picks again, passes over the
/// busy scope and takes the other item instead, without failing.
#[tokio::test]
async fn a_claim_that_loses_the_race_to_the_scope_index_takes_other_items() {
    let Some((store, mut admin, schema, clock)) = open(false).await else {
        return;
    };
    let scope = ScopeKey::new("config-7").unwrap();
    // Different queues, so each claimer's pick sees its own item as the scope's
    // first eligible one.
    let a = store
        .enqueue_one(NewItem::new(q("qa"), b"a".to_vec()).scope(scope.clone()))
        .await
        .unwrap();
    let b = store
        .enqueue_one(NewItem::new(q("qb"), b"b".to_vec()).scope(scope.clone()))
        .await
        .unwrap();
    let c = store
        .enqueue_one(NewItem::new(q("qb"), b"c".to_vec()).scope(ScopeKey::new("other").unwrap()))
        .await
        .unwrap();
    let now = clock.now();

    // Claimer A: the store's own claim statement, held open in a transaction.
    let mut held = PgConnection::connect(&url()).await.unwrap();
    let mut tx = held.begin().await.unwrap();
    let params_a = ClaimParams::new(q("qa"), owner("a"), 10, LEASE);
    let run = store
        .claim_run(&mut *tx, &["qa".to_owned()], now, &params_a, true)
        .await
        .unwrap();
    let ClaimRun::Claimed(got_a) = run else {
        panic!("nothing expired here")
    };
    assert_eq!(got_a.len(), 1);
    assert_eq!(got_a[0].1.id, a.id);

    // Claimer B, through the store, in another task.
    let peer = store.clone();
    let claim_b = tokio::spawn(async move {
        peer.claim(ClaimParams::new(q("qb"), owner("b"), 10, LEASE))
            .await
    });
    // Wait until B is blocked on A's uncommitted index entry.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE application_name = $1 AND wait_event_type = 'Lock'",
        )
        .bind(&schema)
        .fetch_one(&mut admin)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "B never blocked on the index"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tx.commit().await.unwrap();

    let got_b = claim_b.await.unwrap().expect("B's call does not fail");
    assert_eq!(
        store.scope_races(),
        1,
        "B's first pick was refused by the index"
    );
    let ids: Vec<_> = got_b.iter().map(|l| l.item.id).collect();
    assert_eq!(
        ids,
        vec![c.id],
        "B passes over the busy scope and takes the other item"
    );
    let b_item = store.item_get(b.id).await.unwrap().unwrap();
    assert_eq!(b_item.state, tenure_core::ItemState::Ready);
    let a_item = store.item_get(a.id).await.unwrap().unwrap();
    assert_eq!(a_item.state, tenure_core::ItemState::Running);
    let max_running: i64 = sqlx::query_scalar(&format!(
        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM {schema}.items \
         WHERE state = 'running' AND scope IS NOT NULL GROUP BY scope) s"
    ))
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(max_running, 1, "no scope ever has two running items");
    store.close().await;
    drop_schema(&mut admin, &schema).await;
}

#[tokio::test]
async fn the_index_refuses_a_second_running_item_of_a_scope_whatever_writes_it() {
    let Some((store, mut admin, schema, _clock)) = open(false).await else {
        return;
    };
    let scope = ScopeKey::new("s").unwrap();
    let a = store
        .enqueue_one(NewItem::new(q("q"), b"a".to_vec()).scope(scope.clone()))
        .await
        .unwrap();
    let b = store
        .enqueue_one(NewItem::new(q("q"), b"b".to_vec()).scope(scope))
        .await
        .unwrap();
    let set_running = format!("UPDATE {schema}.items SET state = 'running' WHERE id = $1");
    sqlx::query(&set_running)
        .bind(a.id.as_uuid())
        .execute(&mut admin)
        .await
        .unwrap();
    let err = sqlx::query(&set_running)
        .bind(b.id.as_uuid())
        .execute(&mut admin)
        .await
        .unwrap_err();
    let (code, constraint) = crate::error::db_code(&err).unwrap();
    assert_eq!(code, "23505");
    assert_eq!(constraint.as_deref(), Some(crate::sql::SCOPE_INDEX));
    store.close().await;
    drop_schema(&mut admin, &schema).await;
}
