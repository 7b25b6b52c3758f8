use super::*;

#[test]
fn every_write_with_a_superseded_token_is_lease_lost_and_changes_nothing() {
    let (s, clock) = store();
    let [id] = enqueue(&s, vec![item("q")])[..] else {
        panic!()
    };
    let old = claim(&s, "q", "a", 1).remove(0).token;
    clock.advance(LEASE);
    let new = claim(&s, "q", "b", 1).remove(0).token;
    let before = run(s.item_get(id)).unwrap();
    assert_eq!(
        run(s.complete(CompleteParams::new(vec![old]))).unwrap(),
        vec![TokenOutcome::LeaseLost]
    );
    assert_eq!(
        run(s.release(ReleaseParams::new(vec![old]))).unwrap(),
        vec![TokenOutcome::LeaseLost]
    );
    assert_eq!(
        run(s.renew(RenewParams::new(vec![old], LEASE))).unwrap(),
        vec![RenewOutcome::LeaseLost]
    );
    assert!(matches!(
        run(s.fail_one(Failure::permanent(old, "late"))),
        Err(Error::LeaseLost { .. })
    ));
    assert_eq!(run(s.item_get(id)).unwrap(), before);
    run(s.complete_one(new)).unwrap();
}

#[test]
fn a_late_complete_of_an_expired_lease_nobody_recovered_is_accepted() {
    let (s, clock) = store();
    let [id] = enqueue(&s, vec![item("q")])[..] else {
        panic!()
    };
    let t = claim(&s, "q", "a", 1).remove(0).token;
    clock.advance(LEASE * 3);
    run(s.complete_one(t)).unwrap();
    assert_eq!(state(&s, id), None, "finished items are deleted by default");
}

#[test]
fn tokens_of_unknown_items_are_lease_lost() {
    let (s, _) = store();
    let t = tenure_core::LeaseToken::new(ItemId::new(), 1, tenure_core::LeaseId::mint());
    assert_eq!(
        run(s.complete(CompleteParams::new(vec![t]))).unwrap(),
        vec![TokenOutcome::LeaseLost]
    );
}

#[test]
fn a_batch_answers_per_token_in_order() {
    let (s, clock) = store();
    enqueue(&s, vec![item("q"), item("q")]);
    let l = claim(&s, "q", "a", 2);
    clock.advance(LEASE);
    run(s.recover_expired(RecoverParams::new(1))).unwrap(); // the first to expire
    let out = run(s.complete(CompleteParams::new(vec![l[0].token, l[1].token]))).unwrap();
    assert_eq!(
        out.iter().filter(|o| **o == TokenOutcome::Accepted).count(),
        1
    );
    assert_eq!(out.len(), 2);
}
