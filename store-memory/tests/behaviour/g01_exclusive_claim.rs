use super::*;

#[test]
fn a_claimed_item_is_not_claimed_again_through_another_handle() {
    let (s, _) = store();
    let peer = s.clone();
    let [id] = enqueue(&s, vec![item("q")])[..] else {
        panic!()
    };
    assert_eq!(ids(&claim(&s, "q", "a", 5)), vec![id]);
    assert!(claim(&peer, "q", "b", 5).is_empty());
    assert_eq!(state(&peer, id), Some(ItemState::Running));
}
