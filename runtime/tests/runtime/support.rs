//! Test aids: a clock on tokio's paused time, a recording store wrapper that can park
//! renewals, a tracing capture, and small helpers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_core::{
    ClaimParams, Clock, CompleteParams, EnqueueParams, EvictParams, Evicted, FailOutcome,
    FailParams, HeartbeatParams, Item, ItemId, Lease, LeaseToken, NewItem, PurgeParams, Purged,
    QueueName, RecoverParams, Recovered, ReleaseParams, RenewOutcome, RenewParams, Result, Store,
    Timestamp, TokenOutcome, WakeSignal,
};
use tenure_memory::MemoryStore;
use tokio::sync::Notify;
use tokio::time::Instant;

/// A store clock that follows tokio's (paused) clock, so one `advance` moves both the
/// runtime's timers and the store's notion of lease expiry.
#[derive(Clone, Debug)]
pub(crate) struct TokioClock {
    start: Timestamp,
    base: Instant,
}

impl TokioClock {
    pub(crate) fn new() -> Self {
        TokioClock {
            start: Timestamp::from_micros(1_700_000_000_000_000),
            base: Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        self.start + (Instant::now() - self.base)
    }
}

pub(crate) fn queue() -> QueueName {
    QueueName::new("jobs").unwrap()
}

/// A memory store on tokio's clock that keeps finished items.
pub(crate) fn memory() -> MemoryStore {
    MemoryStore::new(TokioClock::new()).keep_done(true)
}

pub(crate) async fn enqueue(store: &impl Store, payloads: &[&str]) -> Vec<ItemId> {
    enqueue_items(
        store,
        payloads
            .iter()
            .map(|p| NewItem::new(queue(), p.as_bytes().to_vec()))
            .collect(),
    )
    .await
}

pub(crate) async fn enqueue_items(store: &impl Store, items: Vec<NewItem>) -> Vec<ItemId> {
    store
        .enqueue(EnqueueParams::new(items))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

/// Every call a [`Probe`] saw, with the tokio instant it arrived.
#[derive(Clone, Debug, Default)]
pub(crate) struct Calls {
    /// (when, asked, got)
    pub(crate) claims: Vec<(Instant, u32, usize)>,
    /// (when, tokens)
    pub(crate) renews: Vec<(Instant, usize)>,
    /// (when, tokens)
    pub(crate) completes: Vec<(Instant, usize)>,
    /// (when, failures)
    pub(crate) fails: Vec<(Instant, usize)>,
    pub(crate) releases: Vec<usize>,
    /// Every token sent to `renew`, in order.
    pub(crate) renewed_tokens: Vec<LeaseToken>,
    /// Every token sent to `release`, in order.
    pub(crate) released_tokens: Vec<LeaseToken>,
    /// Claim calls out at once, at most (see [`Probe::slow_claims`]).
    pub(crate) claims_out_max: usize,
    /// Leases claimed and not yet completed, now and at most.
    pub(crate) leases_out: usize,
    pub(crate) leases_out_max: usize,

    pub(crate) heartbeats: Vec<Instant>,
    pub(crate) recovers: usize,
    pub(crate) purges: usize,
    pub(crate) evicts: usize,
}

/// A store wrapper that records every call and can park `renew` forever (a hung
/// database call).
#[derive(Clone, Debug)]
pub(crate) struct Probe<S> {
    pub(crate) inner: S,
    pub(crate) calls: Arc<Mutex<Calls>>,
    hang_renew: Arc<AtomicBool>,
    greedy: Arc<AtomicBool>,
    parked: Arc<Notify>,
    plain: Arc<AtomicBool>,
    claim_delay: Arc<Mutex<Duration>>,
    complete_delay: Arc<Mutex<Duration>>,
    claims_out: Arc<std::sync::atomic::AtomicUsize>,
    lose_answers: Arc<std::sync::atomic::AtomicUsize>,
    panic_completes: Arc<std::sync::atomic::AtomicUsize>,
    panic_claims: Arc<std::sync::atomic::AtomicUsize>,
    fail_claims: Arc<std::sync::atomic::AtomicUsize>,
    out_of_order: Arc<std::sync::atomic::AtomicUsize>,
    wake: Arc<Mutex<Option<WakeSignal>>>,
}

impl<S: Store> Probe<S> {
    pub(crate) fn new(inner: S) -> Self {
        Probe {
            inner,
            calls: Arc::default(),
            hang_renew: Arc::default(),
            greedy: Arc::default(),
            parked: Arc::default(),
            plain: Arc::default(),
            claim_delay: Arc::default(),
            complete_delay: Arc::default(),
            claims_out: Arc::default(),
            lose_answers: Arc::default(),
            panic_completes: Arc::default(),
            panic_claims: Arc::default(),
            fail_claims: Arc::default(),
            out_of_order: Arc::default(),
            wake: Arc::default(),
        }
    }

    /// Hands out `signal` as the store's wake signal instead of the inner store's (a
    /// stand-in for a listener whose health the test sets).
    pub(crate) fn use_wake(&self, signal: WakeSignal) {
        *self.wake.lock().unwrap() = Some(signal);
    }

    /// The next `n` claim calls answer `Unavailable` without reaching the store (a
    /// store that is down); each is logged as a claim that got nothing.
    pub(crate) fn fail_claims(&self, n: usize) {
        self.fail_claims.store(n, Ordering::SeqCst);
    }

    /// The next `n` complete calls answer `OutOfOrder` for every token without
    /// reaching the store (an earlier item of the stream not completed yet).
    pub(crate) fn out_of_order_completes(&self, n: usize) {
        self.out_of_order.store(n, Ordering::SeqCst);
    }

    /// The next `n` claim calls panic (a broken store).
    pub(crate) fn panic_claims(&self, n: usize) {
        self.panic_claims.store(n, Ordering::SeqCst);
    }

    /// The next `n` complete or fail calls reach the store and take effect, then answer
    /// `Unavailable`: a connection lost after the commit, before the answer.
    /// Makes the next `n` `complete` calls panic before they reach the inner store.
    pub(crate) fn panic_completes(&self, n: usize) {
        self.panic_completes.store(n, Ordering::SeqCst);
    }

    pub(crate) fn lose_answers(&self, n: usize) {
        self.lose_answers.store(n, Ordering::SeqCst);
    }

    fn answer_lost(&self) -> bool {
        self.lose_answers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Every claim call takes `delay` (of tokio's time) before it reaches the store.
    pub(crate) fn slow_claims(&self, delay: Duration) {
        *self.claim_delay.lock().unwrap() = delay;
    }

    /// Makes every `complete` take `delay` before it reaches the inner store (a
    /// finalize slower than the claims).
    pub(crate) fn slow_completes(&self, delay: Duration) {
        *self.complete_delay.lock().unwrap() = delay;
    }

    /// While true, the store declares no optional capability.
    pub(crate) fn declare_nothing(&self, plain: bool) {
        self.plain.store(plain, Ordering::SeqCst);
    }

    /// While true, every `renew` call waits on a `Notify` nobody fires.
    pub(crate) fn hang_renewals(&self, hang: bool) {
        self.hang_renew.store(hang, Ordering::SeqCst);
    }

    /// Lets every parked `renew` go on to the inner store, and parks no more.
    pub(crate) fn unpark_renewals(&self) {
        self.hang_renew.store(false, Ordering::SeqCst);
        self.parked.notify_waiters();
    }

    /// While true, every claim takes one item more than asked (a broken store).
    pub(crate) fn greedy_claims(&self, greedy: bool) {
        self.greedy.store(greedy, Ordering::SeqCst);
    }

    /// A copy of the calls so far.
    pub(crate) fn calls(&self) -> Calls {
        self.log().clone()
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap()
    }
}

tenure_core::forward_store! {
    impl<S: Store> Store for Probe<S> {
        forward self => self.inner;

        fn capabilities(&self) -> tenure_core::Capabilities {
            if self.plain.load(Ordering::SeqCst) {
                return tenure_core::Capabilities::default();
            }
            self.inner.capabilities()
        }

        fn wake_signal(&self) -> Option<WakeSignal> {
            if let Some(signal) = self.wake.lock().unwrap().clone() {
                return Some(signal);
            }
            self.inner.wake_signal()
        }

        async fn claim(&self, mut params: ClaimParams) -> Result<Vec<Lease>> {
            let at = Instant::now();
            let out_now = self.claims_out.fetch_add(1, Ordering::SeqCst) + 1;
            {
                let mut log = self.log();
                log.claims_out_max = log.claims_out_max.max(out_now);
            }
            if self
                .panic_claims
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                self.claims_out.fetch_sub(1, Ordering::SeqCst);
                panic!("the probe's claim panics");
            }
            let delay = *self.claim_delay.lock().unwrap();
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            self.claims_out.fetch_sub(1, Ordering::SeqCst);
            let asked = params.limit;
            if self
                .fail_claims
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                self.log().claims.push((at, asked, 0));
                return Err(tenure_core::Error::unavailable(
                    "probe",
                    "the store is down",
                ));
            }
            if self.greedy.load(Ordering::SeqCst) {
                params.limit += 1;
            }
            let out = self.inner.claim(params).await;
            let got = out.as_ref().map(Vec::len).unwrap_or(0);

            let mut log = self.log();
            log.claims.push((at, asked, got));
            log.leases_out += got;
            log.leases_out_max = log.leases_out_max.max(log.leases_out);
            drop(log);
            out
        }

        async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
            {
                let mut log = self.log();
                log.renews.push((Instant::now(), params.tokens.len()));
                log.renewed_tokens.extend(params.tokens.iter().copied());
            }
            if self.hang_renew.load(Ordering::SeqCst) {
                self.parked.notified().await;
            }
            self.inner.renew(params).await
        }

        async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
            {
                let mut log = self.log();
                log.completes.push((Instant::now(), params.tokens.len()));
            }
            if self
                .panic_completes
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                panic!("the probe's complete panics");
            }
            let delay = *self.complete_delay.lock().unwrap();
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if self
                .out_of_order
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Ok(vec![TokenOutcome::OutOfOrder; params.tokens.len()]);
            }
            let tokens = params.tokens.len();
            let out = self.inner.complete(params).await;
            if out.is_ok() {
                let mut log = self.log();
                log.leases_out = log.leases_out.saturating_sub(tokens);
            }
            if out.is_ok() && self.answer_lost() {
                return Err(tenure_core::Error::unavailable(
                    "probe",
                    "connection lost after commit",
                ));
            }
            out
        }

        async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>> {
            {
                let mut log = self.log();
                log.fails.push((Instant::now(), params.failures.len()));
            }
            let out = self.inner.fail(params).await;
            if out.is_ok() && self.answer_lost() {
                return Err(tenure_core::Error::unavailable(
                    "probe",
                    "connection lost after commit",
                ));
            }
            out
        }

        async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
            {
                let mut log = self.log();
                log.releases.push(params.tokens.len());
                log.released_tokens.extend(params.tokens.iter().copied());
            }
            self.inner.release(params).await
        }

        async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered> {
            self.log().recovers += 1;
            self.inner.recover_expired(params).await
        }

        async fn purge(&self, params: PurgeParams) -> Result<Purged> {
            self.log().purges += 1;
            self.inner.purge(params).await
        }

        async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
            self.log().heartbeats.push(Instant::now());
            self.inner.instance_heartbeat(params).await
        }

        async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted> {
            self.log().evicts += 1;
            self.inner.instance_evict_stale(params).await
        }
    }
}

/// What a test handler saw: (attempt, stalls, stop reason, when it returned).
pub(crate) type Seen = Arc<Mutex<Vec<(u32, u32, Option<tenure_runtime::StopReason>, Instant)>>>;

/// Advances paused time in small steps until `cond` holds, failing after `max`.
pub(crate) async fn until(max: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + max;
    while !cond() {
        assert!(Instant::now() < end, "condition not met within {max:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

pub(crate) async fn item(store: &impl Store, id: ItemId) -> Item {
    store.item_get(id).await.unwrap().expect("item exists")
}

/// Milliseconds between consecutive instants.
pub(crate) fn gaps_ms(at: &[Instant]) -> Vec<u128> {
    at.windows(2).map(|w| (w[1] - w[0]).as_millis()).collect()
}
