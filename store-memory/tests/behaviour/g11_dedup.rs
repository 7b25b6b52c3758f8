use super::*;

fn keyed(key: &str) -> tenure_core::NewItem {
    item("q").dedup_key(DedupKey::new(key).unwrap())
}

#[test]
fn a_key_seen_within_its_window_is_a_duplicate_even_within_one_call() {
    let (s, _) = store();
    let out = run(s.enqueue(EnqueueParams::new(vec![keyed("k"), keyed("k"), keyed("j")]))).unwrap();
    assert!(!out[0].duplicate && out[1].duplicate && !out[2].duplicate);
    assert_eq!(out[1].id, out[0].id);
    let again = run(s.enqueue_one(keyed("k"))).unwrap();
    assert_eq!((again.id, again.duplicate), (out[0].id, true));
    assert_eq!(run(s.queue_counts(&q("q"))).unwrap().ready, 2);
}

#[test]
fn the_key_is_free_again_after_its_window_and_purge_removes_it() {
    let (s, clock) = store();
    let first = run(s.enqueue_one(keyed("k").dedup_window(Duration::from_secs(10)))).unwrap();
    clock.advance(Duration::from_secs(9));
    assert!(run(s.enqueue_one(keyed("k"))).unwrap().duplicate);
    clock.advance(Duration::from_secs(1));
    let p = run(s.purge(PurgeParams::new(Duration::ZERO, 100))).unwrap();
    assert_eq!(p.dedup_keys, 1);
    let second = run(s.enqueue_one(keyed("k"))).unwrap();
    assert!(!second.duplicate);
    assert_ne!(second.id, first.id);
}

#[test]
fn an_expired_key_that_was_not_purged_is_recorded_anew() {
    let (s, clock) = store();
    run(s.enqueue_one(keyed("k").dedup_window(Duration::from_secs(10)))).unwrap();
    clock.advance(Duration::from_secs(10));
    let second = run(s.enqueue_one(keyed("k").dedup_window(Duration::from_secs(100)))).unwrap();
    assert!(!second.duplicate);
    clock.advance(Duration::from_secs(50));
    let p = run(s.purge(PurgeParams::new(Duration::ZERO, 100))).unwrap();
    assert_eq!(p.dedup_keys, 0, "the new record lasts its own window");
    assert!(run(s.enqueue_one(keyed("k"))).unwrap().duplicate);
}

#[test]
fn keys_are_per_queue_and_outlive_the_finished_item() {
    let (s, _) = store();
    let a = run(s.enqueue_one(keyed("k"))).unwrap();
    let t = claim(&s, "q", "w", 1).remove(0).token;
    run(s.complete_one(t)).unwrap();
    let again = run(s.enqueue_one(keyed("k"))).unwrap();
    assert_eq!((again.id, again.duplicate), (a.id, true));
    let other = run(s.enqueue_one(item("other").dedup_key(DedupKey::new("k").unwrap()))).unwrap();
    assert!(!other.duplicate);
}
