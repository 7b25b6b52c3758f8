//! One test per behaviour of the memory store, grouped by guarantee.
// Test helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use tenure_core::machine::STALLED_ERROR_PREFIX;
use tenure_core::{
    ClaimParams, CompleteParams, DedupKey, DiscardParams, EnqueueParams, Error, ErrorKind,
    EvictParams, FailOutcome, Failure, HeartbeatParams, ItemId, ItemState, LeaderName,
    LeaderParams, LeaderStatus, Lease, PurgeParams, RecoverParams, ReleaseParams, RenewOutcome,
    RenewParams, RequeueParams, Store, StoreExt, TokenOutcome,
};
use tenure_memory::MemoryStore;

fn enqueue(s: &MemoryStore, items: Vec<tenure_core::NewItem>) -> Vec<ItemId> {
    run(s.enqueue(EnqueueParams::new(items)))
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

fn claim(s: &MemoryStore, queue: &str, who: &str, limit: u32) -> Vec<Lease> {
    run(s.claim(ClaimParams::new(q(queue), owner(who), limit, LEASE))).unwrap()
}

fn ids(leases: &[Lease]) -> Vec<ItemId> {
    leases.iter().map(|l| l.token.id).collect()
}

fn state(s: &MemoryStore, id: ItemId) -> Option<ItemState> {
    run(s.item_get(id)).unwrap().map(|i| i.state)
}

mod g01_exclusive_claim {
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
}

mod g02_expiry {
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
}

mod g03_fenced_finalize {
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
}

mod g04_renewal_cap {
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
}

mod g05_retry {
    use super::*;

    #[test]
    fn a_retryable_failure_waits_its_delay_and_keeps_the_attempt() {
        let (s, clock) = store();
        let [id] = enqueue(&s, vec![item("q")])[..] else {
            panic!()
        };
        let t = claim(&s, "q", "a", 1).remove(0).token;
        let d = Duration::from_secs(5);
        let out = run(s.fail_one(Failure::retry_after(t, d, "boom"))).unwrap();
        assert!(matches!(out, FailOutcome::Retrying { .. }));
        clock.advance(d - Duration::from_micros(1));
        assert!(claim(&s, "q", "a", 1).is_empty());
        clock.advance(Duration::from_micros(1));
        let again = claim(&s, "q", "a", 1).remove(0);
        assert_eq!(again.token.item_attempt(), (id, 2));
        assert_eq!(again.item.last_error.as_deref(), Some("boom"));
    }

    #[test]
    fn the_last_attempt_and_a_permanent_failure_go_dead_keeping_the_error() {
        let (s, _) = store();
        let [a, b] = enqueue(&s, vec![item("q").max_attempts(1), item("q")])[..] else {
            panic!()
        };
        let l = claim(&s, "q", "w", 2);
        let fa = Failure::retry_after(l[0].token, Duration::from_secs(1), "a");
        let fb = Failure::permanent(l[1].token, "b");
        let out = run(s.fail(tenure_core::FailParams::new(vec![fa, fb]))).unwrap();
        assert_eq!(out, vec![FailOutcome::Dead, FailOutcome::Dead]);
        let ia = run(s.item_get(a)).unwrap().unwrap();
        assert_eq!(
            (ia.state, ia.last_error.as_deref()),
            (ItemState::Dead, Some("a"))
        );
        assert_eq!(state(&s, b), Some(ItemState::Dead));
        let c = run(s.queue_counts(&q("q"))).unwrap();
        assert_eq!((c.dead, c.ready, c.running), (2, 0, 0));
    }

    #[test]
    fn requeue_grants_more_attempts_without_lowering_the_attempt() {
        let (s, _) = store();
        let [id] = enqueue(&s, vec![item("q").max_attempts(1)])[..] else {
            panic!()
        };
        let t = claim(&s, "q", "w", 1).remove(0).token;
        run(s.fail_one(Failure::permanent(t, "x"))).unwrap();
        let n =
            run(s.dead_requeue(RequeueParams::new(vec![id, id]).additional_attempts(3))).unwrap();
        assert_eq!(n, 1, "only the dead item counts, once");
        let l = claim(&s, "q", "w", 1).remove(0);
        assert_eq!((l.token.attempt, l.item.max_attempts), (2, 4));
        assert!(matches!(
            run(s.complete_one(t)),
            Err(Error::LeaseLost { .. })
        ));
    }

    #[test]
    fn requeue_and_discard_leave_items_that_are_not_dead_alone() {
        let (s, _) = store();
        let [a, b] = enqueue(&s, vec![item("q"), item("q")])[..] else {
            panic!()
        };
        claim(&s, "q", "w", 1);
        assert_eq!(
            run(s.dead_requeue(RequeueParams::new(vec![a, b]))).unwrap(),
            0
        );
        assert_eq!(
            run(s.dead_discard(DiscardParams::new(vec![a, b]))).unwrap(),
            0
        );
        assert_eq!(state(&s, a), Some(ItemState::Running));
        assert_eq!(state(&s, b), Some(ItemState::Ready));
    }

    #[test]
    fn discard_deletes_dead_items() {
        let (s, _) = store();
        let [id] = enqueue(&s, vec![item("q")])[..] else {
            panic!()
        };
        let t = claim(&s, "q", "w", 1).remove(0).token;
        run(s.fail_one(Failure::permanent(t, "x"))).unwrap();
        assert_eq!(
            run(s.dead_discard(DiscardParams::new(vec![id]))).unwrap(),
            1
        );
        assert_eq!(state(&s, id), None);
        assert_eq!(run(s.queue_counts(&q("q"))).unwrap().dead, 0);
    }
}

mod g06_stalls {
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
}

mod g07_schedule {
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
}

mod g08_order {
    use super::*;

    #[test]
    fn claims_go_by_priority_then_run_at_then_enqueue_order_across_queues() {
        let (s, clock) = store();
        let t0 = start();
        let got = enqueue(
            &s,
            vec![
                item("b").run_at(t0 + Duration::from_secs(2)), // 0: p0, later
                item("a").run_at(t0 + Duration::from_secs(1)), // 1: p0, earlier
                item("a").priority(-1).run_at(t0 + Duration::from_secs(3)), // 2: p-1
                item("b").run_at(t0 + Duration::from_secs(1)), // 3: p0, earlier, enqueued after 1
                item("a").priority(5),                         // 4: p5
            ],
        );
        clock.advance(Duration::from_secs(3));
        let params = ClaimParams::new(q("a"), owner("w"), 10, LEASE).queues(vec![q("a"), q("b")]);
        let order = ids(&run(s.claim(params)).unwrap());
        assert_eq!(order, vec![got[2], got[1], got[3], got[0], got[4]]);
    }

    #[test]
    fn a_claim_of_one_queue_leaves_other_queues_alone() {
        let (s, _) = store();
        let [_, b] = enqueue(&s, vec![item("a"), item("b")])[..] else {
            panic!()
        };
        claim(&s, "a", "w", 10);
        assert_eq!(state(&s, b), Some(ItemState::Ready));
        assert!(claim(&s, "nobody", "w", 10).is_empty());
    }
}

mod g09_stream_fifo {
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
}

mod g10_scope {
    use super::*;

    fn sc_item(queue: &str, key: &str) -> tenure_core::NewItem {
        item(queue).scope(scope(key))
    }

    #[test]
    fn a_batch_claim_takes_one_item_per_scope_and_passes_over_the_rest() {
        let (s, _) = store();
        let got = enqueue(
            &s,
            vec![
                sc_item("q", "t1"),
                sc_item("q", "t1"),
                sc_item("q", "t2"),
                item("q"),
                sc_item("q", "t1"),
            ],
        );
        assert_eq!(ids(&claim(&s, "q", "w", 10)), vec![got[0], got[2], got[3]]);
        assert!(claim(&s, "q", "w", 10).is_empty());
    }

    #[test]
    fn the_scope_frees_when_its_item_completes_fails_releases_or_expires() {
        let (s, clock) = store();
        let got = enqueue(&s, (0..5).map(|_| sc_item("q", "t")).collect::<Vec<_>>());
        let t = claim(&s, "q", "w", 10).remove(0).token;
        run(s.complete_one(t)).unwrap();
        let t = claim(&s, "q", "w", 10).remove(0).token;
        assert_eq!(t.id, got[1]);
        run(s.fail_one(Failure::retry_after(t, Duration::from_secs(100), "e"))).unwrap();
        let t = claim(&s, "q", "w", 10).remove(0).token;
        assert_eq!(t.id, got[2]);
        run(s.release_one(t)).unwrap();
        let t = claim(&s, "q", "w", 10).remove(0).token;
        assert_eq!(t.id, got[2], "a released item keeps its place");
        clock.advance(LEASE);
        let l = claim(&s, "q", "w", 10);
        // Recovery puts got[2] back at run_at = now, behind the older got[3].
        assert_eq!(ids(&l), vec![got[3]], "recovered, so the scope is free");
        assert_eq!(run(s.item_get(got[2])).unwrap().unwrap().stalls, 1);
    }

    #[test]
    fn a_busy_scope_blocks_its_items_in_every_queue_and_unscoped_items_run() {
        let (s, _) = store();
        let got = enqueue(
            &s,
            vec![sc_item("a", "t"), sc_item("b", "t"), item("b"), item("b")],
        );
        claim(&s, "a", "w", 10);
        assert_eq!(ids(&claim(&s, "b", "w", 10)), vec![got[2], got[3]]);
    }

    #[test]
    fn a_freed_scope_offers_its_best_item_of_each_queue() {
        let (s, _) = store();
        let got = enqueue(
            &s,
            vec![
                sc_item("a", "t"),
                sc_item("b", "t").priority(3),
                sc_item("b", "t").priority(1),
                sc_item("a", "t").priority(2),
            ],
        );
        let t = claim(&s, "a", "w", 10).remove(0).token;
        assert_eq!(t.id, got[0]);
        run(s.complete_one(t)).unwrap();
        let both = ClaimParams::new(q("a"), owner("w"), 10, LEASE).queues(vec![q("a"), q("b")]);
        assert_eq!(ids(&run(s.claim(both.clone())).unwrap()), vec![got[2]]);
        assert!(run(s.claim(both)).unwrap().is_empty());
    }

    #[test]
    fn a_dead_item_does_not_hold_its_scope() {
        let (s, _) = store();
        let got = enqueue(&s, vec![sc_item("q", "t"), sc_item("q", "t")]);
        let t = claim(&s, "q", "w", 10).remove(0).token;
        run(s.fail_one(Failure::permanent(t, "e"))).unwrap();
        assert_eq!(ids(&claim(&s, "q", "w", 10)), vec![got[1]]);
    }
}

mod g11_dedup {
    use super::*;

    fn keyed(key: &str) -> tenure_core::NewItem {
        item("q").dedup_key(DedupKey::new(key).unwrap())
    }

    #[test]
    fn a_key_seen_within_its_window_is_a_duplicate_even_within_one_call() {
        let (s, _) = store();
        let out =
            run(s.enqueue(EnqueueParams::new(vec![keyed("k"), keyed("k"), keyed("j")]))).unwrap();
        assert!(!out[0].duplicate && out[1].duplicate && !out[2].duplicate);
        assert_eq!(out[1].id, out[0].id);
        let again = run(s.enqueue_one(keyed("k"))).unwrap();
        assert_eq!((again.id, again.duplicate), (out[0].id, true));
        assert_eq!(run(s.queue_counts(&q("q"))).unwrap().ready, 2);
    }

    #[test]
    fn the_key_is_free_again_after_its_window_and_purge_removes_it() {
        let (s, clock) = store();
        let first = run(s.enqueue_one(keyed("k").dedup_window(Duration::from_secs(10)))).unwrap();
        clock.advance(Duration::from_secs(9));
        assert!(run(s.enqueue_one(keyed("k"))).unwrap().duplicate);
        clock.advance(Duration::from_secs(1));
        let p = run(s.purge(PurgeParams::new(Duration::ZERO, 100))).unwrap();
        assert_eq!(p.dedup_keys, 1);
        let second = run(s.enqueue_one(keyed("k"))).unwrap();
        assert!(!second.duplicate);
        assert_ne!(second.id, first.id);
    }

    #[test]
    fn an_expired_key_that_was_not_purged_is_recorded_anew() {
        let (s, clock) = store();
        run(s.enqueue_one(keyed("k").dedup_window(Duration::from_secs(10)))).unwrap();
        clock.advance(Duration::from_secs(10));
        let second = run(s.enqueue_one(keyed("k").dedup_window(Duration::from_secs(100)))).unwrap();
        assert!(!second.duplicate);
        clock.advance(Duration::from_secs(50));
        let p = run(s.purge(PurgeParams::new(Duration::ZERO, 100))).unwrap();
        assert_eq!(p.dedup_keys, 0, "the new record lasts its own window");
        assert!(run(s.enqueue_one(keyed("k"))).unwrap().duplicate);
    }

    #[test]
    fn keys_are_per_queue_and_outlive_the_finished_item() {
        let (s, _) = store();
        let a = run(s.enqueue_one(keyed("k"))).unwrap();
        let t = claim(&s, "q", "w", 1).remove(0).token;
        run(s.complete_one(t)).unwrap();
        let again = run(s.enqueue_one(keyed("k"))).unwrap();
        assert_eq!((again.id, again.duplicate), (a.id, true));
        let other =
            run(s.enqueue_one(item("other").dedup_key(DedupKey::new("k").unwrap()))).unwrap();
        assert!(!other.duplicate);
    }
}

mod g12_instances {
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
        let out =
            run(s.complete(CompleteParams::new(l.iter().map(|l| l.token).collect()))).unwrap();
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
}

mod g13_leader {
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
}

mod g15_bad_input {
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
        let e =
            run(s.enqueue(EnqueueParams::new(vec![item("q"), item("q").with_id(id)]))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict);
        assert_eq!(run(s.queue_counts(&q("q"))).unwrap().ready, 1);
    }
}

