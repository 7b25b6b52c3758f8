//! Exactly-once accounting for any run: [`Tallied`] wraps a store, and every answer its
//! `complete` gives is counted per item in a shared [`Tally`], beside the wall time of
//! every non-empty claim and a timeline of finished items.
//!
//! The wrapper changes nothing the store does: every method is handed on as it came.
//! Because it sits under whatever drives the store (a [`drain`](crate::drain) loop or a
//! `Worker`), the same check covers both: [`Tally::check`] compares the items that
//! finished with the items seeded, and reports any finished twice, never, or not seeded
//! at all.
//!
//! ```no_run
//! # async fn run() -> Result<(), tenure_benches::BenchError> {
//! use tenure_benches::tally::Tallied;
//! use tenure_benches::{bench_queue, drain, seed_ids, DrainSpec};
//! use tenure_memory::MemoryStore;
//!
//! let store = Tallied::new(MemoryStore::default());
//! let ids = seed_ids(&store, &bench_queue()?, 1_000).await?;
//! drain(&store, &DrainSpec::new(bench_queue()?, 1_000, 100, 4)).await?;
//! let check = store.tally().check(&ids);
//! assert!(check.holds(), "{check}");
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tenure_core::{
    async_trait, Capabilities, ClaimParams, CompleteParams, DeregisterParams, DiscardParams,
    EnqueueParams, Enqueued, EvictParams, Evicted, FailOutcome, FailParams, HeartbeatParams,
    Instance, Item, ItemId, LeaderParams, LeaderStatus, Lease, Limits, PurgeParams, Purged,
    QueueCounts, QueueName, RecoverParams, Recovered, ReleaseParams, RenewOutcome, RenewParams,
    RequeueParams, Store, TokenOutcome, WakeSignal,
};

/// Shards of the per-item counts, so concurrent `complete` calls rarely share a lock.
const SHARDS: usize = 64;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// What the stores answered during one run, counted as the answers came.
#[derive(Debug)]
pub struct Tally {
    epoch: Instant,
    accepted: Vec<Mutex<HashMap<ItemId, u32>>>,
    total: AtomicU64,
    refused: AtomicU64,
    claims: Mutex<Vec<(u64, u64)>>,
    timeline: Mutex<Vec<(u64, u32)>>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally::new()
    }
}

impl Tally {
    /// Nothing counted yet; the timeline starts now.
    pub fn new() -> Self {
        Tally {
            epoch: Instant::now(),
            accepted: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            total: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            claims: Mutex::new(Vec::new()),
            timeline: Mutex::new(Vec::new()),
        }
    }

    fn shard(&self, id: &ItemId) -> &Mutex<HashMap<ItemId, u32>> {
        // The last bytes of a UUID v7 are random.
        let i = usize::from(id.as_bytes()[15]) % SHARDS;
        &self.accepted[i]
    }

