//! Random operation sequences against a naive reference model of the contract.
//!
//! The model keeps items in a plain vector and answers every call by scanning it with
//! the rules of `Store`'s `# Contract` docs and the functions of `tenure_core::machine`.
//! The store must give the same answer to every call and hold the same items after
//! it; on top of that the invariants of G1, G3, G9 and G10 are checked on the store
//! directly after every step.
//!
//! This file holds the operations and the step that compares the two; the model is in
//! `reference.rs`.
// Test helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used)]

use tenure_test_support::memory as common;

use std::collections::HashMap;
use std::time::Duration;

use common::{run, start, LEASE};
use proptest::prelude::*;
use tenure_core::machine::{self, Recovery};
use tenure_core::{
    Clock, CompleteParams, DedupKey, DiscardParams, EnqueueParams, Enqueued, EvictParams, Evicted,
    FailOutcome, FailParams, Failure, HeartbeatParams, Instance, Item, ItemId, ItemState, Lease,
    LeaseId, LeaseToken, ManualClock, NewItem, OwnerId, PurgeParams, QueueCounts, QueueName,
    RecoverParams, Recovered, ReleaseParams, RenewOutcome, RenewParams, RequeueParams, ScopeKey,
    Store, StreamKey, Timestamp, TokenOutcome,
};
use tenure_memory::MemoryStore;

const QUEUES: [&str; 2] = ["q0", "q1"];
const WORKERS: u8 = 3;
const STALE_AFTER: Duration = Duration::from_secs(45);

fn queue(n: u8) -> QueueName {
    QueueName::new(QUEUES[usize::from(n) % QUEUES.len()]).unwrap()
}

fn worker(n: u8) -> OwnerId {
    OwnerId::new(format!("w{n}")).unwrap()
}

#[derive(Clone, Debug)]
struct Spec {
    queue: u8,
    stream: Option<u8>,
    scope: Option<u8>,
    priority: i16,
    delay: u8,
    dedup: Option<u8>,
    max_attempts: u32,
    max_stalls: u32,
    max_renewals: u32,
}

impl Spec {
    fn build(&self) -> NewItem {
        let mut it = NewItem::new(queue(self.queue), b"p".to_vec())
            .priority(self.priority)
            .delay(Duration::from_secs(u64::from(self.delay)))
            .max_attempts(self.max_attempts)
            .max_stalls(self.max_stalls)
            .max_renewals(self.max_renewals)
            .dedup_window(Duration::from_secs(50));
        if let Some(s) = self.stream {
            it = it.stream(StreamKey::new(format!("s{s}")).unwrap());
        }
        if let Some(s) = self.scope {
            it = it.scope(ScopeKey::new(format!("c{s}")).unwrap());
        }
        if let Some(k) = self.dedup {
            it = it.dedup_key(DedupKey::new(format!("k{k}")).unwrap());
        }
        it
    }
}

