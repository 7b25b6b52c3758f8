use super::*;

#[test]
fn nothing_is_claimed_before_its_run_at() {
    let (s, clock) = store();
    let [late, soon] = enqueue(
        &s,
        vec![
            item("q").delay(Duration::from_secs(20)),
            item("q").run_at(start() + Duration::from_secs(10)),
        ],
    )[..] else {
        panic!()
    };
    assert!(claim(&s, "q", "w", 10).is_empty());
    let c = run(s.queue_counts(&q("q"))).unwrap();
    assert_eq!((c.ready, c.scheduled), (0, 2));
    clock.advance(Duration::from_secs(10));
    assert_eq!(ids(&claim(&s, "q", "w", 10)), vec![soon]);
    clock.advance(Duration::from_secs(10));
    assert_eq!(ids(&claim(&s, "q", "w", 10)), vec![late]);
}
