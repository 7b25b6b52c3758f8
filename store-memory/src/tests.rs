//! Tests that read the store's internals: claims must not scan what they cannot take.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tenure_core::{
    ClaimParams, Clock, CompleteParams, DeregisterParams, EnqueueParams, HeartbeatParams,
    ManualClock, NewItem, OwnerId, QueueName, RecoverParams, RenewOutcome, RenewParams, ScopeKey,
    Store, StreamKey, Timestamp,
};

use crate::MemoryStore;

const LEASE: Duration = Duration::from_secs(30);

fn run<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a memory store call waited"),
    }
}

fn q() -> QueueName {
    QueueName::new("q").unwrap()
}

fn claim(s: &MemoryStore, limit: u32) -> Vec<tenure_core::Lease> {
    let owner = OwnerId::new("w").unwrap();
    run(s.claim(ClaimParams::new(q(), owner, limit, LEASE))).unwrap()
}

fn enqueue_many(s: &MemoryStore, n: usize, make: impl Fn() -> NewItem) {
    let items: Vec<NewItem> = (0..n).map(|_| make()).collect();
    for chunk in items.chunks(10_000) {
        run(s.enqueue(EnqueueParams::new(chunk.to_vec()))).unwrap();
    }
}

/// Index entries one claim of 10 looks at, with `n` items scheduled for later, `n`
/// behind a running stream head and `n` behind a busy scope, all ahead of the 10
/// claimable ones in priority.
fn claim_visits(n: usize) -> u64 {
    let clock = ManualClock::new(Timestamp::from_micros(1_000_000_000));
    let s = MemoryStore::new(clock);
    let stream = StreamKey::new("s").unwrap();
    let scope = ScopeKey::new("busy").unwrap();
    let item = || NewItem::new(q(), b"x".to_vec());
    run(s.enqueue(EnqueueParams::new(vec![
        item().stream(stream.clone()),
        item().scope(scope.clone()),
    ])))
    .unwrap();
    assert_eq!(
        claim(&s, 2).len(),
        2,
        "the stream head and the scope holder run"
    );
    enqueue_many(&s, n, || item().delay(Duration::from_secs(3600)));
    enqueue_many(&s, n, || item().stream(stream.clone()));
    enqueue_many(&s, n, || item().scope(scope.clone()));
    enqueue_many(&s, 10, || item().priority(10));
    let before = s.visits();
    let got = claim(&s, 10);
    assert_eq!(got.len(), 10);
    assert!(got.iter().all(|l| l.item.priority == 10));
    assert!(claim(&s, 10).is_empty());
    s.visits() - before
}

#[test]
fn a_claim_does_not_visit_scheduled_stream_blocked_or_scope_blocked_items() {
    let small = claim_visits(1_000);
    let large = claim_visits(100_000);
    assert_eq!(small, large, "the cost of a claim does not grow with n");
    assert!(large <= 10, "one visit per claimed item, got {large}");
}

#[test]
fn items_that_come_due_are_visited_once_when_first_claimable() {
    let clock = ManualClock::new(Timestamp::from_micros(1_000_000_000));
    let s = MemoryStore::new(clock.clone());
    let item = || NewItem::new(q(), b"x".to_vec());
    enqueue_many(&s, 100, || item().delay(Duration::from_secs(10)));
    enqueue_many(&s, 1_000, || item().delay(Duration::from_secs(3600)));
    clock.advance(Duration::from_secs(10));
    let before = s.visits();
    assert_eq!(claim(&s, 5).len(), 5);
    // 100 due entries moved to the ready index, then one visit per claimed item.
    assert_eq!(s.visits() - before, 105);
}

