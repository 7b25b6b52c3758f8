use super::*;

/// Runs `call` until it succeeds, allowing a few Unavailable answers (and nothing
/// else) while the pool replaces connections that were killed.
async fn until_available<T, F, Fut>(mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let mut tries = 0;
    loop {
        match call().await {
            Ok(v) => return v,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
                tries += 1;
                assert!(tries <= 4, "the store did not recover: {e}");
            }
        }
    }
}

/// Every connection of the store is killed three times while four workers claim
/// and complete. Calls in the window answer Unavailable (nothing else), the same
/// store works again afterwards, and every item is finalized exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connections_answer_unavailable_and_no_item_is_lost_or_finalized_twice() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    // Only this store's connections carry this name.
    let store =
        PgStore::connect(common::config(&ctx.schema, &ctx.clock).application_name(&ctx.schema))
            .await
            .unwrap();
    let total = 2_000usize;
    let mut ids = Vec::new();
    for chunk in 0..4 {
        let items: Vec<NewItem> = (0..total / 4)
            .map(|i| NewItem::new(q(), format!("{chunk}-{i}").into_bytes()))
            .collect();
        ids.extend(items.iter().map(|it| it.id));
        store.enqueue(EnqueueParams::new(items)).await.unwrap();
    }
    let queue = q();
    let accepted: Arc<Mutex<HashMap<ItemId, u32>>> = Arc::default();
    let errors = Arc::new(Mutex::new(0u32));
    let done_count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let kills = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        let accepted = accepted.clone();
        let errors = errors.clone();
        let done_count = done_count.clone();
        workers.push(tokio::spawn(async move {
            let mut empty_since: Option<Instant> = None;
            loop {
                let leases = match store
                    .claim(ClaimParams::new(q(), owner(w), 10, LEASE))
                    .await
                {
                    Ok(l) => l,
                    Err(e) => {
                        assert!(e.is_retryable(), "claim answered {e}");
                        *errors.lock().unwrap() += 1;
                        continue;
                    }
                };
                if leases.is_empty() {
                    // Claims whose answer was lost stay running until their lease
                    // expires: the controller moves the clock on.
                    let since = *empty_since.get_or_insert_with(Instant::now);
                    if done_count.load(std::sync::atomic::Ordering::SeqCst) >= total
                        || since.elapsed() > Duration::from_secs(30)
                    {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                empty_since = None;
                let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
                match store.complete(CompleteParams::new(tokens.clone())).await {
                    Ok(out) => {
                        let mut acc = accepted.lock().unwrap();
                        for (t, o) in tokens.iter().zip(out) {
                            if o == TokenOutcome::Accepted {
                                *acc.entry(t.id).or_default() += 1;
                                done_count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            }
                        }
                    }
                    Err(e) => {
                        assert!(e.is_retryable(), "complete answered {e}");
                        *errors.lock().unwrap() += 1;
                    }
                }
            }
        }));
    }
    let kill_sql = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                    WHERE application_name = $1 AND pid <> pg_backend_pid()";
    let deadline = Instant::now() + Duration::from_secs(60);
    for at in [300usize, 800, 1300] {
        while done_count.load(std::sync::atomic::Ordering::SeqCst) < at {
            // A worker whose assertion failed has ended: fail now, not at CI's limit.
            assert!(
                !workers.iter().any(|w| w.is_finished()),
                "a worker stopped before the kills"
            );
            assert!(Instant::now() < deadline, "the workers made no progress");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let n: i64 = sqlx::query_scalar(kill_sql)
            .bind(&ctx.schema)
            .fetch_one(&mut ctx.admin)
            .await
            .unwrap();
        assert!(n > 0, "there were connections to kill");
        kills.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    // Orphaned claims (committed, answer lost) come back once their lease expires.
    let deadline = Instant::now() + Duration::from_secs(60);
    while done_count.load(std::sync::atomic::Ordering::SeqCst) < total {
        assert!(Instant::now() < deadline, "items were lost");
        // The controller's own calls may meet a killed connection too.
        let counts = until_available(|| store.queue_counts(&queue)).await;
        if counts.ready == 0 && counts.running > 0 {
            ctx.clock.advance(LEASE);
        }
        // A complete whose answer was lost removed its items: count them as done.
        let mut gone = 0;
        let acc = accepted.lock().unwrap().clone();
        for id in &ids {
            if !acc.contains_key(id) && until_available(|| store.item_get(*id)).await.is_none() {
                gone += 1;
            }
        }
        if acc.len() + gone == total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for w in workers {
        w.await.unwrap();
    }
    let acc = accepted.lock().unwrap().clone();
    assert!(acc.values().all(|n| *n == 1), "an item was finalized twice");
    for id in &ids {
        assert!(
            until_available(|| store.item_get(*id)).await.is_none(),
            "{id} is not finished"
        );
    }
    let counts = until_available(|| store.queue_counts(&queue)).await;
    assert_eq!(counts.pending() + counts.dead, 0);
    eprintln!(
        "calls answered Unavailable during the random kills: {}",
        *errors.lock().unwrap()
    );
    // Whether a random kill lands on a call in flight is chance: a connection
    // killed while idle in the pool is often replaced before anyone uses it. So
    // one kill is made certain to hit a call: an admin transaction holds the items
    // table, a claim waits on it, and the claim's own backend is terminated.
    let mut holder = common::admin().await.unwrap();
    sqlx::raw_sql(&format!(
        "BEGIN; LOCK TABLE {}.items IN ACCESS EXCLUSIVE MODE",
        ctx.schema
    ))
    .execute(&mut holder)
    .await
    .unwrap();
    let waiting = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .claim(ClaimParams::new(q(), owner(8), 10, LEASE))
                .await
        })
    };
    let blocked_sql = "SELECT count(*) FROM pg_stat_activity \
                       WHERE application_name = $1 AND wait_event_type = 'Lock'";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n: i64 = sqlx::query_scalar(blocked_sql)
            .bind(&ctx.schema)
            .fetch_one(&mut ctx.admin)
            .await
            .unwrap();
        if n > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the claim never waited on the lock"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let n: i64 = sqlx::query_scalar(kill_sql)
        .bind(&ctx.schema)
        .fetch_one(&mut ctx.admin)
        .await
        .unwrap();
    assert!(n > 0, "the waiting claim's connection was killed");
    let err = waiting
        .await
        .unwrap()
        .expect_err("a claim whose connection was killed cannot succeed");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.is_retryable());
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .unwrap();
    // The same store still works. Idle pooled connections killed a moment ago may
    // each answer one more Unavailable before the pool replaces them.
    let item = NewItem::new(q(), b"after".to_vec());
    let id = item.id;
    until_available(|| store.enqueue_one(item.clone())).await;
    let l = until_available(|| store.claim_one(q(), owner(9), LEASE))
        .await
        .expect("the item enqueued after the kills is claimable");
    assert_eq!(l.item.id, id);
    until_available(|| store.complete_one(l.token)).await;
    assert!(
        until_available(|| store.item_get(id)).await.is_none(),
        "the item finished"
    );
    store.close().await;
    ctx.finish().await;
}

#[tokio::test]
async fn a_closed_port_answers_unavailable_quickly_and_never_follower() {
    let store = PgStore::connect(
        PgConfig::new("postgres://postgres@127.0.0.1:1/test")
            .migrate_on_connect(false)
            .listen(false)
            .acquire_timeout(Duration::from_millis(500)),
    )
    .await
    .expect("construction is lazy");
    let started = Instant::now();
    let e = store.claim_one(q(), owner(1), LEASE).await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    let e = store
        .leader_acquire(LeaderParams::new(
            LeaderName::new("m").unwrap(),
            owner(1),
            LEASE,
        ))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let e = store.migrate().await.unwrap_err();
    assert!(e.is_retryable());
}
