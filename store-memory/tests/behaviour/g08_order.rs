use super::*;

#[test]
fn claims_go_by_priority_then_run_at_then_enqueue_order_across_queues() {
    let (s, clock) = store();
    let t0 = start();
    let got = enqueue(
        &s,
        vec![
            item("b").run_at(t0 + Duration::from_secs(2)), // 0: p0, later
            item("a").run_at(t0 + Duration::from_secs(1)), // 1: p0, earlier
            item("a").priority(-1).run_at(t0 + Duration::from_secs(3)), // 2: p-1
            item("b").run_at(t0 + Duration::from_secs(1)), // 3: p0, earlier, enqueued after 1
            item("a").priority(5),                         // 4: p5
        ],
    );
    clock.advance(Duration::from_secs(3));
    let params = ClaimParams::new(q("a"), owner("w"), 10, LEASE).queues(vec![q("a"), q("b")]);
    let order = ids(&run(s.claim(params)).unwrap());
    assert_eq!(order, vec![got[2], got[1], got[3], got[0], got[4]]);
}

#[test]
fn a_claim_of_one_queue_leaves_other_queues_alone() {
    let (s, _) = store();
    let [_, b] = enqueue(&s, vec![item("a"), item("b")])[..] else {
        panic!()
    };
    claim(&s, "a", "w", 10);
    assert_eq!(state(&s, b), Some(ItemState::Ready));
    assert!(claim(&s, "nobody", "w", 10).is_empty());
}