/// The running indexes keep records of finished leases (they are lazy); sweeps must
/// bound them by the running items and must never drop a live one.
#[test]
fn stale_running_records_are_swept_and_live_leases_still_expire_and_evict() {
    let clock = ManualClock::new(Timestamp::from_micros(1_000_000_000));
    let s = MemoryStore::new(clock.clone());
    let renewer = OwnerId::new("r").unwrap();
    enqueue_many(&s, 30_000, || NewItem::new(q(), b"x".to_vec()));
    // 1,000 leases held to the end: 500 renewed (by "r"), 500 left to expire.
    let held = claim(&s, 500);
    let renewed = run(s.claim(ClaimParams::new(q(), renewer.clone(), 500, LEASE))).unwrap();
    // 28,000 claimed one at a time, a microsecond apart, and completed.
    for _ in 0..28_000 {
        clock.advance(Duration::from_micros(1));
        let got = claim(&s, 1);
        assert_eq!(got.len(), 1);
        run(s.complete(CompleteParams::new(vec![got[0].token]))).unwrap();
    }
    let (expiry, owners, running) = s.running_records();
    assert_eq!(running, 1_000);
    assert!(
        expiry <= 2 * running + 4_096 && owners <= 2 * running + 4_096,
        "stale records are swept: {expiry} expiry and {owners} owner records"
    );
    clock.advance(LEASE / 2);
    let tokens: Vec<_> = renewed.iter().map(|l| l.token).collect();
    let out = run(s.renew(RenewParams::new(tokens, LEASE))).unwrap();
    assert!(out
        .iter()
        .all(|o| matches!(o, RenewOutcome::Renewed { .. })));
    // The 500 unrenewed leases expire, each recovered once; the renewed ones do not.
    clock.advance(LEASE / 2);
    let recovered = run(s.recover_expired(RecoverParams::new(10_000))).unwrap();
    assert_eq!(recovered.requeued, 500, "{recovered:?}");
    let _ = held;
    // Evicting "r" releases exactly its 500 running leases.
    run(s.instance_heartbeat(HeartbeatParams::new(renewer.clone()))).unwrap();
    let evicted = run(s.instance_deregister(DeregisterParams::new(renewer))).unwrap();
    assert_eq!(evicted.released, 500);
    assert_eq!(s.running_records().2, 0);
}

/// Leases carry their item's payload in buffers reused from deleted items; each must
/// hold exactly its own item's bytes, whatever the reused buffer held before.
#[test]
fn leases_carry_their_own_payload_in_reused_buffers() {
    let s = MemoryStore::default();
    let payload = |i: usize| vec![u8::try_from(i % 251).unwrap(); (i * 37) % 300];
    let items: Vec<NewItem> = (0..2_000).map(|i| NewItem::new(q(), payload(i))).collect();
    let ids: Vec<_> = items.iter().map(|i| i.id).collect();
    run(s.enqueue(EnqueueParams::new(items))).unwrap();
    let mut seen = 0;
    loop {
        let got = claim(&s, 64);
        if got.is_empty() {
            break;
        }
        for l in &got {
            let i = ids.iter().position(|id| *id == l.item.id).unwrap();
            assert_eq!(l.item.payload, payload(i), "item {i}");
        }
        seen += got.len();
        let tokens = got.iter().map(|l| l.token).collect();
        run(s.complete(CompleteParams::new(tokens))).unwrap();
    }
    assert_eq!(seen, 2_000);
}

/// A clock that counts its reads, and those made while the store's lock was free.
#[derive(Clone, Debug)]
struct LockWatchingClock {
    inner: ManualClock,
    store: Arc<OnceLock<Weak<crate::store::Inner>>>,
    reads: Arc<AtomicUsize>,
    unlocked_reads: Arc<AtomicUsize>,
}

impl Clock for LockWatchingClock {
    fn now(&self) -> Timestamp {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if let Some(inner) = self.store.get().and_then(Weak::upgrade) {
            if inner.state.try_lock().is_ok() {
                self.unlocked_reads.fetch_add(1, Ordering::SeqCst);
            }
        }
        self.inner.now()
    }
}

/// The clock is read under the store's lock. A `now` read before the lock could be older
/// than an enqueue that took the lock first, whose item the ready index already holds:
/// the claim would then meet a "ready" item not yet due at its own `now`.
#[test]
fn every_call_reads_the_clock_while_it_holds_the_lock() {
    let clock = LockWatchingClock {
        inner: ManualClock::new(Timestamp::from_micros(1_000_000)),
        store: Default::default(),
        reads: Default::default(),
        unlocked_reads: Default::default(),
    };
    let s = MemoryStore::new(clock.clone());
    clock.store.set(Arc::downgrade(&s.inner)).expect("set once");
    enqueue_many(&s, 3, || NewItem::new(q(), b"x".to_vec()));
    let leases = claim(&s, 2);
    assert_eq!(leases.len(), 2);
    let tokens = leases.iter().map(|l| l.token).collect();
    run(s.complete(CompleteParams::new(tokens))).unwrap();
    assert!(
        clock.reads.load(Ordering::SeqCst) >= 3,
        "each call reads the clock"
    );
    assert_eq!(
        clock.unlocked_reads.load(Ordering::SeqCst),
        0,
        "a call read the clock outside the store's lock"
    );
}