    /// Counts the answers of one `complete` call, token by token.
    pub fn record_complete(&self, ids: &[ItemId], outcomes: &[TokenOutcome]) {
        let mut accepted = 0u32;
        for (id, outcome) in ids.iter().zip(outcomes) {
            if *outcome == TokenOutcome::Accepted {
                *lock(self.shard(id)).entry(*id).or_insert(0) += 1;
                accepted += 1;
            } else {
                self.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
        if accepted > 0 {
            let at = micros(self.epoch.elapsed());
            lock(&self.timeline).push((at, accepted));
            self.total.fetch_add(u64::from(accepted), Ordering::Relaxed);
        }
    }

    /// Records the wall time of one non-empty claim call.
    pub fn record_claim(&self, took: Duration) {
        let at = micros(self.epoch.elapsed());
        lock(&self.claims).push((at, micros(took)));
    }

    /// `complete` answers `Accepted` so far, over all items.
    pub fn finished(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// `complete` answers other than `Accepted` so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The wall time of every non-empty claim so far, in microseconds, in the order
    /// the calls returned.
    pub fn claim_latencies(&self) -> Vec<u64> {
        lock(&self.claims).iter().map(|(_, took)| *took).collect()
    }

    /// Every non-empty claim so far as `(when it returned, its wall time)`, both in
    /// microseconds (the first on the timeline's clock), in the order the calls
    /// returned.
    pub fn claim_samples(&self) -> Vec<(u64, u64)> {
        lock(&self.claims).clone()
    }

    /// Every accepted `complete` call so far: when it returned (microseconds since the
    /// tally was made) and how many items it finished.
    pub fn timeline(&self) -> Vec<(u64, u32)> {
        lock(&self.timeline).clone()
    }

    /// Microseconds since the tally was made, on the timeline's clock.
    pub fn now_us(&self) -> u64 {
        micros(self.epoch.elapsed())
    }

    /// Compares the items finished with `expected`, the items the run seeded.
    pub fn check(&self, expected: &[ItemId]) -> ExactlyOnce {
        let mut seen: HashMap<ItemId, u32> = HashMap::with_capacity(expected.len());
        for shard in &self.accepted {
            seen.extend(lock(shard).iter().map(|(id, n)| (*id, *n)));
        }
        let mut check = ExactlyOnce {
            expected: expected.len() as u64,
            refused: self.refused(),
            ..ExactlyOnce::default()
        };
        for id in expected {
            match seen.remove(id) {
                None => check.lost += 1,
                Some(1) => check.finished += 1,
                Some(_) => {
                    check.finished += 1;
                    check.twice += 1;
                }
            }
        }
        check.unknown = seen.len() as u64;
        check
    }
}

/// What [`Tally::check`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExactlyOnce {
    /// Items the run seeded.
    pub expected: u64,
    /// Of those, items `complete` accepted at least once.
    pub finished: u64,
    /// Of those, items `complete` accepted more than once.
    pub twice: u64,
    /// Items seeded that `complete` never accepted.
    pub lost: u64,
    /// Items `complete` accepted that the run never seeded.
    pub unknown: u64,
    /// `complete` answers other than `Accepted`.
    pub refused: u64,
}

impl ExactlyOnce {
    /// True when every seeded item finished exactly once, nothing else finished, and
    /// no `complete` was refused.
    pub fn holds(&self) -> bool {
        self.finished == self.expected
            && self.twice == 0
            && self.lost == 0
            && self.unknown == 0
            && self.refused == 0
    }
}

/// `N of N finished exactly once` or what went wrong.
impl fmt::Display for ExactlyOnce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} items finished, {} more than once, {} never, {} not seeded, {} completes refused",
            self.finished, self.expected, self.twice, self.lost, self.unknown, self.refused
        )
    }
}

/// A store whose `complete` answers and claim times are counted in a [`Tally`]; every
/// call is handed to the inner store unchanged.
#[derive(Clone, Debug)]
pub struct Tallied<S> {
    inner: S,
    tally: Arc<Tally>,
}

impl<S: Store> Tallied<S> {
    /// Wraps `inner` with a new tally.
    pub fn new(inner: S) -> Self {
        Tallied {
            inner,
            tally: Arc::new(Tally::new()),
        }
    }

