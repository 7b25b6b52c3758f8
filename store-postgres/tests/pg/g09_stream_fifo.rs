use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The handle that completes a stream head need not be the one that claimed it.
#[tokio::test]
async fn a_head_completed_through_another_pool_promotes_the_next_item() {
    let Some(ctx) = Ctx::new().await else { return };
    let stream = StreamKey::new("s").unwrap();
    let mut ids = Vec::new();
    for i in 0..3 {
        let it = NewItem::new(q(), vec![i]).stream(stream.clone());
        ids.push(ctx.store.enqueue_one(it).await.unwrap().id);
    }
    let plain = ctx
        .store
        .enqueue_one(NewItem::new(q(), b"plain".to_vec()))
        .await
        .unwrap()
        .id;
    let peer = ctx.peer().await;
    for expected in &ids {
        let leases = ctx
            .store
            .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
            .await
            .unwrap();
        let claimed: Vec<ItemId> = leases.iter().map(|l| l.item.id).collect();
        assert!(claimed.contains(expected), "{claimed:?}");
        assert_eq!(
            claimed.iter().filter(|id| ids.contains(id)).count(),
            1,
            "one item of the stream at a time"
        );
        let out = peer
            .complete(CompleteParams::new(
                leases.iter().map(|l| l.token).collect(),
            ))
            .await
            .unwrap();
        assert!(out.iter().all(|o| *o == TokenOutcome::Accepted));
    }
    assert!(ctx.store.item_get(plain).await.unwrap().is_none());
    peer.close().await;
    ctx.finish().await;
}

/// Waits until `n` of the store's connections (named after the schema) wait on a
/// lock.
async fn wait_for_lock_waiters(ctx: &mut Ctx, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE application_name = $1 AND wait_event_type = 'Lock'",
        )
        .bind(&ctx.schema)
        .fetch_one(&mut ctx.admin)
        .await
        .unwrap();
        if waiting >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{n} calls never queued on the lock"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The enqueue/promote race, forced in both orders: an admin transaction holds the
/// stream's row, so a complete of the running head and an enqueue of the next
/// item both queue on it (seen in pg_stat_activity, one after the other) before
/// it is let go. Whichever goes first, the new item ends up the stream's head: the
/// next claim takes it, and nothing else of the stream is claimable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_and_an_enqueue_queued_on_one_stream_row_leave_the_new_item_head() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    // Only this store's connections carry this name.
    let store =
        PgStore::connect(common::config(&ctx.schema, &ctx.clock).application_name(&ctx.schema))
            .await
            .unwrap();
    let stream = StreamKey::new("s").unwrap();
    let item = |n: &str| NewItem::new(q(), n.as_bytes().to_vec()).stream(stream.clone());
    let first = item("first");
    store.enqueue_one(first.clone()).await.unwrap();
    let mut running = store
        .claim_one(q(), owner(1), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(running.item.id, first.id);
    for complete_first in [true, false] {
        let mut holder = common::admin().await.unwrap();
        sqlx::raw_sql(&format!(
            "BEGIN; SELECT 1 FROM {}.streams WHERE stream = 's' FOR UPDATE",
            ctx.schema
        ))
        .execute(&mut holder)
        .await
        .unwrap();
        let next = item(if complete_first { "second" } else { "third" });
        let start_complete = {
            let (store, token) = (store.clone(), running.token);
            move || tokio::spawn(async move { store.complete_one(token).await })
        };
        let start_enqueue = {
            let (store, next) = (store.clone(), next.clone());
            move || tokio::spawn(async move { store.enqueue_one(next).await.map(|_| ()) })
        };
        // The first call queues on the row before the second is sent.
        let (complete, enqueue) = if complete_first {
            let complete = start_complete();
            wait_for_lock_waiters(&mut ctx, 1).await;
            let enqueue = start_enqueue();
            wait_for_lock_waiters(&mut ctx, 2).await;
            (complete, enqueue)
        } else {
            let enqueue = start_enqueue();
            wait_for_lock_waiters(&mut ctx, 1).await;
            let complete = start_complete();
            wait_for_lock_waiters(&mut ctx, 2).await;
            (complete, enqueue)
        };
        sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();
        complete.await.unwrap().unwrap();
        enqueue.await.unwrap().unwrap();
        let claimed = store
            .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
            .await
            .unwrap();
        let ids: Vec<ItemId> = claimed.iter().map(|l| l.item.id).collect();
        assert_eq!(
            ids,
            vec![next.id],
            "complete first: {complete_first}; the new item is the one head"
        );
        running = claimed.into_iter().next().unwrap();
    }
    store.complete_one(running.token).await.unwrap();
    let counts = store.queue_counts(&q()).await.unwrap();
    assert_eq!(counts.pending() + counts.dead, 0);
    store.close().await;
    ctx.finish().await;
}

/// A stress run beside the forced test below: producers enqueue into three streams
/// one item at a time while four claimers take and complete batches, so enqueues
/// and completes of one stream often overlap. Each stream is claimed exactly in
/// enqueue order, item k+1 only after item k's complete began, and no stream is
/// left without a head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueues_racing_completes_keep_each_stream_in_order_and_moving() {
    let Some(ctx) = Ctx::with(|c| c.max_connections(8)).await else {
        return;
    };
    const STREAMS: usize = 3;
    const PER: usize = 60;
    let total = STREAMS * PER;
    // (stream, index) -> started completing
    let completing: Arc<Mutex<Vec<Vec<bool>>>> =
        Arc::new(Mutex::new(vec![vec![false; PER]; STREAMS]));
    let claimed: Arc<Mutex<Vec<Vec<usize>>>> = Arc::new(Mutex::new(vec![vec![]; STREAMS]));
    let finished = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for s in 0..STREAMS {
        let store = ctx.store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..PER {
                let item = NewItem::new(q(), format!("{s}:{i}").into_bytes())
                    .stream(StreamKey::new(format!("s{s}")).unwrap());
                store.enqueue_one(item).await.unwrap();
                tokio::task::yield_now().await;
            }
        }));
    }
    for w in 0..4 {
        let store = ctx.store.clone();
        let completing = completing.clone();
        let claimed = claimed.clone();
        let finished = finished.clone();
        tasks.push(tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            while finished.load(Ordering::SeqCst) < total {
                assert!(Instant::now() < deadline, "a stream stopped moving");
                let leases = store
                    .claim(ClaimParams::new(q(), owner(w), 5, LEASE))
                    .await
                    .unwrap();
                if leases.is_empty() {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                }
                for l in &leases {
                    let text = String::from_utf8(l.item.payload.clone()).unwrap();
                    let (s, i) = text.split_once(':').unwrap();
                    let (s, i): (usize, usize) = (s.parse().unwrap(), i.parse().unwrap());
                    if i > 0 {
                        assert!(
                            completing.lock().unwrap()[s][i - 1],
                            "stream {s}: item {i} claimed before item {} was completed",
                            i - 1
                        );
                    }
                    claimed.lock().unwrap()[s].push(i);
                    completing.lock().unwrap()[s][i] = true;
                }
                let tokens = leases.iter().map(|l| l.token).collect();
                let out = store.complete(CompleteParams::new(tokens)).await.unwrap();
                assert!(out.iter().all(|o| *o == TokenOutcome::Accepted));
                finished.fetch_add(out.len(), Ordering::SeqCst);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let claimed = claimed.lock().unwrap().clone();
    for (s, order) in claimed.iter().enumerate() {
        assert_eq!(*order, (0..PER).collect::<Vec<_>>(), "stream {s}");
    }
    ctx.finish().await;
}