mod memory_store {
    use super::*;

    #[test]
    fn an_unavailable_store_answers_unavailable_changes_nothing_and_recovers() {
        let (s, _) = store();
        let peer = s.clone();
        let [id] = enqueue(&s, vec![item("q")])[..] else {
            panic!()
        };
        s.set_available(false);
        let e = run(peer.claim(ClaimParams::new(q("q"), owner("w"), 1, LEASE))).unwrap_err();
        assert!(e.is_retryable());
        assert!(matches!(
            e,
            Error::Unavailable {
                store: "memory",
                ..
            }
        ));
        assert_eq!(
            run(s.enqueue_one(item("q"))).unwrap_err().kind(),
            ErrorKind::Unavailable
        );
        assert_eq!(
            run(s.item_get(id)).unwrap_err().kind(),
            ErrorKind::Unavailable
        );
        assert_eq!(
            run(s.instance_list()).unwrap_err().kind(),
            ErrorKind::Unavailable
        );
        s.set_available(true);
        assert_eq!(run(s.queue_counts(&q("q"))).unwrap().ready, 1);
        assert_eq!(ids(&claim(&peer, "q", "w", 5)), vec![id]);
    }

    #[test]
    fn keep_done_keeps_finished_items_until_purge() {
        let clock = tenure_core::ManualClock::new(start());
        let s = MemoryStore::new(clock.clone()).keep_done(true);
        let [id] = enqueue(&s, vec![item("q")])[..] else {
            panic!()
        };
        let t = claim(&s, "q", "w", 1).remove(0).token;
        run(s.complete_one(t)).unwrap();
        assert_eq!(state(&s, id), Some(ItemState::Done));
        assert_eq!(run(s.queue_counts(&q("q"))).unwrap().done, 1);
        clock.advance(Duration::from_secs(59));
        let keep = PurgeParams::new(Duration::from_secs(60), 100);
        assert_eq!(run(s.purge(keep.clone())).unwrap().items, 0);
        clock.advance(Duration::from_secs(1));
        assert_eq!(run(s.purge(keep)).unwrap().items, 1);
        assert_eq!(state(&s, id), None);
    }

