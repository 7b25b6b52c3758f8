use super::*;

#[test]
fn renew_extends_until_the_cap_then_keeps_the_expiry() {
    let (s, clock) = store();
    enqueue(&s, vec![item("q").max_renewals(2)]);
    let l = claim(&s, "q", "a", 1).remove(0);
    let t = l.token;
    clock.advance(Duration::from_secs(10));
    let e1 = run(s.renew_one(t, LEASE)).unwrap();
    assert_eq!(e1, l.expires_at + Duration::from_secs(10));
    run(s.renew_one(t, LEASE)).unwrap();
    let third = run(s.renew(RenewParams::new(vec![t], LEASE))).unwrap();
    assert_eq!(third, vec![RenewOutcome::LimitReached { limit: 2 }]);
    let it = run(s.item_get(t.id)).unwrap().unwrap();
    assert_eq!(it.renewals, 2);
    assert_eq!(it.lease_expires_at, Some(e1));
}

#[test]
fn a_renewed_lease_is_not_recovered_at_its_old_expiry() {
    let (s, clock) = store();
    enqueue(&s, vec![item("q")]);
    let t = claim(&s, "q", "a", 1).remove(0).token;
    clock.advance(LEASE - Duration::from_secs(1));
    run(s.renew_one(t, LEASE)).unwrap();
    clock.advance(Duration::from_secs(2));
    let r = run(s.recover_expired(RecoverParams::new(10))).unwrap();
    assert_eq!(r.requeued, 0);
    assert!(claim(&s, "q", "b", 1).is_empty());
    clock.advance(LEASE);
    assert_eq!(claim(&s, "q", "b", 1).len(), 1);
}

#[test]
fn an_expired_lease_nobody_recovered_may_still_be_renewed() {
    let (s, clock) = store();
    enqueue(&s, vec![item("q")]);
    let t = claim(&s, "q", "a", 1).remove(0).token;
    clock.advance(LEASE * 2);
    run(s.renew_one(t, LEASE)).unwrap();
    assert!(claim(&s, "q", "b", 1).is_empty());
}
