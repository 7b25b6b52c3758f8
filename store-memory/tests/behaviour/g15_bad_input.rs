use super::*;

#[test]
fn bad_params_name_the_field_and_write_nothing() {
    let (s, _) = store();
    let e = run(s.claim(ClaimParams::new(q("q"), owner("w"), 0, LEASE))).unwrap_err();
    assert_eq!(e.invalid_field(), Some("limit"));
    let big = tenure_memory::MemoryStore::with_limits(
        tenure_core::ManualClock::new(start()),
        tenure_core::Limits::default().with_max_payload_bytes(3),
    );
    let e = run(big.enqueue(EnqueueParams::new(vec![
        item("q"),
        tenure_core::NewItem::new(q("q"), vec![0; 4]),
    ])))
    .unwrap_err();
    assert_eq!(e.invalid_field(), Some("payload"));
    assert_eq!(run(big.queue_counts(&q("q"))).unwrap().ready, 0);
    assert_eq!(big.limits().max_payload_bytes, 3);
}

#[test]
fn an_id_that_already_exists_is_a_conflict_and_nothing_is_written() {
    let (s, _) = store();
    let [id] = enqueue(&s, vec![item("q")])[..] else {
        panic!()
    };
    let e = run(s.enqueue(EnqueueParams::new(vec![item("q"), item("q").with_id(id)]))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert_eq!(run(s.queue_counts(&q("q"))).unwrap().ready, 1);
}