#[derive(Clone, Debug)]
enum Op {
    Enqueue(Vec<Spec>),
    Claim {
        worker: u8,
        queues: u8,
        limit: u32,
    },
    Renew {
        worker: u8,
        pick: usize,
    },
    Complete {
        worker: u8,
        picks: Vec<usize>,
    },
    Fail {
        worker: u8,
        pick: usize,
        permanent: bool,
        delay: u8,
    },
    Release {
        worker: u8,
        pick: usize,
    },
    Advance(u8),
    Recover(u32),
    Heartbeat(u8),
    Evict,
    Requeue {
        pick: usize,
        more: u32,
    },
    Discard(usize),
    Purge {
        keep: u8,
        limit: u32,
    },
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0u8..2,
        prop::option::of(0u8..2),
        prop::option::of(0u8..2),
        0i16..2,
        prop_oneof![3 => Just(0u8), 1 => 1u8..4],
        prop::option::weighted(0.3, 0u8..3),
        1u32..4,
        1u32..4,
        0u32..3,
    )
        .prop_map(
            |(queue, stream, scope, priority, delay, dedup, ma, ms, mr)| Spec {
                queue,
                stream,
                scope,
                priority,
                delay,
                dedup,
                max_attempts: ma,
                max_stalls: ms,
                max_renewals: mr,
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    let w = 0..WORKERS;
    prop_oneof![
        4 => prop::collection::vec(spec(), 1..4).prop_map(Op::Enqueue),
        5 => (w.clone(), 1u8..4, 1u32..4).prop_map(|(worker, queues, limit)| Op::Claim { worker, queues, limit }),
        2 => (w.clone(), any::<usize>()).prop_map(|(worker, pick)| Op::Renew { worker, pick }),
        3 => (w.clone(), prop::collection::vec(any::<usize>(), 1..3)).prop_map(|(worker, picks)| Op::Complete { worker, picks }),
        2 => (w.clone(), any::<usize>(), any::<bool>(), 0u8..3).prop_map(|(worker, pick, permanent, delay)| Op::Fail { worker, pick, permanent, delay }),
        1 => (w.clone(), any::<usize>()).prop_map(|(worker, pick)| Op::Release { worker, pick }),
        3 => (0u8..40).prop_map(Op::Advance),
        1 => (1u32..3).prop_map(Op::Recover),
        2 => w.prop_map(Op::Heartbeat),
        1 => Just(Op::Evict),
        1 => (any::<usize>(), 1u32..3).prop_map(|(pick, more)| Op::Requeue { pick, more }),
        1 => any::<usize>().prop_map(Op::Discard),
        1 => (0u8..30, 1u32..4).prop_map(|(keep, limit)| Op::Purge { keep, limit }),
    ]
}

mod reference;

use reference::Model;

fn pick(tokens: &[LeaseToken], n: usize) -> Option<LeaseToken> {
    (!tokens.is_empty()).then(|| tokens[n % tokens.len()])
}

/// Runs `ops` on a store and the model side by side; fails on the first difference.
fn check(ops: Vec<Op>, keep_done: bool) -> Result<(), TestCaseError> {
    let clock = ManualClock::new(start());
    let store = MemoryStore::new(clock.clone()).keep_done(keep_done);
    let peer = store.clone();
    let mut model = Model::new(keep_done);
    // Every token each worker was ever given, stale ones included.
    let mut held: Vec<Vec<LeaseToken>> = vec![Vec::new(); usize::from(WORKERS)];
    let mut all_ids: Vec<ItemId> = Vec::new();
    let mut attempts: HashMap<ItemId, u32> = HashMap::new();

    for (step, op) in ops.into_iter().enumerate() {
        // Alternate handles: both must see one store.
        let s = if step % 2 == 0 { &store } else { &peer };
        let now = clock.now();
        let before: HashMap<ItemId, Option<Item>> = all_ids
            .iter()
            .map(|id| (*id, run(s.item_get(*id)).unwrap()))
            .collect();
        let current_before = |t: &LeaseToken| {
            before[&t.id]
                .as_ref()
                .is_some_and(|it| machine::is_current(it, t))
        };
        match &op {
            Op::Enqueue(specs) => {
                let news: Vec<NewItem> = specs.iter().map(Spec::build).collect();
                let got = run(s.enqueue(EnqueueParams::new(news.clone()))).unwrap();
                prop_assert_eq!(&got, &model.enqueue(&news, now));
                for e in got.iter().filter(|e| !e.duplicate) {
                    all_ids.push(e.id);
                }
            }
            Op::Claim {
                worker: w,
                queues,
                limit,
            } => {
                let qs: Vec<QueueName> = (0..2u8)
                    .filter(|b| queues & (1 << b) != 0)
                    .map(queue)
                    .collect();
                let params =
                    tenure_core::ClaimParams::new(qs[0].clone(), worker(*w), *limit, LEASE)
                        .queues(qs.clone());
                let got: Vec<Lease> = run(s.claim(params)).unwrap();
                // The store mints one lease id per claim call (a random one, so the
                // model takes it from the answer).
                let lease = got.first().map_or(LeaseId::NONE, |l| l.token.lease);
                prop_assert!(got
                    .iter()
                    .all(|l| l.token.lease == lease && lease != LeaseId::NONE));
                let want = model.claim(&qs, &worker(*w), *limit as usize, lease, now);
                let got_items: Vec<Item> = got.iter().map(|l| l.item.clone()).collect();
                prop_assert_eq!(&got_items, &want);
                for l in &got {
                    prop_assert_eq!(l.token, l.item.token());
                    prop_assert_eq!(l.expires_at, now + LEASE);
                    prop_assert_eq!(&l.owner, &worker(*w));
                    held[usize::from(*w)].push(l.token);
                }
            }
            Op::Renew { worker: w, pick: p } => {
                if let Some(t) = pick(&held[usize::from(*w)], *p) {
                    let got = run(s.renew(RenewParams::new(vec![t], LEASE))).unwrap();
                    let want = match model.get_mut(t.id) {
                        Some(it) => machine::renew(it, &t, now, LEASE),
                        None => RenewOutcome::LeaseLost,
                    };
                    prop_assert_eq!(got[0], want);
                    prop_assert_eq!(got[0] != RenewOutcome::LeaseLost, current_before(&t));
                }
            }
            Op::Complete { worker: w, picks } => {
                let mut tokens: Vec<LeaseToken> = picks
                    .iter()
                    .filter_map(|p| pick(&held[usize::from(*w)], *p))
                    .collect();
                tokens.sort();
                tokens.dedup_by_key(|t| t.id);
                if !tokens.is_empty() {
                    let got = run(s.complete(CompleteParams::new(tokens.clone()))).unwrap();
                    prop_assert_eq!(&got, &model.complete(&tokens, now));
                    for (t, o) in tokens.iter().zip(&got) {
                        prop_assert_eq!(*o == TokenOutcome::Accepted, current_before(t));
                    }
                }
            }
            Op::Fail {
                worker: w,
                pick: p,
                permanent,
                delay,
            } => {
                if let Some(t) = pick(&held[usize::from(*w)], *p) {
                    let f = if *permanent {
                        Failure::permanent(t, "perm")
                    } else {
                        Failure::retry_after(t, Duration::from_secs(u64::from(*delay)), "retry")
                    };
                    let got = run(s.fail(FailParams::one(f.clone()))).unwrap();
                    let want = match model.get_mut(t.id) {
                        Some(it) => machine::fail(it, &f, now),
                        None => FailOutcome::LeaseLost,
                    };
                    prop_assert_eq!(got[0], want);
                    prop_assert_eq!(got[0] != FailOutcome::LeaseLost, current_before(&t));
                }
            }
            Op::Release { worker: w, pick: p } => {
                if let Some(t) = pick(&held[usize::from(*w)], *p) {
                    let got = run(s.release(ReleaseParams::new(vec![t]))).unwrap();
                    let want = match model.get_mut(t.id) {
                        Some(it) => machine::release(it, &t, now),
                        None => TokenOutcome::LeaseLost,
                    };
                    prop_assert_eq!(got[0], want);
                    prop_assert_eq!(got[0] == TokenOutcome::Accepted, current_before(&t));
                }
            }
            Op::Advance(secs) => clock.advance(Duration::from_secs(u64::from(*secs))),
            Op::Recover(limit) => {
                let got = run(s.recover_expired(RecoverParams::new(*limit))).unwrap();
                prop_assert_eq!(got, model.recover(*limit as usize, now));
            }
            Op::Heartbeat(w) => {
                run(s.instance_heartbeat(HeartbeatParams::new(worker(*w)))).unwrap();
                model.heartbeat(&worker(*w), now);
            }
            Op::Evict => {
                let got = run(s.instance_evict_stale(EvictParams::new(STALE_AFTER))).unwrap();
                prop_assert_eq!(got, model.evict(now));
                prop_assert_eq!(run(s.instance_list()).unwrap(), model.instances.clone());
            }
            Op::Requeue { pick: p, more } => {
                if !all_ids.is_empty() {
                    let id = all_ids[p % all_ids.len()];
                    let got = run(
                        s.dead_requeue(RequeueParams::new(vec![id]).additional_attempts(*more))
                    )
                    .unwrap();
                    let want = model
                        .get_mut(id)
                        .is_some_and(|it| machine::requeue(it, now, *more));
                    prop_assert_eq!(got, u64::from(want));
                }
            }
            Op::Discard(p) => {
                if !all_ids.is_empty() {
                    let id = all_ids[p % all_ids.len()];
                    let got = run(s.dead_discard(DiscardParams::new(vec![id]))).unwrap();
                    let want = model.get(id).is_some_and(machine::discard);
                    if want {
                        model.delete(id);
                    }
                    prop_assert_eq!(got, u64::from(want));
                }
            }
            Op::Purge { keep, limit } => {
                let keep = Duration::from_secs(u64::from(*keep));
                let got = run(s.purge(PurgeParams::new(keep, *limit))).unwrap();
                let (items, keys) = model.purge(keep, *limit as usize, now);
                prop_assert_eq!(got.items, items);
                prop_assert_eq!(got.dedup_keys, keys);
            }
        }

        // The store holds exactly the model's items.
        let now = clock.now();
        let mut running_scopes: HashMap<ScopeKey, ItemId> = HashMap::new();
        for id in &all_ids {
            let got = run(s.item_get(*id)).unwrap();
            prop_assert_eq!(got.as_ref(), model.get(*id), "item {} after {:?}", id, op);
            let Some(it) = got else { continue };
            let last = attempts.insert(*id, it.attempt).unwrap_or(0);
            prop_assert!(it.attempt >= last, "attempt decreased");
            if it.state == ItemState::Running {
                // G10: one running item per scope.
                if let Some(sc) = &it.scope {
                    let other = running_scopes.insert(sc.clone(), *id);
                    prop_assert!(other.is_none(), "two running items in scope {}", sc);
                }
                // G9: a running item heads its stream.
                let seq = model.seq_of[id];
                prop_assert!(
                    model.is_head(seq),
                    "running item {} is not its stream head",
                    id
                );
            }
            // G1: at most one held token is the current attempt.
            let live = held
                .iter()
                .flatten()
                .filter(|t| machine::is_current(&it, t))
                .count();
            prop_assert!(live <= 1, "two live leases on {}", id);
        }
        for q in QUEUES {
            let q = QueueName::new(q).unwrap();
            prop_assert_eq!(run(s.queue_counts(&q)).unwrap(), model.counts(&q, now));
        }
    }
    Ok(())
}

proptest! {
    // 256 cases by default; PROPTEST_CASES=n runs more.
    /// Every answer and every item of the store equals the reference model's, and the
    /// invariants of G1, G3, G9 and G10 hold after every step.
    #[test]
    fn random_sequences_match_the_reference_model(
        ops in prop::collection::vec(op(), 1..80),
        keep_done in any::<bool>(),
    ) {
        check(ops, keep_done)?;
    }
}
