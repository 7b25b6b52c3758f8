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

/// G16: a worker of another process that waits because every key of its queue is
/// saturated is woken by the finish that frees a slot, through the store's NOTIFY,
/// not at its poll interval. The handles that set the limit and enqueue do not
/// listen (they send no NOTIFY), so only the finish can end the wait.
#[tokio::test]
async fn a_finish_that_frees_a_limited_slot_wakes_another_process() {
    let Some(ctx) = Ctx::new().await else { return };
    let quiet = PgStore::connect(common::config(&ctx.schema, &ctx.clock).listen(false))
        .await
        .unwrap();
    let key = LimitKey::new("k").unwrap();
    quiet
        .limits_set(LimitsParams::new(q(), QueueLimits::new().per_key(1)))
        .await
        .unwrap();
    quiet
        .enqueue(EnqueueParams::new(vec![
            NewItem::new(q(), b"a".to_vec()).limit_key(key.clone()),
            NewItem::new(q(), b"b".to_vec()).limit_key(key),
        ]))
        .await
        .unwrap();
    // The finisher listens (it has a pump); its claim sends nothing.
    let finisher = ctx.peer().await;
    let held = finisher
        .claim_one(q(), owner(1), LEASE)
        .await
        .unwrap()
        .unwrap();
    let signal = ctx.store.wake_signal().unwrap();
    tokio::time::timeout(Duration::from_secs(10), signal.notified())
        .await
        .expect("the listener started");
    let _ = tokio::time::timeout(Duration::ZERO, signal.notified()).await;
    // The waiter finds the key saturated.
    assert!(ctx
        .store
        .claim_one(q(), owner(2), LEASE)
        .await
        .unwrap()
        .is_none());
    let _ = tokio::time::timeout(Duration::ZERO, signal.notified()).await;
    finisher.complete_one(held.token).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), signal.notified())
        .await
        .expect("the NOTIFY of the freed slot arrived");
    assert!(ctx
        .store
        .claim_one(q(), owner(2), LEASE)
        .await
        .unwrap()
        .is_some());
    finisher.close().await;
    quiet.close().await;
    ctx.finish().await;
}
