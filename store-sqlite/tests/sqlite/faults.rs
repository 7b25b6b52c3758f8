use super::*;

#[tokio::test]
async fn a_write_lock_held_elsewhere_answers_unavailable_after_bounded_retries_then_recovers() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let c = clock();
    let store = SqliteStore::open(
        SqliteConfig::new(&path)
            .clock(c.clone())
            .busy_timeout(Duration::from_millis(20))
            .busy_retries(2),
    )
    .await
    .unwrap();
    let mut other = store.connection().unwrap();
    let tx = other
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    let started = std::time::Instant::now();
    let e = store
        .enqueue_one(NewItem::new(q(), b"x".to_vec()))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(e.is_retryable());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "retries are bounded"
    );
    tx.rollback().unwrap();
    store
        .enqueue_one(NewItem::new(q(), b"x".to_vec()))
        .await
        .unwrap();
    assert_eq!(store.queue_counts(&q()).await.unwrap().ready, 1);
}

#[tokio::test]
async fn a_file_taken_away_answers_unavailable_and_the_store_recovers_when_it_is_back() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let c = clock();
    let store = open(&path, &c).await;
    let id = store
        .enqueue_one(NewItem::new(q(), b"x".to_vec()))
        .await
        .unwrap()
        .id;
    let aside = dir.path().join("aside.db");
    std::fs::rename(&path, &aside).unwrap();
    let e = store.item_get(id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    let e = store.claim_one(q(), me(1), LEASE).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(!path.exists(), "a reconnect must not create an empty file");
    std::fs::rename(&aside, &path).unwrap();
    let item = store.item_get(id).await.unwrap().expect("the item is back");
    assert_eq!(item.state, ItemState::Ready);
    assert!(store.claim_one(q(), me(1), LEASE).await.unwrap().is_some());
}

/// Through the public API: twenty concurrent calls, one of which must fail whole,
/// while the others all commit. Whether they share writer batches is up to timing
/// here; the writer's unit tests force a batch and check the savepoint path itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_call_rolls_back_alone_while_the_calls_around_it_commit() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let store = open(&db(&dir), &c).await;
    let taken = store
        .enqueue_one(NewItem::new(q(), b"first".to_vec()))
        .await
        .unwrap()
        .id;
    let mut calls = Vec::new();
    for i in 0..20u32 {
        let store = store.clone();
        let item = if i == 10 {
            // Two items, the second reusing an existing id: the call must write
            // neither.
            vec![
                NewItem::new(q(), b"lost".to_vec()),
                NewItem::new(q(), b"dup".to_vec()).with_id(taken),
            ]
        } else {
            vec![NewItem::new(q(), i.to_le_bytes().to_vec())]
        };
        calls.push(tokio::spawn(async move {
            store.enqueue(EnqueueParams::new(item)).await
        }));
    }
    let mut failed = 0;
    for (i, call) in calls.into_iter().enumerate() {
        match call.await.unwrap() {
            Ok(_) => assert_ne!(i, 10),
            Err(e) => {
                assert_eq!(i, 10);
                assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
                failed += 1;
            }
        }
    }
    assert_eq!(failed, 1);
    assert_eq!(store.queue_counts(&q()).await.unwrap().ready, 20);
}
