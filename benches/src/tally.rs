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

use tenure_core::{ClaimParams, CompleteParams, ItemId, Lease, Store, TokenOutcome};

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

tenure_core::forward_store! {
    impl<S: Store> Store for Tallied<S> {
        forward self => self.inner;

        async fn claim(&self, params: ClaimParams) -> tenure_core::Result<Vec<Lease>> {
            let started = Instant::now();
            let leases = self.inner.claim(params).await?;
            if !leases.is_empty() {
                self.tally.record_claim(started.elapsed());
            }
            Ok(leases)
        }

        async fn complete(
            &self,
            params: CompleteParams,
        ) -> tenure_core::Result<Vec<TokenOutcome>> {
            let ids: Vec<ItemId> = params.tokens.iter().map(|t| t.id).collect();
            let outcomes = self.inner.complete(params).await?;
            self.tally.record_complete(&ids, &outcomes);
            Ok(outcomes)
        }
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
