//! The claim vs recover vs complete race, checked exhaustively and under real threads.
//!
//! Every store call runs whole under the store's one lock, so any concurrent run is
//! equivalent to some order of whole calls. `interleavings` enumerates every such
//! order from a fixed start and checks each caller's answer against a small spec;
//! `threads` forces the same races with real threads released by a barrier.
// Test helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used)]

use tenure_test_support::memory as common;

use common::*;
use tenure_core::{
    ClaimParams, CompleteParams, EnqueueParams, ItemId, ItemState, Lease, LeaseToken,
    RecoverParams, RenewOutcome, RenewParams, Store, TokenOutcome,
};
use tenure_memory::MemoryStore;

fn claim(s: &MemoryStore, who: &str, limit: u32) -> Vec<Lease> {
    run(s.claim(ClaimParams::new(q("q"), owner(who), limit, LEASE))).unwrap()
}

mod interleavings {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Op {
        /// Worker A completes its attempt on X.
        ACompletes,
        /// Worker A renews its attempt on X.
        ARenews,
        /// A maintenance pass recovers expired leases.
        Recovers,
        /// Worker B claims up to two items.
        BClaims,
        /// Worker B completes whatever it holds.
        BCompletes,
    }

    const OPS: [Op; 5] = [
        Op::ACompletes,
        Op::ARenews,
        Op::Recovers,
        Op::BClaims,
        Op::BCompletes,
    ];

    /// Where an item stands in the spec.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum At {
        Ready,
        HeldByA { expired: bool },
        HeldByB,
        Done,
    }

    fn permutations(items: &[Op]) -> Vec<Vec<Op>> {
        if items.len() <= 1 {
            return vec![items.to_vec()];
        }
        let mut out = Vec::new();
        for i in 0..items.len() {
            let mut rest = items.to_vec();
            let first = rest.remove(i);
            for mut tail in permutations(&rest) {
                tail.insert(0, first);
                out.push(tail);
            }
        }
        out
    }

    /// Runs one order from the start: X (head of stream `s`) held by A, Y behind it
    /// in the same stream; A's lease expired or not. Checks every answer.
    fn check_order(order: &[Op], expired: bool) {
        let (s, clock) = store();
        let peer = s.clone();
        let got = run(s.enqueue(EnqueueParams::new(vec![
            item("q").stream(stream("s")),
            item("q").stream(stream("s")),
        ])))
        .unwrap();
        let (x, y) = (got[0].id, got[1].id);
        let a = claim(&s, "a", 2);
        assert_eq!(a.len(), 1, "only the stream head is claimable");
        let a_token = a[0].token;
        if expired {
            clock.advance(LEASE);
        }
        let mut spec_x = At::HeldByA { expired };
        let mut spec_y = At::Ready;
        let mut b_tokens: Vec<LeaseToken> = Vec::new();

        for op in order {
            let ctx = format!("order {order:?}, expired {expired}, at {op:?}");
            match op {
                Op::ACompletes => {
                    let out = run(s.complete(CompleteParams::new(vec![a_token]))).unwrap();
                    let want = if matches!(spec_x, At::HeldByA { .. }) {
                        spec_x = At::Done;
                        TokenOutcome::Accepted
                    } else {
                        TokenOutcome::LeaseLost
                    };
                    assert_eq!(out, vec![want], "{ctx}");
                }
                Op::ARenews => {
                    let out = run(s.renew(RenewParams::new(vec![a_token], LEASE))).unwrap();
                    if matches!(spec_x, At::HeldByA { .. }) {
                        spec_x = At::HeldByA { expired: false };
                        assert!(
                            matches!(out[0], RenewOutcome::Renewed { .. }),
                            "{ctx}: {out:?}"
                        );
                    } else {
                        assert_eq!(out, vec![RenewOutcome::LeaseLost], "{ctx}");
                    }
                }
                Op::Recovers => {
                    let r = run(peer.recover_expired(RecoverParams::new(10))).unwrap();
                    let want = u64::from(spec_x == At::HeldByA { expired: true });
                    if want == 1 {
                        spec_x = At::Ready;
                    }
                    assert_eq!((r.requeued, r.dead), (want, 0), "{ctx}");
                }
                Op::BClaims => {
                    let leases = claim(&peer, "b", 2);
                    if spec_x == (At::HeldByA { expired: true }) {
                        spec_x = At::Ready; // the claim recovers first
                    }
                    let want: Vec<(ItemId, u32)> = if spec_x == At::Ready {
                        spec_x = At::HeldByB;
                        vec![(x, 2)]
                    } else if spec_x == At::Done && spec_y == At::Ready {
                        spec_y = At::HeldByB;
                        vec![(y, 1)]
                    } else {
                        vec![]
                    };
                    let got: Vec<(ItemId, u32)> = leases
                        .iter()
                        .map(|l| (l.token.id, l.token.attempt))
                        .collect();
                    assert_eq!(got, want, "{ctx}");
                    b_tokens.extend(leases.iter().map(|l| l.token));
                }
                Op::BCompletes => {
                    if b_tokens.is_empty() {
                        continue;
                    }
                    let out = run(peer.complete(CompleteParams::new(b_tokens.clone()))).unwrap();
                    for (t, o) in b_tokens.iter().zip(&out) {
                        let spec = if t.id == x { &mut spec_x } else { &mut spec_y };
                        let want = if *spec == At::HeldByB {
                            *spec = At::Done;
                            TokenOutcome::Accepted
                        } else {
                            TokenOutcome::LeaseLost
                        };
                        assert_eq!(*o, want, "{ctx}");
                    }
                }
            }
            // Invariants after every step: X heads the stream, so Y never runs while
            // X is unfinished; at most one of A's and B's tokens is current.
            let ix = run(s.item_get(x)).unwrap();
            let iy = run(s.item_get(y)).unwrap();
            if iy.as_ref().is_some_and(|i| i.state == ItemState::Running) {
                assert!(ix.is_none(), "{ctx}: Y runs while X is unfinished");
            }
            if let Some(ix) = &ix {
                let current = std::iter::once(&a_token)
                    .chain(&b_tokens)
                    .filter(|t| tenure_core::machine::is_current(ix, t))
                    .count();
                assert!(current <= 1, "{ctx}: two current tokens on X");
            }
            let state_of = |i: &Option<tenure_core::Item>| i.as_ref().map(|i| i.state);
            let expect = |a: At| match a {
                At::Ready => Some(ItemState::Ready),
                At::HeldByA { .. } | At::HeldByB => Some(ItemState::Running),
                At::Done => None,
            };
            assert_eq!(state_of(&ix), expect(spec_x), "{ctx}: X");
            assert_eq!(state_of(&iy), expect(spec_y), "{ctx}: Y");
        }
    }

    #[test]
    fn every_order_of_complete_renew_recover_and_claim_answers_each_caller_by_the_spec() {
        let orders = permutations(&OPS);
        assert_eq!(orders.len(), 120);
        for order in &orders {
            for expired in [true, false] {
                check_order(order, expired);
            }
        }
    }
}

