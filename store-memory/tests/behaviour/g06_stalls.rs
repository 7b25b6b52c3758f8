use super::*;

#[test]
fn the_last_allowed_stall_makes_the_item_dead_as_stalled() {
    let (s, clock) = store();
    let [id] = enqueue(&s, vec![item("q").max_stalls(2)])[..] else {
        panic!()
    };
    claim(&s, "q", "a", 1);
    clock.advance(LEASE);
    claim(&s, "q", "b", 1);
    clock.advance(LEASE);
    assert!(
        claim(&s, "q", "c", 1).is_empty(),
        "the second stall is the last"
    );
    let it = run(s.item_get(id)).unwrap().unwrap();
    assert_eq!((it.state, it.stalls), (ItemState::Dead, 2));
    assert!(it.last_error.unwrap().starts_with(STALLED_ERROR_PREFIX));
}

#[test]
fn a_release_is_not_a_stall() {
    let (s, _) = store();
    enqueue(&s, vec![item("q").max_stalls(1)]);
    let t = claim(&s, "q", "a", 1).remove(0).token;
    run(s.release_one(t)).unwrap();
    let l = claim(&s, "q", "a", 1).remove(0);
    assert_eq!((l.item.stalls, l.token.attempt), (0, 2));
}
