use super::*;

#[test]
fn an_unavailable_store_answers_unavailable_changes_nothing_and_recovers() {
    let (s, _) = store();
    let peer = s.clone();
    let [id] = enqueue(&s, vec![item("q")])[..] else {
        panic!()
    };
    s.set_available(false);
    let e = run(peer.claim(ClaimParams::new(q("q"), owner("w"), 1, LEASE))).unwrap_err();
    assert!(e.is_retryable());
    assert!(matches!(
        e,
        Error::Unavailable {
            store: "memory",
            ..
        }
    ));
    assert_eq!(
        run(s.enqueue_one(item("q"))).unwrap_err().kind(),
        ErrorKind::Unavailable
    );
    assert_eq!(
        run(s.item_get(id)).unwrap_err().kind(),
        ErrorKind::Unavailable
    );
    assert_eq!(
        run(s.instance_list()).unwrap_err().kind(),
        ErrorKind::Unavailable
    );
    s.set_available(true);
    assert_eq!(run(s.queue_counts(&q("q"))).unwrap().ready, 1);
    assert_eq!(ids(&claim(&peer, "q", "w", 5)), vec![id]);
}

#[test]
fn keep_done_keeps_finished_items_until_purge() {
    let clock = tenure_core::ManualClock::new(start());
    let s = MemoryStore::new(clock.clone()).keep_done(true);
    let [id] = enqueue(&s, vec![item("q")])[..] else {
        panic!()
    };
    let t = claim(&s, "q", "w", 1).remove(0).token;
    run(s.complete_one(t)).unwrap();
    assert_eq!(state(&s, id), Some(ItemState::Done));
    assert_eq!(run(s.queue_counts(&q("q"))).unwrap().done, 1);
    clock.advance(Duration::from_secs(59));
    let keep = PurgeParams::new(Duration::from_secs(60), 100);
    assert_eq!(run(s.purge(keep.clone())).unwrap().items, 0);
    clock.advance(Duration::from_secs(1));
    assert_eq!(run(s.purge(keep)).unwrap().items, 1);
    assert_eq!(state(&s, id), None);
}

#[test]
fn finished_items_are_deleted_at_once_by_default() {
    let (s, _) = store();
    let [id] = enqueue(&s, vec![item("q")])[..] else {
        panic!()
    };
    let t = claim(&s, "q", "w", 1).remove(0).token;
    run(s.complete_one(t)).unwrap();
    assert_eq!(state(&s, id), None);
    assert_eq!(run(s.queue_counts(&q("q"))).unwrap(), Default::default());
    assert_eq!(
        run(s.purge(PurgeParams::new(Duration::ZERO, 10)))
            .unwrap()
            .items,
        0
    );
}

#[test]
fn purge_deletes_at_most_its_limit_oldest_first() {
    let clock = tenure_core::ManualClock::new(start());
    let s = MemoryStore::new(clock.clone()).keep_done(true);
    let got = enqueue(&s, vec![item("q"), item("q"), item("q")]);
    for want in &got {
        let t = claim(&s, "q", "w", 1).remove(0).token;
        assert_eq!(t.id, *want);
        run(s.complete_one(t)).unwrap();
        clock.advance(Duration::from_secs(1));
    }
    let p = run(s.purge(PurgeParams::new(Duration::ZERO, 2))).unwrap();
    assert_eq!(p.items, 2);
    assert_eq!(state(&s, got[0]), None);
    assert_eq!(state(&s, got[2]), Some(ItemState::Done));
}

#[test]
fn clones_share_the_data_and_the_name_is_memory() {
    let (s, _) = store();
    let peer = s.clone();
    let [id] = enqueue(&s, vec![item("q")])[..] else {
        panic!()
    };
    assert!(run(peer.item_get(id)).unwrap().is_some());
    assert_eq!(s.name(), "memory");
    assert!(s.capabilities().partitioned_claiming);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_wake_signal_fires_after_an_enqueue_through_any_handle() {
    let (s, _) = store();
    let peer = s.clone();
    let signal = s.wake_signal().unwrap();
    let waiter = tokio::spawn(async move { signal.notified().await });
    tokio::task::yield_now().await;
    peer.enqueue_one(item("q")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .expect("the signal fired")
        .unwrap();
}
