use super::*;

#[test]
fn a_retryable_failure_waits_its_delay_and_keeps_the_attempt() {
    let (s, clock) = store();
    let [id] = enqueue(&s, vec![item("q")])[..] else {
        panic!()
    };
    let t = claim(&s, "q", "a", 1).remove(0).token;
    let d = Duration::from_secs(5);
    let out = run(s.fail_one(Failure::retry_after(t, d, "boom"))).unwrap();
    assert!(matches!(out, FailOutcome::Retrying { .. }));
    clock.advance(d - Duration::from_micros(1));
    assert!(claim(&s, "q", "a", 1).is_empty());
    clock.advance(Duration::from_micros(1));
    let again = claim(&s, "q", "a", 1).remove(0);
    assert_eq!(again.token.item_attempt(), (id, 2));
    assert_eq!(again.item.last_error.as_deref(), Some("boom"));
}

#[test]
fn the_last_attempt_and_a_permanent_failure_go_dead_keeping_the_error() {
    let (s, _) = store();
    let [a, b] = enqueue(&s, vec![item("q").max_attempts(1), item("q")])[..] else {
        panic!()
    };
    let l = claim(&s, "q", "w", 2);
    let fa = Failure::retry_after(l[0].token, Duration::from_secs(1), "a");
    let fb = Failure::permanent(l[1].token, "b");
    let out = run(s.fail(tenure_core::FailParams::new(vec![fa, fb]))).unwrap();
    assert_eq!(out, vec![FailOutcome::Dead, FailOutcome::Dead]);
    let ia = run(s.item_get(a)).unwrap().unwrap();
    assert_eq!(
        (ia.state, ia.last_error.as_deref()),
        (ItemState::Dead, Some("a"))
    );
    assert_eq!(state(&s, b), Some(ItemState::Dead));
    let c = run(s.queue_counts(&q("q"))).unwrap();
    assert_eq!((c.dead, c.ready, c.running), (2, 0, 0));
}

#[test]
fn requeue_grants_more_attempts_without_lowering_the_attempt() {
    let (s, _) = store();
    let [id] = enqueue(&s, vec![item("q").max_attempts(1)])[..] else {
        panic!()
    };
    let t = claim(&s, "q", "w", 1).remove(0).token;
    run(s.fail_one(Failure::permanent(t, "x"))).unwrap();
    let n = run(s.dead_requeue(RequeueParams::new(vec![id, id]).additional_attempts(3))).unwrap();
    assert_eq!(n, 1, "only the dead item counts, once");
    let l = claim(&s, "q", "w", 1).remove(0);
    assert_eq!((l.token.attempt, l.item.max_attempts), (2, 4));
    assert!(matches!(
        run(s.complete_one(t)),
        Err(Error::LeaseLost { .. })
    ));
}

#[test]
fn requeue_and_discard_leave_items_that_are_not_dead_alone() {
    let (s, _) = store();
    let [a, b] = enqueue(&s, vec![item("q"), item("q")])[..] else {
        panic!()
    };
    claim(&s, "q", "w", 1);
    assert_eq!(
        run(s.dead_requeue(RequeueParams::new(vec![a, b]))).unwrap(),
        0
    );
    assert_eq!(
        run(s.dead_discard(DiscardParams::new(vec![a, b]))).unwrap(),
        0
    );
    assert_eq!(state(&s, a), Some(ItemState::Running));
    assert_eq!(state(&s, b), Some(ItemState::Ready));
}

#[test]
fn discard_deletes_dead_items() {
    let (s, _) = store();
    let [id] = enqueue(&s, vec![item("q")])[..] else {
        panic!()
    };
    let t = claim(&s, "q", "w", 1).remove(0).token;
    run(s.fail_one(Failure::permanent(t, "x"))).unwrap();
    assert_eq!(
        run(s.dead_discard(DiscardParams::new(vec![id]))).unwrap(),
        1
    );
    assert_eq!(state(&s, id), None);
    assert_eq!(run(s.queue_counts(&q("q"))).unwrap().dead, 0);
}