mod threads {
    use std::collections::HashMap;
    use std::sync::{Arc, Barrier, Mutex};
    use std::thread;
    use std::time::Duration;

    use super::*;

    #[test]
    fn eight_threads_claiming_two_thousand_items_claim_each_exactly_once() {
        const THREADS: usize = 8;
        const ITEMS: usize = 2_000;
        let (s, _) = store();
        let news = (0..ITEMS).map(|_| item("q")).collect::<Vec<_>>();
        let ids: Vec<ItemId> = run(s.enqueue(EnqueueParams::new(news)))
            .unwrap()
            .into_iter()
            .map(|e| e.id)
            .collect();
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let s = s.clone();
                let barrier = barrier.clone();
                thread::spawn(move || {
                    let who = format!("w{t}");
                    let mut mine = Vec::new();
                    barrier.wait();
                    loop {
                        // Batches of 1..=16, different per thread and round.
                        let batch = 1 + (t + mine.len()) % 16;
                        let leases = claim(&s, &who, batch as u32);
                        if leases.is_empty() {
                            break;
                        }
                        let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
                        let out = run(s.complete(CompleteParams::new(tokens.clone()))).unwrap();
                        assert!(out.iter().all(|o| *o == TokenOutcome::Accepted));
                        mine.extend(tokens);
                    }
                    mine
                })
            })
            .collect();
        let mut seen: HashMap<ItemId, u32> = HashMap::new();
        for h in handles {
            for t in h.join().unwrap() {
                assert_eq!(t.attempt, 1);
                *seen.entry(t.id).or_default() += 1;
            }
        }
        assert_eq!(seen.len(), ITEMS);
        assert!(seen.values().all(|n| *n == 1), "an item was claimed twice");
        assert!(ids.iter().all(|id| seen.contains_key(id)));
        assert_eq!(run(s.queue_counts(&q("q"))).unwrap(), Default::default());
    }

    #[test]
    fn threads_racing_complete_recover_and_claim_after_expiry_agree_with_one_order() {
        for round in 0..200 {
            let (s, clock) = store();
            let x = run(s.enqueue(EnqueueParams::one(item("q")))).unwrap()[0].id;
            let a = claim(&s, "a", 1)[0].token;
            clock.advance(LEASE + Duration::from_secs(1));
            let barrier = Arc::new(Barrier::new(3));
            let answers = Arc::new(Mutex::new((None, None, None)));
            let spawn = |f: Box<dyn FnOnce(&MemoryStore) + Send>| {
                let s = s.clone();
                let barrier = barrier.clone();
                thread::spawn(move || {
                    barrier.wait();
                    f(&s);
                })
            };
            let (r1, r2, r3) = (answers.clone(), answers.clone(), answers.clone());
            let hs = [
                spawn(Box::new(move |s| {
                    let out = run(s.complete(CompleteParams::new(vec![a]))).unwrap();
                    r1.lock().unwrap().0 = Some(out[0]);
                })),
                spawn(Box::new(move |s| {
                    let r = run(s.recover_expired(RecoverParams::new(10))).unwrap();
                    r2.lock().unwrap().1 = Some(r.requeued);
                })),
                spawn(Box::new(move |s| {
                    let l = claim(s, "b", 5);
                    r3.lock().unwrap().2 =
                        Some(l.iter().map(|l| l.token.item_attempt()).collect::<Vec<_>>());
                })),
            ];
            for h in hs {
                h.join().unwrap();
            }
            let (done, recovered, b) = answers.lock().unwrap().clone();
            let (done, recovered, b) = (done.unwrap(), recovered.unwrap(), b.unwrap());
            let item = run(s.item_get(x)).unwrap();
            if done == TokenOutcome::Accepted {
                // A went first: nothing left to recover or claim.
                assert_eq!((recovered, b.len()), (0, 0), "round {round}");
                assert!(item.is_none(), "round {round}");
            } else {
                // Someone recovered X before A's complete, and B claimed it.
                assert_eq!(b, vec![(x, 2)], "round {round}");
                assert!(recovered <= 1, "round {round}");
                let item = item.unwrap();
                assert_eq!(
                    (item.state, item.attempt, item.stalls),
                    (ItemState::Running, 2, 1),
                    "round {round}"
                );
                assert_eq!(item.owner, Some(owner("b")));
            }
        }
    }
}