    /// The tally shared by every clone of this handle.
    pub fn tally(&self) -> &Arc<Tally> {
        &self.tally
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

#[async_trait]
impl<S: Store> Store for Tallied<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn limits(&self) -> Limits {
        self.inner.limits()
    }
    fn wake_signal(&self) -> Option<WakeSignal> {
        self.inner.wake_signal()
    }
    async fn enqueue(&self, params: EnqueueParams) -> tenure_core::Result<Vec<Enqueued>> {
        self.inner.enqueue(params).await
    }
    async fn claim(&self, params: ClaimParams) -> tenure_core::Result<Vec<Lease>> {
        let started = Instant::now();
        let leases = self.inner.claim(params).await?;
        if !leases.is_empty() {
            self.tally.record_claim(started.elapsed());
        }
        Ok(leases)
    }
    async fn renew(&self, params: RenewParams) -> tenure_core::Result<Vec<RenewOutcome>> {
        self.inner.renew(params).await
    }
    async fn complete(&self, params: CompleteParams) -> tenure_core::Result<Vec<TokenOutcome>> {
        let ids: Vec<ItemId> = params.tokens.iter().map(|t| t.id).collect();
        let outcomes = self.inner.complete(params).await?;
        self.tally.record_complete(&ids, &outcomes);
        Ok(outcomes)
    }
    async fn fail(&self, params: FailParams) -> tenure_core::Result<Vec<FailOutcome>> {
        self.inner.fail(params).await
    }
    async fn release(&self, params: ReleaseParams) -> tenure_core::Result<Vec<TokenOutcome>> {
        self.inner.release(params).await
    }
    async fn recover_expired(&self, params: RecoverParams) -> tenure_core::Result<Recovered> {
        self.inner.recover_expired(params).await
    }
    async fn purge(&self, params: PurgeParams) -> tenure_core::Result<Purged> {
        self.inner.purge(params).await
    }
    async fn dead_requeue(&self, params: RequeueParams) -> tenure_core::Result<u64> {
        self.inner.dead_requeue(params).await
    }
    async fn dead_discard(&self, params: DiscardParams) -> tenure_core::Result<u64> {
        self.inner.dead_discard(params).await
    }
    async fn item_get(&self, id: ItemId) -> tenure_core::Result<Option<Item>> {
        self.inner.item_get(id).await
    }
    async fn queue_counts(&self, queue: &QueueName) -> tenure_core::Result<QueueCounts> {
        self.inner.queue_counts(queue).await
    }
    async fn instance_heartbeat(&self, params: HeartbeatParams) -> tenure_core::Result<()> {
        self.inner.instance_heartbeat(params).await
    }
    async fn instance_list(&self) -> tenure_core::Result<Vec<Instance>> {
        self.inner.instance_list().await
    }
    async fn instance_evict_stale(&self, params: EvictParams) -> tenure_core::Result<Evicted> {
        self.inner.instance_evict_stale(params).await
    }
    async fn instance_deregister(&self, params: DeregisterParams) -> tenure_core::Result<Evicted> {
        self.inner.instance_deregister(params).await
    }
    async fn leader_acquire(&self, params: LeaderParams) -> tenure_core::Result<LeaderStatus> {
        self.inner.leader_acquire(params).await
    }
    async fn leader_resign(&self, params: LeaderParams) -> tenure_core::Result<bool> {
        self.inner.leader_resign(params).await
    }
    async fn leader_get(
        &self,
        name: &tenure_core::LeaderName,
    ) -> tenure_core::Result<Option<tenure_core::LeaderInfo>> {
        self.inner.leader_get(name).await
    }

    async fn item_list(
        &self,
        params: tenure_core::ItemListParams,
    ) -> tenure_core::Result<tenure_core::ItemPage> {
        self.inner.item_list(params).await
    }
    async fn lease_list(
        &self,
        params: tenure_core::LeaseListParams,
    ) -> tenure_core::Result<tenure_core::LeasePage> {
        self.inner.lease_list(params).await
    }
    async fn queue_list(&self) -> tenure_core::Result<Vec<tenure_core::QueueName>> {
        self.inner.queue_list().await
    }
    async fn item_cancel(
        &self,
        params: tenure_core::CancelParams,
    ) -> tenure_core::Result<Vec<tenure_core::CancelOutcome>> {
        self.inner.item_cancel(params).await
    }
    async fn queue_pause(&self, params: tenure_core::PauseParams) -> tenure_core::Result<bool> {
        self.inner.queue_pause(params).await
    }
    async fn queue_resume(&self, params: tenure_core::PauseParams) -> tenure_core::Result<bool> {
        self.inner.queue_resume(params).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_names_items_finished_twice_never_or_not_seeded() {
        let tally = Tally::new();
        let ids: Vec<ItemId> = (0..4).map(|_| ItemId::new()).collect();
        let stranger = ItemId::new();
        let ok = TokenOutcome::Accepted;
        tally.record_complete(&[ids[0], ids[1]], &[ok, ok]);
        tally.record_complete(&[ids[1], stranger], &[ok, ok]);
        tally.record_complete(&[ids[2]], &[TokenOutcome::LeaseLost]);
        let check = tally.check(&ids);
        assert_eq!(
            check,
            ExactlyOnce {
                expected: 4,
                finished: 2,
                twice: 1,
                lost: 2,
                unknown: 1,
                refused: 1,
            }
        );
        assert!(!check.holds());
        assert_eq!(tally.finished(), 4);
    }

    #[test]
    fn the_check_holds_when_each_seeded_item_finished_once() {
        let tally = Tally::new();
        let ids: Vec<ItemId> = (0..100).map(|_| ItemId::new()).collect();
        for chunk in ids.chunks(7) {
            tally.record_complete(chunk, &vec![TokenOutcome::Accepted; chunk.len()]);
        }
        let check = tally.check(&ids);
        assert!(check.holds(), "{check}");
        let timeline = tally.timeline();
        assert_eq!(
            timeline.iter().map(|(_, n)| *n as usize).sum::<usize>(),
            100
        );
    }
}
