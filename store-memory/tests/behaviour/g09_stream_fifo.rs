use super::*;

fn s_item(queue: &str, key: &str) -> tenure_core::NewItem {
    item(queue).stream(stream(key))
}

#[test]
fn a_batch_claim_takes_only_the_head_of_each_stream() {
    let (s, _) = store();
    let got = enqueue(
        &s,
        vec![
            s_item("q", "x"),
            s_item("q", "x"),
            s_item("q", "y"),
            item("q"),
        ],
    );
    assert_eq!(ids(&claim(&s, "q", "w", 10)), vec![got[0], got[2], got[3]]);
}

#[test]
fn the_head_moves_to_the_next_item_when_it_completes() {
    let (s, _) = store();
    let got = enqueue(
        &s,
        vec![s_item("q", "x"), s_item("q", "x"), s_item("q", "x")],
    );
    for &want in &got {
        let l = claim(&s, "q", "w", 10);
        assert_eq!(ids(&l), vec![want]);
        run(s.complete_one(l[0].token)).unwrap();
    }
    assert!(claim(&s, "q", "w", 10).is_empty());
}

#[test]
fn priority_does_not_overtake_within_a_stream() {
    let (s, _) = store();
    let got = enqueue(&s, vec![s_item("q", "x"), s_item("q", "x").priority(-5)]);
    assert_eq!(ids(&claim(&s, "q", "w", 10)), vec![got[0]]);
}

#[test]
fn a_waiting_retry_and_a_dead_head_block_the_stream_until_discarded() {
    let (s, clock) = store();
    let got = enqueue(&s, vec![s_item("q", "x").max_attempts(2), s_item("q", "x")]);
    let t = claim(&s, "q", "w", 10).remove(0).token;
    run(s.fail_one(Failure::retry_after(t, Duration::from_secs(5), "e"))).unwrap();
    assert!(claim(&s, "q", "w", 10).is_empty(), "waiting retry blocks");
    clock.advance(Duration::from_secs(5));
    let t = claim(&s, "q", "w", 10).remove(0).token;
    assert_eq!(t.id, got[0]);
    assert_eq!(
        run(s.fail_one(Failure::retry_after(t, Duration::from_secs(5), "e"))).unwrap(),
        FailOutcome::Dead
    );
    clock.advance(Duration::from_secs(10));
    assert!(claim(&s, "q", "w", 10).is_empty(), "dead head blocks");
    run(s.dead_discard(DiscardParams::new(vec![got[0]]))).unwrap();
    assert_eq!(ids(&claim(&s, "q", "w", 10)), vec![got[1]]);
}

#[test]
fn a_requeued_dead_head_is_claimed_before_the_rest_of_its_stream() {
    let (s, _) = store();
    let got = enqueue(&s, vec![s_item("q", "x"), s_item("q", "x")]);
    let t = claim(&s, "q", "w", 10).remove(0).token;
    run(s.fail_one(Failure::permanent(t, "e"))).unwrap();
    run(s.dead_requeue(RequeueParams::new(vec![got[0]]))).unwrap();
    assert_eq!(ids(&claim(&s, "q", "w", 10)), vec![got[0]]);
}

#[test]
fn a_stream_spans_queues() {
    let (s, _) = store();
    let got = enqueue(&s, vec![s_item("a", "x"), s_item("b", "x")]);
    assert!(claim(&s, "b", "w", 10).is_empty());
    let t = claim(&s, "a", "w", 10).remove(0).token;
    run(s.complete_one(t)).unwrap();
    assert_eq!(ids(&claim(&s, "b", "w", 10)), vec![got[1]]);
}

#[test]
fn a_scheduled_follower_waits_for_its_own_run_at_after_the_head_finishes() {
    let (s, clock) = store();
    let got = enqueue(
        &s,
        vec![
            s_item("q", "x"),
            s_item("q", "x").delay(Duration::from_secs(60)),
        ],
    );
    let t = claim(&s, "q", "w", 10).remove(0).token;
    run(s.complete_one(t)).unwrap();
    assert!(claim(&s, "q", "w", 10).is_empty());
    clock.advance(Duration::from_secs(60));
    assert_eq!(ids(&claim(&s, "q", "w", 10)), vec![got[1]]);
}
