use super::*;

fn acquire(s: &MemoryStore, who: &str, secs: u64) -> LeaderStatus {
    let p = LeaderParams::new(
        LeaderName::new("maint").unwrap(),
        owner(who),
        Duration::from_secs(secs),
    );
    run(s.leader_acquire(p)).unwrap()
}

fn resign(s: &MemoryStore, who: &str) -> bool {
    let p = LeaderParams::new(
        LeaderName::new("maint").unwrap(),
        owner(who),
        Duration::from_secs(10),
    );
    run(s.leader_resign(p)).unwrap()
}

fn term(st: &LeaderStatus) -> u64 {
    match st {
        LeaderStatus::Leader { term, .. } | LeaderStatus::Follower { term, .. } => *term,
    }
}

#[test]
fn one_holder_at_a_time_with_strictly_increasing_terms() {
    let (s, clock) = store();
    let a1 = acquire(&s, "a", 10);
    assert!(a1.is_leader());
    let b1 = acquire(&s, "b", 10);
    assert!(matches!(&b1, LeaderStatus::Follower { holder, .. } if *holder == owner("a")));
    assert_eq!(term(&b1), term(&a1));
    clock.advance(Duration::from_secs(5));
    let a2 = acquire(&s, "a", 10);
    assert_eq!(
        term(&a2),
        term(&a1),
        "the holder extends with the same term"
    );
    clock.advance(Duration::from_secs(10));
    let b2 = acquire(&s, "b", 10);
    assert!(b2.is_leader());
    assert!(term(&b2) > term(&a2));
    assert!(!acquire(&s, "a", 10).is_leader());
}

#[test]
fn resign_frees_the_lease_and_keeps_the_term() {
    let (s, clock) = store();
    let a = acquire(&s, "a", 10);
    assert!(!resign(&s, "b"), "only the holder resigns");
    assert!(resign(&s, "a"));
    assert!(!resign(&s, "a"), "resigned already");
    let b = acquire(&s, "b", 10);
    assert!(b.is_leader());
    assert!(term(&b) > term(&a));
    clock.advance(Duration::from_secs(10));
    assert!(!resign(&s, "b"), "an expired lease is not held");
    let a2 = acquire(&s, "a", 10);
    assert!(term(&a2) > term(&b));
}

#[test]
fn an_expired_holder_coming_back_gets_a_new_term() {
    let (s, clock) = store();
    let a1 = acquire(&s, "a", 10);
    clock.advance(Duration::from_secs(10));
    let a2 = acquire(&s, "a", 10);
    assert!(term(&a2) > term(&a1));
}

#[test]
fn an_unavailable_store_is_faulted_never_follower() {
    let (s, _) = store();
    s.set_available(false);
    let p = LeaderParams::new(
        LeaderName::new("maint").unwrap(),
        owner("a"),
        Duration::from_secs(10),
    );
    let e = run(s.leader_acquire(p)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable);
}
