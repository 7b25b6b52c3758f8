use super::*;

#[test]
fn a_silent_instance_is_evicted_and_its_leases_released_with_a_stall() {
    let (s, clock) = store();
    let got = enqueue(&s, vec![item("q"), item("q"), item("q").max_stalls(1)]);
    run(s.instance_heartbeat(HeartbeatParams::new(owner("dead")))).unwrap();
    run(s.instance_heartbeat(HeartbeatParams::new(owner("alive")))).unwrap();
    let l = claim(&s, "q", "dead", 3);
    assert_eq!(l.len(), 3);
    clock.advance(Duration::from_secs(20));
    run(s.instance_heartbeat(HeartbeatParams::new(owner("alive")))).unwrap();
    clock.advance(Duration::from_secs(10));
    let ev = run(s.instance_evict_stale(EvictParams::default())).unwrap();
    assert_eq!(ev.instances, vec![owner("dead")]);
    assert_eq!(ev.released, 3);
    assert_eq!(state(&s, got[2]), Some(ItemState::Dead), "out of stalls");
    let out = run(s.complete(CompleteParams::new(l.iter().map(|l| l.token).collect()))).unwrap();
    assert!(out.iter().all(|o| *o == TokenOutcome::LeaseLost));
    let again = claim(&s, "q", "alive", 10);
    assert_eq!(ids(&again), vec![got[0], got[1]]);
    assert!(again
        .iter()
        .all(|l| l.item.stalls == 1 && l.token.attempt == 2));
    let list = run(s.instance_list()).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].id, owner("alive"));
}

#[test]
fn instances_are_listed_oldest_registration_first_and_heartbeats_move_last_seen() {
    let (s, clock) = store();
    for name in ["b", "a", "c"] {
        run(s.instance_heartbeat(HeartbeatParams::new(owner(name)))).unwrap();
        clock.advance(Duration::from_secs(1));
    }
    run(s.instance_heartbeat(HeartbeatParams::new(owner("b")))).unwrap();
    let list = run(s.instance_list()).unwrap();
    let names: Vec<_> = list.iter().map(|i| i.id.as_str().to_owned()).collect();
    assert_eq!(names, ["b", "a", "c"]);
    assert_eq!(list[0].started_at, start());
    assert_eq!(list[0].last_seen, start() + Duration::from_secs(3));
}

#[test]
fn an_instance_exactly_stale_after_old_is_evicted() {
    let (s, clock) = store();
    run(s.instance_heartbeat(HeartbeatParams::new(owner("a")))).unwrap();
    clock.advance(Duration::from_secs(30) - Duration::from_micros(1));
    let p = EvictParams::new(Duration::from_secs(30));
    assert!(run(s.instance_evict_stale(p.clone()))
        .unwrap()
        .instances
        .is_empty());
    clock.advance(Duration::from_micros(1));
    assert_eq!(run(s.instance_evict_stale(p)).unwrap().instances.len(), 1);
}