    #[test]
    fn finished_items_are_deleted_at_once_by_default() {
        let (s, _) = store();
        let [id] = enqueue(&s, vec![item("q")])[..] else {
            panic!()
        };
        let t = claim(&s, "q", "w", 1).remove(0).token;
        run(s.complete_one(t)).unwrap();
        assert_eq!(state(&s, id), None);
        assert_eq!(run(s.queue_counts(&q("q"))).unwrap(), Default::default());
        assert_eq!(
            run(s.purge(PurgeParams::new(Duration::ZERO, 10)))
                .unwrap()
                .items,
            0
        );
    }

    #[test]
    fn purge_deletes_at_most_its_limit_oldest_first() {
        let clock = tenure_core::ManualClock::new(start());
        let s = MemoryStore::new(clock.clone()).keep_done(true);
        let got = enqueue(&s, vec![item("q"), item("q"), item("q")]);
        for want in &got {
            let t = claim(&s, "q", "w", 1).remove(0).token;
            assert_eq!(t.id, *want);
            run(s.complete_one(t)).unwrap();
            clock.advance(Duration::from_secs(1));
        }
        let p = run(s.purge(PurgeParams::new(Duration::ZERO, 2))).unwrap();
        assert_eq!(p.items, 2);
        assert_eq!(state(&s, got[0]), None);
        assert_eq!(state(&s, got[2]), Some(ItemState::Done));
    }

    #[test]
    fn clones_share_the_data_and_the_name_is_memory() {
        let (s, _) = store();
        let peer = s.clone();
        let [id] = enqueue(&s, vec![item("q")])[..] else {
            panic!()
        };
        assert!(run(peer.item_get(id)).unwrap().is_some());
        assert_eq!(s.name(), "memory");
        assert!(s.capabilities().partitioned_claiming);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_wake_signal_fires_after_an_enqueue_through_any_handle() {
        let (s, _) = store();
        let peer = s.clone();
        let signal = s.wake_signal().unwrap();
        let waiter = tokio::spawn(async move { signal.notified().await });
        tokio::task::yield_now().await;
        peer.enqueue_one(item("q")).await.unwrap();
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("the signal fired")
            .unwrap();
    }
}
