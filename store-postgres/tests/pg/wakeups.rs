use super::*;

#[tokio::test]
async fn an_enqueue_through_another_pool_wakes_a_listening_store() {
    let Some(ctx) = Ctx::new().await else { return };
    assert!(ctx.store.capabilities().cross_process_wakeups);
    let signal = ctx.store.wake_signal().unwrap();
    // The listener fires once when its LISTEN is in place.
    tokio::time::timeout(Duration::from_secs(10), signal.notified())
        .await
        .expect("the listener started");
    // notify() also stores one wake-up for the next wait: drop it, so only the
    // peer's NOTIFY can end the wait below.
    let _ = tokio::time::timeout(Duration::ZERO, signal.notified()).await;
    let peer = ctx.peer().await;
    peer.enqueue_one(NewItem::new(q(), b"x".to_vec()))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), signal.notified())
        .await
        .expect("the NOTIFY of the peer's enqueue arrived");
    peer.close().await;
    ctx.finish().await;
}

#[tokio::test]
async fn without_listen_there_are_no_cross_process_wakeups() {
    let Some(ctx) = Ctx::with(|c| c.listen(false)).await else {
        return;
    };
    assert!(!ctx.store.capabilities().cross_process_wakeups);
    assert!(
        ctx.store.wake_signal().is_some(),
        "the in-process signal remains"
    );
    ctx.finish().await;
}

#[tokio::test]
async fn without_statement_caching_every_operation_still_works() {
    let Some(ctx) = Ctx::with(|c| c.statement_cache(false).listen(false).max_connections(1)).await
    else {
        return;
    };
    for _ in 0..3 {
        ctx.store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap();
        let l = ctx
            .store
            .claim_one(q(), owner(1), LEASE)
            .await
            .unwrap()
            .unwrap();
        ctx.store.complete_one(l.token).await.unwrap();
    }
    // No named statement is left on the server (a proxy's shared server
    // connections would refuse a second one of the same name).
    let mut conn = ctx.store.pool().acquire().await.unwrap();
    let named: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_prepared_statements")
        .persistent(false)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(named, 0);
    drop(conn);
    ctx.finish().await;
}
