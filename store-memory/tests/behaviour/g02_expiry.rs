use super::*;

#[test]
fn an_expired_lease_is_reclaimed_with_the_next_attempt_and_a_stall() {
    let (s, clock) = store();
    enqueue(&s, vec![item("q")]);
    let first = claim(&s, "q", "a", 1).remove(0);
    clock.advance(LEASE - Duration::from_micros(1));
    assert!(claim(&s, "q", "b", 1).is_empty(), "not expired yet");
    clock.advance(Duration::from_micros(1));
    let second = claim(&s, "q", "b", 1).remove(0);
    assert_eq!(second.token.id, first.token.id);
    assert_eq!(second.token.attempt, first.token.attempt + 1);
    assert_eq!(second.item.stalls, 1);
    assert_eq!(second.owner, owner("b"));
}

#[test]
fn recover_expired_requeues_at_now_keeping_the_attempt() {
    let (s, clock) = store();
    let [id] = enqueue(&s, vec![item("q")])[..] else {
        panic!()
    };
    claim(&s, "q", "a", 1);
    clock.advance(LEASE);
    let r = run(s.recover_expired(RecoverParams::new(10))).unwrap();
    assert_eq!((r.requeued, r.dead), (1, 0));
    let it = run(s.item_get(id)).unwrap().unwrap();
    assert_eq!(
        (it.state, it.attempt, it.stalls, it.run_at),
        (ItemState::Ready, 1, 1, clock_now(&clock))
    );
    assert_eq!(it.owner, None);
}

#[test]
fn recover_expired_takes_the_oldest_expiries_first_up_to_its_limit() {
    let (s, clock) = store();
    let [a, b] = enqueue(&s, vec![item("q1"), item("q2")])[..] else {
        panic!()
    };
    claim(&s, "q2", "w", 1);
    clock.advance(Duration::from_secs(1));
    claim(&s, "q1", "w", 1);
    clock.advance(LEASE);
    let r = run(s.recover_expired(RecoverParams::new(1))).unwrap();
    assert_eq!(r.requeued, 1);
    assert_eq!(state(&s, b), Some(ItemState::Ready));
    assert_eq!(state(&s, a), Some(ItemState::Running));
}

fn clock_now(c: &tenure_core::ManualClock) -> tenure_core::Timestamp {
    use tenure_core::Clock;
    c.now()
}
