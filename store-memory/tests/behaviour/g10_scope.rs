use super::*;

fn sc_item(queue: &str, key: &str) -> tenure_core::NewItem {
    item(queue).scope(scope(key))
}

#[test]
fn a_batch_claim_takes_one_item_per_scope_and_passes_over_the_rest() {
    let (s, _) = store();
    let got = enqueue(
        &s,
        vec![
            sc_item("q", "t1"),
            sc_item("q", "t1"),
            sc_item("q", "t2"),
            item("q"),
            sc_item("q", "t1"),
        ],
    );
    assert_eq!(ids(&claim(&s, "q", "w", 10)), vec![got[0], got[2], got[3]]);
    assert!(claim(&s, "q", "w", 10).is_empty());
}

#[test]
fn the_scope_frees_when_its_item_completes_fails_releases_or_expires() {
    let (s, clock) = store();
    let got = enqueue(&s, (0..5).map(|_| sc_item("q", "t")).collect::<Vec<_>>());
    let t = claim(&s, "q", "w", 10).remove(0).token;
    run(s.complete_one(t)).unwrap();
    let t = claim(&s, "q", "w", 10).remove(0).token;
    assert_eq!(t.id, got[1]);
    run(s.fail_one(Failure::retry_after(t, Duration::from_secs(100), "e"))).unwrap();
    let t = claim(&s, "q", "w", 10).remove(0).token;
    assert_eq!(t.id, got[2]);
    run(s.release_one(t)).unwrap();
    let t = claim(&s, "q", "w", 10).remove(0).token;
    assert_eq!(t.id, got[2], "a released item keeps its place");
    clock.advance(LEASE);
    let l = claim(&s, "q", "w", 10);
    // Recovery puts got[2] back at run_at = now, behind the older got[3].
    assert_eq!(ids(&l), vec![got[3]], "recovered, so the scope is free");
    assert_eq!(run(s.item_get(got[2])).unwrap().unwrap().stalls, 1);
}

#[test]
fn a_busy_scope_blocks_its_items_in_every_queue_and_unscoped_items_run() {
    let (s, _) = store();
    let got = enqueue(
        &s,
        vec![sc_item("a", "t"), sc_item("b", "t"), item("b"), item("b")],
    );
    claim(&s, "a", "w", 10);
    assert_eq!(ids(&claim(&s, "b", "w", 10)), vec![got[2], got[3]]);
}

#[test]
fn a_freed_scope_offers_its_best_item_of_each_queue() {
    let (s, _) = store();
    let got = enqueue(
        &s,
        vec![
            sc_item("a", "t"),
            sc_item("b", "t").priority(3),
            sc_item("b", "t").priority(1),
            sc_item("a", "t").priority(2),
        ],
    );
    let t = claim(&s, "a", "w", 10).remove(0).token;
    assert_eq!(t.id, got[0]);
    run(s.complete_one(t)).unwrap();
    let both = ClaimParams::new(q("a"), owner("w"), 10, LEASE).queues(vec![q("a"), q("b")]);
    assert_eq!(ids(&run(s.claim(both.clone())).unwrap()), vec![got[2]]);
    assert!(run(s.claim(both)).unwrap().is_empty());
}

#[test]
fn a_dead_item_does_not_hold_its_scope() {
    let (s, _) = store();
    let got = enqueue(&s, vec![sc_item("q", "t"), sc_item("q", "t")]);
    let t = claim(&s, "q", "w", 10).remove(0).token;
    run(s.fail_one(Failure::permanent(t, "e"))).unwrap();
    assert_eq!(ids(&claim(&s, "q", "w", 10)), vec![got[1]]);
}
