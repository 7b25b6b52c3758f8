//! The suite proves it can fail: it passes against the memory store, and each
//! deliberately broken wrapper around that store fails the group of the guarantee it
//! breaks. This tells flaws in a store from flaws in the suite.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_conformance::{
    cases, run_all, run_case, Capability, Case, CaseResult, Env, Harness, Report, Status, Verdict,
};
use tenure_conformance::{Restore, Snapshot, Unreachable};
use tenure_core::{
    async_trait, Capabilities, ClaimParams, CompleteParams, DeregisterParams, DiscardParams,
    EnqueueParams, Enqueued, Error, EvictParams, Evicted, FailOutcome, FailParams, HeartbeatParams,
    Instance, Item, ItemId, ItemState, LeaderInfo, LeaderName, LeaderParams, LeaderStatus, Lease,
    LeaseToken, Limits, ManualClock, PurgeParams, Purged, QueueCounts, QueueName, RecoverParams,
    Recovered, ReleaseParams, RenewOutcome, RenewParams, RequeueParams, Result, Retry, Schedule,
    ScopeKey, Store, StreamKey, TokenOutcome, WakeSignal, MAX_ATTEMPTS_LIMIT,
};
use tenure_core::{
    CancelOutcome, CancelParams, Clock, Cursor, DeadFilter, DedupKey, ItemListParams, ItemPage,
    LeaseListParams, LeasePage, ListState, OwnerId, PauseParams, MAX_PAGE,
};
use tenure_core::{
    DeferParams, FairnessKey, LimitKey, LimitsParams, QueueLimits, Rate, Timestamp, MAX_CONCURRENCY,
};
use tenure_memory::{MemorySnapshot, MemoryStore};

// ---------------------------------------------------------------------------------------
// The honest harness.

/// Fresh memory stores; `keep_done` chooses whether finished items are kept.
struct MemoryHarness {
    keep_done: bool,
    unreachable: bool,
}

#[async_trait]
impl Harness for MemoryHarness {
    type Store = MemoryStore;

    async fn open(&self, clock: ManualClock) -> Result<MemoryStore> {
        Ok(MemoryStore::new(clock).keep_done(self.keep_done))
    }

    async fn open_peer(&self, store: &MemoryStore, _clock: ManualClock) -> Result<MemoryStore> {
        Ok(store.clone())
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<MemoryStore>> {
        if !self.unreachable {
            return Ok(Unreachable::not_offered(
                "this harness keeps its store reachable",
            ));
        }
        let store = MemoryStore::new(clock);
        store.set_available(false);
        Ok(Unreachable::Store(store))
    }

    async fn snapshot(&self, store: &MemoryStore) -> Result<Snapshot> {
        rewind(store)
    }
}

/// The honest harness without [`Harness::snapshot`]: a third party's harness that has
/// not written one.
struct WithoutSnapshots(MemoryHarness);

#[async_trait]
impl Harness for WithoutSnapshots {
    type Store = MemoryStore;

    async fn open(&self, clock: ManualClock) -> Result<MemoryStore> {
        self.0.open(clock).await
    }

    async fn open_peer(&self, store: &MemoryStore, clock: ManualClock) -> Result<MemoryStore> {
        self.0.open_peer(store, clock).await
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<MemoryStore>> {
        self.0.open_unreachable(clock).await
    }
}

// ---------------------------------------------------------------------------------------
// The broken wrappers: every Store method delegates to a MemoryStore, with one flaw.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flaw {
    /// Completes whatever attempt is current, whatever the token says (breaks G3).
    IgnoresAttemptOnComplete,
    /// Fences renew, complete, fail and release on `(id, attempt)` alone, not the
    /// lease id: after a failover that lost a claim, the lost lease's token validates
    /// the new lease of the same attempt number (breaks G3).
    FencesOnTheAttemptOnly,
    /// Hands a still-running item to a second claimer (breaks G1).
    HandsOneItemToTwoClaimers,
    /// Drops the scope key on enqueue, showing it again on reads (breaks G10).
    IgnoresScope,
    /// Drops the stream key on enqueue, showing it again on reads (breaks G9).
    IgnoresStreamOrder,
    /// Raises every item's renewal cap out of reach, showing the real cap on reads (G4).
    NoRenewalCap,
    /// Makes every item due at once (breaks G7).
    ClaimsFutureItems,
    /// Answers Follower when the backend is unreachable (breaks G13).
    FollowerWhenUnreachable,
    /// Writes an enqueue item by item, so a bad item leaves earlier ones written (G15).
    WritesBeforeValidating,
    /// Loses the answer of a claim that reclaimed an expired item (breaks G2).
    LosesReclaimedLeases,
    /// Retries at once, whatever the delay (breaks G5).
    IgnoresRetryDelay,
    /// Raises every item's stall cap out of reach (breaks G6).
    IgnoresMaxStalls,
    /// Treats every item as priority 0 (breaks G8).
    IgnoresPriority,
    /// Drops dedup keys on enqueue (breaks G11).
    IgnoresDedupKeys,
    /// Never evicts anyone (breaks G12).
    NeverEvicts,
    /// Declares partitioned claiming but claims as if no partitioning were asked (G14).
    IgnoresPartitions,
    /// Does not declare partitioned claiming, yet serves partitioned claims as ordinary
    /// ones instead of refusing them (G14's mandatory case).
    ClaimsAllWithoutThePartitionCapability,
    /// Keys streams by queue and stream, so a stream's order and pin stop at its queue
    /// (breaks G9 and G14 across queues).
    StreamsPerQueue,
    /// Keys scopes by queue and scope, so a busy scope is free in other queues (G10).
    ScopesPerQueue,
    /// Records a dedup key for the last queue that used it, forgetting the other
    /// queue's item (G11 across queues).
    DedupKeyOwnedByLastQueue,
    /// Answers a batch of renew, complete, fail or release in the order of the item
    /// ids, not of the tokens (G3 in batches).
    BatchAnswersInIdOrder,
    /// Finalizes every token of a batch of more than one by the item's current
    /// attempt, whatever the token says (G3 in batches).
    BatchesIgnoreTheAttempt,
    /// Fences a batch of more than one token on `(id, attempt)` alone, not the lease
    /// id, while single tokens are fenced in full (G3 in batches: the held-out store
    /// of issue 27).
    BatchesFenceOnTheAttemptOnly,
    /// Leases every claim for 30 s, whatever was asked (G2).
    FixedClaimLease,
    /// Renews every lease for 30 s, whatever was asked (G4).
    FixedRenewLease,
    /// Leases the leader lease for 15 s, whatever was asked (G13).
    FixedLeaderLease,
    /// Evicts by the default 30 s silence, whatever was asked (G12).
    FixedStaleAfter,
    /// Recovers every expired lease in one pass, whatever the limit (G2).
    IgnoresRecoverLimit,
    /// Claims one item more than the limit asks (G8).
    ClaimLimitOffByOne,
    /// Purges every expired key in one pass, whatever the limit (G11).
    IgnoresPurgeLimit,
    /// Delays every delayed item by 60 s, whatever was asked (G7).
    FixedDelay,
    /// Writes a `run_at` outside the schedule window, clamped to its edge (G15).
    ClampsRunAtIntoTheWindow,
    /// Writes a delay longer than the schedule window, clamped to it (G15).
    ClampsLongDelays,
    /// Reads only as many queue names of a claim as the limit allows (G15).
    TruncatesTheQueueList,
    /// Declares stream runs but claims heads only, whatever run is asked (G9).
    IgnoresStreamRuns,
    /// Does not declare stream runs, yet serves them (G9's mandatory runs case).
    RunsWithoutTheCapability,
    /// Counts a whole run as one lease against the claim's limit (G9).
    CountsARunAsOneLease,
    /// Leaves the later items of a run running after an earlier one fails or is
    /// released, as a store without the put-back rule would (G9).
    LeavesTheRunRunning,
    /// Counts a stall on every item of an expired or evicted run, not only on its head,
    /// as a store recovering each item on its own would (G9).
    StallsTheRunBehindItsHead,
    /// Lets the stream's next item be claimed once the items behind a run's head
    /// complete, while the head still runs, as a store promoting a new head on every
    /// complete would (G9).
    FreesTheStreamBehindARunningHead,
    /// Answers an out-of-order complete of a run's item as accepted, as a store that
    /// does not check the stream's order would (G9).
    AcceptsRunItemsOutOfOrder,
    /// Drops the pin of an enqueue (G14).
    IgnoresEnqueuePins,
    /// Lists from the start whatever cursor it is given (breaks paging).
    ListingIgnoresTheCursor,
    /// Lists scheduled items with the ready ones (breaks the split by state).
    ListsScheduledAsReady,
    /// Reports no pause flag and no oldest age in the counts.
    CountsWithoutPauseOrAge,
    /// Cancels a running item too, by failing and discarding it.
    CancelsRunningItems,
    /// Answers a pause but never applies it.
    IgnoresPause,
    /// Keeps a pause in the handle that paused, so claims through other handles onto
    /// the same data go on (breaks the pause race).
    PausesOnlyItsOwnHandle,
    /// Requeues and discards dead items by filter whatever their age.
    FilterIgnoresAge,
    /// Reads the leader by taking the lease and giving it back when nobody holds it,
    /// so every read of a free lease raises its term (G13).
    ReadsTheLeaderByAcquiring,
    /// Reads the last holder it saw acquire the lease, expired or resigned (G13).
    ReadsAnExpiredLeader,
    /// Reads no leader when the backend is unreachable (G13).
    NoLeaderWhenUnreachable,
    /// Cancels by reading the item, then deleting it if it was ready when read, even
    /// when a claim leased it in between (breaks the cancel race).
    CancelChecksThenDeletes,
    /// Measures the oldest due wait from the enqueue, not from `run_at`.
    OldestAgeFromEnqueue,
    /// Lists a queue's items with those of every queue whose name begins with its name.
    ListsQueuesByNamePrefix,
    /// Leaves expired leases that nobody recovered out of the lease listing.
    LeaseListHidesExpired,
    /// Takes a filter's dead items in enqueue order, not by when they died.
    DeadFilterByEnqueueOrder,
    /// Lists only the queues with a ready (due) or dead item, and the paused ones, as a
    /// store reading only its ready and dead indexes would: a queue whose items are all
    /// scheduled or running is missing.
    QueueListSkipsScheduledAndRunningQueues,
    /// Continues a lease listing strictly after the last expiry of the page, as a
    /// cursor holding the expiry alone would: leases sharing that expiry are skipped.
    LeaseCursorByExpiryOnly,
    /// Keeps listing an item enqueued with a delay as scheduled once it is due, until a
    /// claim takes it, as a store listing scheduled items from a set that only a claim
    /// moves them out of would.
    ListsDelayedItemsAsScheduledOnceDue,
    /// Grants one attempt on a filtered requeue, whatever `additional_attempts` says.
    FilteredRequeueGrantsOneAttempt,
    /// Discards dead items by filter without letting their streams move on, as a
    /// store deleting the matching rows without promoting the next head would.
    FilteredDiscardLeavesTheStreamBlocked,
    /// Takes an item by a filter's `older_than` only once it has been dead for longer
    /// than that, not at exactly that age.
    DeadFilterAgeIsStrict,
    /// Cancels an item behind its stream's head without taking it out of the stream,
    /// so the stream stops where it was.
    CancelLeavesAHoleInItsStream,
    /// Forgets the dedup keys of discarded dead items, as a store deleting an item's
    /// key with it would.
    DiscardForgetsDedupKeys,
    /// Purges every kept finished item, whatever its age (on a store keeping them).
    PurgeIgnoresKeepDoneFor,
    /// Deregisters only registered instances: an owner that is not registered keeps
    /// its leases, as a store returning early when the instance is unknown would.
    DeregisterSkipsUnregisteredOwners,
    /// Counts no finished items, though it keeps them as `done`.
    CountsNoFinishedItems,
    /// Cancels a kept finished item like a ready one (deleting it, answering
    /// `Cancelled`), as a cancel of every item that is neither running nor dead would.
    CancelDeletesKeptFinishedItems,
    /// Passes over the expired leases of paused queues in recovery, as a recovery
    /// going through the claim path's queue filter would.
    RecoveryPassesOverPausedQueues,
    /// Takes a filter's dead items that died at one instant latest enqueued first.
    DeadFilterTiesNewestFirst,
    /// Checks a dead filter's limit but not its age: an age over ten years is taken as
    /// ten years instead of refused.
    FilterSkipsTheAgeBound,
    /// Lets a claim that overlaps another read the running counts from before the
    /// other's, as two claimers reading one snapshot do (pg-boss's "may be slightly
    /// exceeded"; G16 under concurrent claims).
    ConcurrentClaimsShareOneCount,
    /// Gives a keyed lease's slot back once half its lease has passed without a
    /// finish, as a limiter trusting a heartbeat would (G16, a crashed holder).
    FreesTheSlotAtHalfTheLease,
    /// Gives a slot back on a release or fail before checking the token, so a
    /// superseded lease's refused finish still frees one (Solid Queue #761; G16).
    StaleFinishFreesASlot,
    /// Fences the completes of keyed items on `(id, attempt)` alone, so a claim lost in
    /// a failover completes its successor and frees its slot (G16).
    FencesLimitedItemsOnTheAttemptOnly,
    /// Answers nothing to a small claim that would pass a saturated key over for
    /// another key's item, as a claim stopping at its first blocked candidate would
    /// (head-of-line blocking; G16).
    WaitsBehindASaturatedKey,
    /// Applies the per-key default to every key, overrides ignored (G16).
    IgnoresKeyOverrides,
    /// Ignores the queue-wide concurrency limit (G16).
    IgnoresQueueConcurrency,
    /// Applies a queue's first limits only: later changes are answered and dropped (G16).
    IgnoresLimitChanges,
    /// Clamps out-of-range limits into range and writes them instead of refusing (G15
    /// for limits; G16).
    ClampsBadLimits,
    /// Forgets a rate's starts at every multiple of its period, as a counter in fixed
    /// windows does: up to twice the rate in a window that straddles two (G17).
    RatesInFixedWindows,
    /// Counts a per-key rate over the whole queue (G17).
    KeyRateCountsTheWholeQueue,
    /// Ignores the queue-wide rate (G17).
    IgnoresQueueRate,
    /// Answers a deferral and forgets it (G17).
    IgnoresDeferrals,
    /// Files the first item of a tenant that arrives while others wait under the
    /// tenant with the most items, so a newcomer waits out that backlog (G18).
    ANewTenantJoinsTheLongestLine,
    /// Ignores the weights a queue configures, serving every tenant by the weight its
    /// items declare (G18).
    IgnoresConfiguredWeights,
    /// Keeps fair shares by limit key where an item has one, so a tenant spread over
    /// many limit keys gets a share per key (G18).
    FairSharesByLimitKey,
}

impl Flaw {
    /// The flaws of queue limits, whose claims and finishes go through
    /// [`Flawed::limit_claim`] and its kin.
    fn of_limits(self) -> bool {
        matches!(
            self,
            Flaw::ConcurrentClaimsShareOneCount
                | Flaw::FreesTheSlotAtHalfTheLease
                | Flaw::StaleFinishFreesASlot
                | Flaw::FencesLimitedItemsOnTheAttemptOnly
                | Flaw::WaitsBehindASaturatedKey
                | Flaw::IgnoresKeyOverrides
                | Flaw::IgnoresQueueConcurrency
                | Flaw::IgnoresLimitChanges
                | Flaw::ClampsBadLimits
                | Flaw::RatesInFixedWindows
                | Flaw::KeyRateCountsTheWholeQueue
                | Flaw::IgnoresQueueRate
                | Flaw::IgnoresDeferrals
                | Flaw::ANewTenantJoinsTheLongestLine
                | Flaw::IgnoresConfiguredWeights
                | Flaw::FairSharesByLimitKey
        )
    }
}

/// What the wrapper hid from the inner store, to show it again on reads.
#[derive(Debug, Default)]
struct Hidden {
    scopes: HashMap<ItemId, ScopeKey>,
    streams: HashMap<ItemId, StreamKey>,
    renewals: HashMap<ItemId, u32>,
    stalls: HashMap<ItemId, u32>,
    dedup_keys: HashMap<ItemId, DedupKey>,
    /// Per dedup key, the queue that last used it and how often it changed hands.
    dedup_owner: HashMap<String, (QueueName, u32)>,
    handed: Vec<Lease>,
    /// Leases of items behind the head of a run, in claim order.
    tails: Vec<Lease>,
    /// Tail leases shown as still running after an earlier item of their run left.
    kept: HashMap<ItemId, Lease>,
    /// Every lease of a run of two or more, in claim order.
    runs: Vec<Lease>,
    /// Stalls shown on top of the real ones.
    extra_stalls: HashMap<ItemId, u32>,
    local_pauses: HashSet<QueueName>,
    /// Every stream's items in enqueue order.
    stream_order: HashMap<StreamKey, Vec<ItemId>>,
    /// Items a claim never takes (their stream is stuck behind them).
    held_back: HashSet<ItemId>,
    /// Per queue and dedup key, how often the key was forgotten.
    key_generation: HashMap<(QueueName, String), u32>,
    /// Items enqueued with a delay and not claimed since.
    delayed: HashSet<ItemId>,
    /// Items shown as deleted though the inner store keeps them.
    gone: HashSet<ItemId>,
    /// Items shown as they were before an operation the inner store applied.
    frozen: HashMap<ItemId, Item>,
    /// The last holder told Leader, per lease name.
    leaders: HashMap<LeaderName, LeaderInfo>,
    /// Every keyed item's queue and limit key, and the keyed items in enqueue order.
    limit_keys: HashMap<ItemId, (QueueName, LimitKey)>,
    limit_order: Vec<ItemId>,
    /// Limits as the caller set them, per queue.
    configs: HashMap<QueueName, QueueLimits>,
    /// Keyed leases handed out, with the instant of their claim.
    keyed_leases: Vec<(Lease, Timestamp)>,
    /// Per queue, the fixed window the last claim fell in.
    windows: HashMap<QueueName, u64>,
    /// Claims in flight, across handles.
    claims_in_flight: usize,
    /// Items enqueued per queue and tenant.
    tenants: HashMap<(QueueName, Option<FairnessKey>), usize>,
}

#[derive(Clone, Debug)]
struct Flawed {
    inner: MemoryStore,
    clock: ManualClock,
    flaw: Flaw,
    hidden: Arc<Mutex<Hidden>>,
}

impl Flawed {
    fn hidden(&self) -> std::sync::MutexGuard<'_, Hidden> {
        self.hidden
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Shows the item as the caller enqueued it.
    fn restore(&self, item: &mut Item) {
        let hidden = self.hidden();
        if let Some(s) = hidden.scopes.get(&item.id) {
            item.scope = Some(s.clone());
        }
        if let Some(s) = hidden.streams.get(&item.id) {
            item.stream = Some(s.clone());
        }
        if let Some(&n) = hidden.renewals.get(&item.id) {
            item.max_renewals = n;
        }
        if let Some(&n) = hidden.stalls.get(&item.id) {
            item.max_stalls = n;
        }
        if let Some(k) = hidden.dedup_keys.get(&item.id) {
            item.dedup_key = Some(k.clone());
        }
        if let Some(&n) = hidden.extra_stalls.get(&item.id) {
            item.stalls += n;
        }
    }

    /// With [`Flaw::DeadFilterByEnqueueOrder`], the ids a filter takes when the
    /// items are taken in enqueue order (the filter validated first, and left in
    /// place when invalid so the store refuses it).
    async fn dead_in_enqueue_order(
        &self,
        filter: &mut Option<DeadFilter>,
    ) -> Result<Option<Vec<ItemId>>> {
        let Some(f) = filter.as_ref() else {
            return Ok(None);
        };
        if self.flaw != Flaw::DeadFilterByEnqueueOrder || f.validate(&self.limits()).is_err() {
            return Ok(None);
        }
        let ids = self
            .dead_matching(f)
            .await?
            .into_iter()
            .take(f.limit as usize)
            .map(|i| i.id)
            .collect();
        *filter = None;
        Ok(Some(ids))
    }

    /// The dead items of `f`'s queue old enough for it, in enqueue order.
    async fn dead_matching(&self, f: &DeadFilter) -> Result<Vec<Item>> {
        let dead = self
            .inner
            .item_list(ItemListParams::new(f.queue.clone(), ListState::Dead).limit(MAX_PAGE))
            .await?;
        let before = f.dead_before(self.clock.now());
        Ok(dead
            .items
            .into_iter()
            .filter(|i| i.updated_at <= before)
            .collect())
    }

    /// With [`Flaw::DeadFilterTiesNewestFirst`], the ids a filter takes when items that
    /// died at one instant go latest enqueued first (the filter validated first, and
    /// left in place when invalid so the store refuses it). With
    /// [`Flaw::FilterSkipsTheAgeBound`], an age over ten years becomes ten years.
    async fn dead_ties_newest_first(
        &self,
        filter: &mut Option<DeadFilter>,
    ) -> Result<Option<Vec<ItemId>>> {
        let Some(f) = filter.as_mut() else {
            return Ok(None);
        };
        if self.flaw == Flaw::FilterSkipsTheAgeBound {
            let ten_years = Duration::from_secs(10 * 366 * 24 * 60 * 60);
            if f.older_than.is_some_and(|a| a > ten_years) {
                f.older_than = Some(ten_years);
            }
        }
        if self.flaw != Flaw::DeadFilterTiesNewestFirst || f.validate(&self.limits()).is_err() {
            return Ok(None);
        }
        let mut matching: Vec<(usize, Item)> = self
            .dead_matching(f)
            .await?
            .into_iter()
            .enumerate()
            .collect();
        matching.sort_by_key(|(n, i)| (i.updated_at, std::cmp::Reverse(*n)));
        let ids = matching
            .into_iter()
            .take(f.limit as usize)
            .map(|(_, i)| i.id)
            .collect();
        *filter = None;
        Ok(Some(ids))
    }

    /// With [`Flaw::BatchesIgnoreTheAttempt`], a batch's tokens rewritten to the items'
    /// current attempts.
    async fn current_attempts(&self, tokens: &mut [LeaseToken]) -> Result<()> {
        if self.flaw == Flaw::FencesOnTheAttemptOnly
            || (self.flaw == Flaw::BatchesFenceOnTheAttemptOnly && tokens.len() > 1)
        {
            for token in tokens {
                if let Some(item) = self.inner.item_get(token.id).await? {
                    if item.state == ItemState::Running && item.attempt == token.attempt {
                        *token = item.token();
                    }
                }
            }
            return Ok(());
        }
        if self.flaw != Flaw::BatchesIgnoreTheAttempt || tokens.len() < 2 {
            return Ok(());
        }
        for token in tokens {
            if let Some(item) = self.inner.item_get(token.id).await? {
                if item.state == ItemState::Running {
                    *token = item.token();
                }
            }
        }
        Ok(())
    }

    /// For [`Flaw::LeavesTheRunRunning`]: the items of a run behind `failed` are shown
    /// as still running under their lease.
    async fn keep_tails_behind(&self, failed: &[LeaseToken]) -> Result<()> {
        if self.flaw != Flaw::LeavesTheRunRunning {
            return Ok(());
        }
        for t in failed {
            let Some(item) = self.inner.item_get(t.id).await? else {
                continue;
            };
            if !(item.state == ItemState::Running && item.attempt == t.attempt) {
                continue;
            }
            let mut hidden = self.hidden();
            let from = hidden.tails.iter().position(|l| l.token.id == t.id);
            let later: Vec<Lease> = hidden
                .tails
                .iter()
                .enumerate()
                .filter(|(j, l)| {
                    l.item.stream == item.stream && from.is_none_or(|p| *j > p) && l.token != *t
                })
                .map(|(_, l)| l.clone())
                .collect();
            for l in later {
                hidden.kept.insert(l.token.id, l);
            }
        }
        Ok(())
    }

    /// With [`Flaw::BatchAnswersInIdOrder`], sorts a batch by item id (and answers in
    /// that order).
    fn id_order<T>(&self, batch: &mut [T], id: impl Fn(&T) -> ItemId) {
        if self.flaw == Flaw::BatchAnswersInIdOrder {
            batch.sort_by_key(|t| id(t));
        }
    }

    /// For [`Flaw::FreesTheStreamBehindARunningHead`]: before an item behind its
    /// run's head completes, the earlier items of its run that still run are completed
    /// underneath (so the stream moves on) and kept, shown as still running.
    async fn free_the_stream_behind(&self, tokens: &[LeaseToken]) -> Result<()> {
        if self.flaw != Flaw::FreesTheStreamBehindARunningHead {
            return Ok(());
        }
        for t in tokens {
            let earlier: Vec<Lease> = {
                let hidden = self.hidden();
                let Some(at) = hidden.runs.iter().position(|l| l.token == *t) else {
                    continue;
                };
                let stream = hidden.runs[at].item.stream.clone();
                hidden.runs[..at]
                    .iter()
                    .filter(|l| l.item.stream == stream && !hidden.kept.contains_key(&l.token.id))
                    .cloned()
                    .collect()
            };
            for l in earlier {
                let live = self
                    .inner
                    .item_get(l.token.id)
                    .await?
                    .is_some_and(|i| i.state == ItemState::Running && i.token() == l.token);
                if live {
                    self.inner
                        .complete(CompleteParams::new(vec![l.token]))
                        .await?;
                    self.hidden().kept.insert(l.token.id, l);
                }
            }
        }
        Ok(())
    }

    /// The queues the inner store has paused.
    async fn paused_queues(&self) -> Result<Vec<QueueName>> {
        let mut out = Vec::new();
        for q in self.inner.queue_list().await? {
            if self.inner.queue_counts(&q).await?.paused {
                out.push(q);
            }
        }
        Ok(out)
    }

    /// With [`Flaw::DeadFilterAgeIsStrict`], a filter's age one tick longer.
    fn strict_age(&self, filter: &mut Option<DeadFilter>) {
        if self.flaw != Flaw::DeadFilterAgeIsStrict {
            return;
        }
        if let Some(f) = filter {
            if let Some(age) = f.older_than {
                f.older_than = Some(age + Duration::from_micros(1));
            }
        }
    }

    /// For [`Flaw::FilteredDiscardLeavesTheStreamBlocked`] and
    /// [`Flaw::CancelLeavesAHoleInItsStream`]: the items of `stream` enqueued after `id`
    /// are never claimed again.
    fn hold_back_behind(&self, stream: &StreamKey, id: ItemId) {
        let mut hidden = self.hidden();
        let later: Vec<ItemId> = hidden
            .stream_order
            .get(stream)
            .map(|order| {
                order
                    .iter()
                    .skip_while(|&&i| i != id)
                    .skip(1)
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        hidden.held_back.extend(later);
    }

    /// The dead items a discard may delete, read before it (for
    /// [`Flaw::FilteredDiscardLeavesTheStreamBlocked`] and
    /// [`Flaw::DiscardForgetsDedupKeys`]).
    async fn discard_candidates(&self, params: &DiscardParams) -> Result<Vec<Item>> {
        if !matches!(
            self.flaw,
            Flaw::FilteredDiscardLeavesTheStreamBlocked | Flaw::DiscardForgetsDedupKeys
        ) {
            return Ok(Vec::new());
        }
        if let Some(f) = &params.filter {
            let dead = self
                .inner
                .item_list(ItemListParams::new(f.queue.clone(), ListState::Dead).limit(MAX_PAGE))
                .await?;
            return Ok(dead.items);
        }
        let mut out = Vec::new();
        for &id in &params.ids {
            out.extend(self.inner.item_get(id).await?);
        }
        Ok(out)
    }

    /// After a discard: what the flaw does to the candidates it deleted.
    async fn after_discard(&self, candidates: Vec<Item>, by_filter: bool) -> Result<()> {
        for it in candidates {
            if self.inner.item_get(it.id).await?.is_some() {
                continue;
            }
            match self.flaw {
                Flaw::FilteredDiscardLeavesTheStreamBlocked if by_filter => {
                    if let Some(s) = &it.stream {
                        self.hold_back_behind(s, it.id);
                    }
                }
                Flaw::DiscardForgetsDedupKeys => {
                    let mut hidden = self.hidden();
                    if let Some(k) = hidden.dedup_keys.get(&it.id).cloned() {
                        *hidden
                            .key_generation
                            .entry((it.queue.clone(), k.to_string()))
                            .or_default() += 1;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// For [`Flaw::StallsTheRunBehindItsHead`]: every tail put back by recovery or
    /// eviction is shown with a stall of its own; returns how many.
    async fn stall_put_back_tails(&self) -> Result<u64> {
        if self.flaw != Flaw::StallsTheRunBehindItsHead {
            return Ok(0);
        }
        let tails = std::mem::take(&mut self.hidden().tails);
        let mut stalled = 0;
        let mut still = Vec::new();
        for l in tails {
            match self.inner.item_get(l.token.id).await? {
                Some(i) if i.state == ItemState::Ready && i.attempt == l.token.attempt => {
                    *self.hidden().extra_stalls.entry(l.token.id).or_default() += 1;
                    stalled += 1;
                }
                _ => still.push(l),
            }
        }
        self.hidden().tails = still;
        Ok(stalled)
    }
}

#[async_trait]
impl Store for Flawed {
    fn name(&self) -> &'static str {
        "flawed-memory"
    }

    fn capabilities(&self) -> Capabilities {
        if self.flaw == Flaw::ClaimsAllWithoutThePartitionCapability {
            return Capabilities::default();
        }
        if self.flaw == Flaw::RunsWithoutTheCapability {
            return Capabilities::default().with_partitioned_claiming();
        }
        self.inner.capabilities()
    }

    fn limits(&self) -> Limits {
        self.inner.limits()
    }

    fn wake_signal(&self) -> Option<WakeSignal> {
        self.inner.wake_signal()
    }

    async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
        if self.flaw.of_limits() {
            for item in &mut params.items {
                match self.flaw {
                    Flaw::FairSharesByLimitKey => {
                        if let Some(k) = &item.limit_key {
                            item.fairness_key = Some(FairnessKey::new(k.as_str())?);
                        }
                    }
                    Flaw::ANewTenantJoinsTheLongestLine => {
                        let mut h = self.hidden();
                        let seen = h
                            .tenants
                            .contains_key(&(item.queue.clone(), item.fairness_key.clone()));
                        let longest = h
                            .tenants
                            .iter()
                            .filter(|((q, _), _)| *q == item.queue)
                            .max_by_key(|(_, n)| **n)
                            .map(|((_, t), n)| (t.clone(), *n));
                        *h.tenants
                            .entry((item.queue.clone(), item.fairness_key.clone()))
                            .or_default() += 1;
                        if let (false, Some((t, n))) = (seen, longest) {
                            if n > 1 {
                                item.fairness_key = t;
                            }
                        }
                    }
                    _ => {}
                }
            }
            let out = self.inner.enqueue(params.clone()).await?;
            let mut h = self.hidden();
            for (item, told) in params.items.iter().zip(&out) {
                if let (Some(k), false) = (&item.limit_key, told.duplicate) {
                    h.limit_keys
                        .insert(item.id, (item.queue.clone(), k.clone()));
                    h.limit_order.push(item.id);
                }
            }
            return Ok(out);
        }
        if self.flaw == Flaw::IgnoresEnqueuePins {
            params.pin_to = None;
        }
        for item in &mut params.items {
            if matches!(
                self.flaw,
                Flaw::FilteredDiscardLeavesTheStreamBlocked | Flaw::CancelLeavesAHoleInItsStream
            ) {
                if let Some(s) = &item.stream {
                    let mut hidden = self.hidden();
                    hidden
                        .stream_order
                        .entry(s.clone())
                        .or_default()
                        .push(item.id);
                }
            }
            match self.flaw {
                Flaw::ListsDelayedItemsAsScheduledOnceDue => {
                    let later = match item.schedule {
                        Schedule::After(d) => d > Duration::ZERO,
                        Schedule::At(t) => t > self.clock.now(),
                        Schedule::Now => false,
                    };
                    if later {
                        self.hidden().delayed.insert(item.id);
                    }
                }
                Flaw::DiscardForgetsDedupKeys => {
                    if let Some(k) = item.dedup_key.take() {
                        let mut hidden = self.hidden();
                        let generation = hidden
                            .key_generation
                            .get(&(item.queue.clone(), k.to_string()))
                            .copied()
                            .unwrap_or(0);
                        item.dedup_key = Some(if generation == 0 {
                            k.clone()
                        } else {
                            DedupKey::new(format!("{k}#{generation}"))?
                        });
                        hidden.dedup_keys.insert(item.id, k);
                    }
                }
                Flaw::IgnoresScope => {
                    if let Some(s) = item.scope.take() {
                        self.hidden().scopes.insert(item.id, s);
                    }
                }
                Flaw::IgnoresStreamOrder => {
                    if let Some(s) = item.stream.take() {
                        self.hidden().streams.insert(item.id, s);
                    }
                }
                Flaw::NoRenewalCap if item.max_renewals <= MAX_ATTEMPTS_LIMIT => {
                    self.hidden().renewals.insert(item.id, item.max_renewals);
                    item.max_renewals = MAX_ATTEMPTS_LIMIT;
                }
                Flaw::IgnoresMaxStalls if item.max_stalls <= MAX_ATTEMPTS_LIMIT => {
                    self.hidden().stalls.insert(item.id, item.max_stalls);
                    item.max_stalls = MAX_ATTEMPTS_LIMIT;
                }
                Flaw::ClaimsFutureItems => item.schedule = Schedule::Now,
                Flaw::IgnoresPriority => item.priority = 0,
                Flaw::IgnoresDedupKeys => item.dedup_key = None,
                Flaw::StreamsPerQueue => {
                    if let Some(s) = item.stream.take() {
                        item.stream = Some(StreamKey::new(format!("{}/{s}", item.queue))?);
                        self.hidden().streams.insert(item.id, s);
                    }
                }
                Flaw::ScopesPerQueue => {
                    if let Some(s) = item.scope.take() {
                        item.scope = Some(ScopeKey::new(format!("{}/{s}", item.queue))?);
                        self.hidden().scopes.insert(item.id, s);
                    }
                }
                Flaw::DedupKeyOwnedByLastQueue => {
                    if let Some(k) = item.dedup_key.take() {
                        let mut hidden = self.hidden();
                        let owner = hidden
                            .dedup_owner
                            .entry(k.to_string())
                            .or_insert((item.queue.clone(), 0));
                        if owner.0 != item.queue {
                            *owner = (item.queue.clone(), owner.1 + 1);
                        }
                        item.dedup_key = Some(DedupKey::new(format!("{k}#{}", owner.1))?);
                        hidden.dedup_keys.insert(item.id, k);
                    }
                }
                Flaw::ClampsRunAtIntoTheWindow => {
                    let (window, now) = (self.limits().schedule_window, self.clock.now());
                    if let Schedule::At(t) = item.schedule {
                        item.schedule = Schedule::At(t.clamp(now - window, now + window));
                    }
                }
                Flaw::FixedDelay => {
                    if let Schedule::After(d) = item.schedule {
                        if d > Duration::ZERO {
                            item.schedule = Schedule::After(Duration::from_secs(60));
                        }
                    }
                }
                Flaw::ClampsLongDelays => {
                    let window = self.limits().schedule_window;
                    if let Schedule::After(d) = item.schedule {
                        item.schedule = Schedule::After(d.min(window));
                    }
                }
                _ => {}
            }
        }
        if self.flaw == Flaw::WritesBeforeValidating && !params.items.is_empty() {
            let mut answers = Vec::new();
            for item in params.items {
                answers.extend(self.inner.enqueue(EnqueueParams::one(item)).await?);
            }
            return Ok(answers);
        }
        self.inner.enqueue(params).await
    }

    async fn claim(&self, mut params: ClaimParams) -> Result<Vec<Lease>> {
        if self.flaw.of_limits() {
            return self.limit_claim(params).await;
        }
        if matches!(
            self.flaw,
            Flaw::IgnoresPartitions | Flaw::ClaimsAllWithoutThePartitionCapability
        ) {
            params.partitioning = None;
        }
        if self.flaw == Flaw::IgnoresStreamRuns {
            params.stream_run = 1;
        }
        if self.flaw == Flaw::CountsARunAsOneLease && params.stream_run > 1 {
            params.limit = (params.limit * params.stream_run).min(1_000);
        }
        let limit = params.limit as usize;
        let owner = params.owner.clone();
        if self.flaw == Flaw::PausesOnlyItsOwnHandle {
            let local = self.hidden().local_pauses.clone();
            params.queues.retain(|q| !local.contains(q));
            if params.queues.is_empty() {
                return Ok(Vec::new());
            }
        }
        match self.flaw {
            Flaw::FixedClaimLease => params.lease_for = Duration::from_secs(30),
            Flaw::ClaimLimitOffByOne => params.limit += 1,
            Flaw::TruncatesTheQueueList => {
                params.queues.truncate(self.limits().max_claim_queues);
            }
            _ => {}
        }
        let mut leases = self.inner.claim(params).await?;
        if self.flaw == Flaw::LosesReclaimedLeases {
            leases.retain(|l| l.token.attempt == 1);
        }
        if self.flaw == Flaw::HandsOneItemToTwoClaimers {
            let earlier = {
                let mut hidden = self.hidden();
                let earlier = hidden.handed.clone();
                hidden.handed.extend(leases.iter().cloned());
                let keep_from = hidden.handed.len().saturating_sub(64);
                hidden.handed.drain(..keep_from);
                earlier
            };
            let mine: HashSet<ItemId> = leases.iter().map(|l| l.token.id).collect();
            for mut lease in earlier.into_iter().rev() {
                if leases.len() >= limit {
                    break;
                }
                let current = self.inner.item_get(lease.token.id).await?;
                let live = current
                    .is_some_and(|i| i.state == ItemState::Running && i.token() == lease.token);
                if live && !mine.contains(&lease.token.id) && lease.owner != owner {
                    lease.owner = owner.clone();
                    lease.item.owner = Some(owner.clone());
                    leases.push(lease);
                }
            }
        }
        if matches!(
            self.flaw,
            Flaw::LeavesTheRunRunning | Flaw::StallsTheRunBehindItsHead
        ) {
            let mut hidden = self.hidden();
            for pair in leases.windows(2) {
                if pair[1].item.stream.is_some() && pair[1].item.stream == pair[0].item.stream {
                    hidden.tails.push(pair[1].clone());
                }
            }
        }
        if self.flaw == Flaw::FreesTheStreamBehindARunningHead {
            let mut hidden = self.hidden();
            for (j, l) in leases.iter().enumerate() {
                let same = |k: Option<usize>| {
                    k.and_then(|k| leases.get(k))
                        .is_some_and(|o| l.item.stream.is_some() && o.item.stream == l.item.stream)
                };
                if same(j.checked_sub(1)) || same(Some(j + 1)) {
                    hidden.runs.push(l.clone());
                }
            }
        }
        if self.flaw == Flaw::ListsDelayedItemsAsScheduledOnceDue {
            let mut hidden = self.hidden();
            for l in &leases {
                hidden.delayed.remove(&l.token.id);
            }
        }
        let held: Vec<LeaseToken> = {
            let hidden = self.hidden();
            leases
                .iter()
                .filter(|l| hidden.held_back.contains(&l.token.id))
                .map(|l| l.token)
                .collect()
        };
        if !held.is_empty() {
            self.inner.release(ReleaseParams::new(held.clone())).await?;
            leases.retain(|l| !held.contains(&l.token));
        }
        for lease in &mut leases {
            self.restore(&mut lease.item);
        }
        Ok(leases)
    }

    async fn renew(&self, mut params: RenewParams) -> Result<Vec<RenewOutcome>> {
        if self.flaw == Flaw::FixedRenewLease {
            params.lease_for = Duration::from_secs(30);
        }
        self.current_attempts(&mut params.tokens).await?;
        self.id_order(&mut params.tokens, |t| t.id);
        self.inner.renew(params).await
    }

    async fn complete(&self, mut params: CompleteParams) -> Result<Vec<TokenOutcome>> {
        if self.flaw.of_limits() {
            self.attempt_only(&mut params.tokens).await?;
            return self.inner.complete(params).await;
        }
        self.current_attempts(&mut params.tokens).await?;
        self.id_order(&mut params.tokens, |t| t.id);
        if self.flaw == Flaw::IgnoresAttemptOnComplete {
            for token in &mut params.tokens {
                if let Some(item) = self.inner.item_get(token.id).await? {
                    if item.state == ItemState::Running {
                        *token = item.token();
                    }
                }
            }
        }
        self.free_the_stream_behind(&params.tokens).await?;
        if matches!(
            self.flaw,
            Flaw::LeavesTheRunRunning | Flaw::FreesTheStreamBehindARunningHead
        ) {
            let mut out = Vec::new();
            for t in params.tokens {
                let kept = self.hidden().kept.remove(&t.id);
                match kept {
                    Some(l) if l.token == t => out.push(TokenOutcome::Accepted),
                    _ => out.extend(self.inner.complete(CompleteParams::new(vec![t])).await?),
                }
            }
            return Ok(out);
        }
        let out = self.inner.complete(params).await?;
        if self.flaw == Flaw::AcceptsRunItemsOutOfOrder {
            return Ok(out
                .into_iter()
                .map(|o| match o {
                    TokenOutcome::OutOfOrder => TokenOutcome::Accepted,
                    o => o,
                })
                .collect());
        }
        Ok(out)
    }

    async fn fail(&self, mut params: FailParams) -> Result<Vec<FailOutcome>> {
        if self.flaw.of_limits() {
            let tokens: Vec<LeaseToken> = params.failures.iter().map(|f| f.token).collect();
            let out = self.inner.fail(params).await?;
            let refused: Vec<LeaseToken> = tokens
                .into_iter()
                .zip(&out)
                .filter(|(_, o)| **o == FailOutcome::LeaseLost)
                .map(|(t, _)| t)
                .collect();
            self.stale_frees(&refused).await?;
            return Ok(out);
        }
        if self.flaw == Flaw::IgnoresRetryDelay {
            for f in &mut params.failures {
                if let Retry::After(_) = f.retry {
                    f.retry = Retry::After(Duration::ZERO);
                }
            }
        }
        let mut tokens: Vec<LeaseToken> = params.failures.iter().map(|f| f.token).collect();
        self.keep_tails_behind(&tokens).await?;
        self.current_attempts(&mut tokens).await?;
        for (f, t) in params.failures.iter_mut().zip(tokens) {
            f.token = t;
        }
        self.id_order(&mut params.failures, |f| f.token.id);
        self.inner.fail(params).await
    }

    async fn release(&self, mut params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        if self.flaw.of_limits() {
            let tokens = params.tokens.clone();
            let out = self.inner.release(params).await?;
            let refused: Vec<LeaseToken> = tokens
                .into_iter()
                .zip(&out)
                .filter(|(_, o)| **o == TokenOutcome::LeaseLost)
                .map(|(t, _)| t)
                .collect();
            self.stale_frees(&refused).await?;
            return Ok(out);
        }
        self.keep_tails_behind(&params.tokens).await?;
        self.current_attempts(&mut params.tokens).await?;
        self.id_order(&mut params.tokens, |t| t.id);
        self.inner.release(params).await
    }

    async fn recover_expired(&self, mut params: RecoverParams) -> Result<Recovered> {
        if self.flaw == Flaw::IgnoresRecoverLimit {
            params.limit = 1_000;
        }
        let mut passed_over = Vec::new();
        if self.flaw == Flaw::RecoveryPassesOverPausedQueues {
            let now = self.clock.now();
            for q in self.paused_queues().await? {
                let running = self
                    .inner
                    .item_list(ItemListParams::new(q, ListState::Running).limit(MAX_PAGE))
                    .await?;
                passed_over.extend(
                    running
                        .items
                        .into_iter()
                        .filter(|i| i.lease_expires_at.is_some_and(|t| t <= now)),
                );
            }
        }
        let mut recovered = self.inner.recover_expired(params).await?;
        recovered.requeued += self.stall_put_back_tails().await?;
        for it in passed_over {
            recovered.requeued = recovered.requeued.saturating_sub(1);
            self.hidden().frozen.insert(it.id, it);
        }
        Ok(recovered)
    }

    async fn purge(&self, mut params: PurgeParams) -> Result<Purged> {
        if self.flaw == Flaw::IgnoresPurgeLimit {
            params.limit = 1_000;
        }
        if self.flaw == Flaw::PurgeIgnoresKeepDoneFor {
            params.keep_done_for = Duration::ZERO;
        }
        self.inner.purge(params).await
    }

    async fn dead_requeue(&self, mut params: RequeueParams) -> Result<u64> {
        if self.flaw == Flaw::FilteredRequeueGrantsOneAttempt
            && params.filter.is_some()
            && params.validate(&self.limits()).is_ok()
        {
            params.additional_attempts = 1;
        }
        self.strict_age(&mut params.filter);
        let chosen = match self.dead_ties_newest_first(&mut params.filter).await? {
            Some(ids) => Some(ids),
            None => self.dead_in_enqueue_order(&mut params.filter).await?,
        };
        if let Some(ids) = chosen {
            if ids.is_empty() {
                return Ok(0);
            }
            params.ids = ids;
            params.filter = None;
        }
        if self.flaw == Flaw::FilterIgnoresAge {
            if let Some(f) = &mut params.filter {
                *f = DeadFilter::new(f.queue.clone()).limit(f.limit);
            }
        }
        self.inner.dead_requeue(params).await
    }

    async fn dead_discard(&self, mut params: DiscardParams) -> Result<u64> {
        let chosen = match self.dead_ties_newest_first(&mut params.filter).await? {
            Some(ids) => Some(ids),
            None => self.dead_in_enqueue_order(&mut params.filter).await?,
        };
        if let Some(ids) = chosen {
            if ids.is_empty() {
                return Ok(0);
            }
            params.ids = ids;
            params.filter = None;
        }
        if self.flaw == Flaw::FilterIgnoresAge {
            if let Some(f) = &mut params.filter {
                *f = DeadFilter::new(f.queue.clone()).limit(f.limit);
            }
        }
        self.strict_age(&mut params.filter);
        let candidates = self.discard_candidates(&params).await?;
        let by_filter = params.filter.is_some();
        let n = self.inner.dead_discard(params).await?;
        self.after_discard(candidates, by_filter).await?;
        Ok(n)
    }

    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        if let Some(l) = self.hidden().kept.get(&id) {
            return Ok(Some(l.item.clone()));
        }
        if let Some(it) = self.hidden().frozen.get(&id) {
            return Ok(Some(it.clone()));
        }
        if self.hidden().gone.contains(&id) {
            return Ok(None);
        }
        let mut item = self.inner.item_get(id).await?;
        if let Some(item) = &mut item {
            self.restore(item);
        }
        Ok(item)
    }

    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
        let c = self.inner.queue_counts(queue).await?;
        if self.flaw == Flaw::PausesOnlyItsOwnHandle {
            let paused = self.hidden().local_pauses.contains(queue);
            return Ok(c.with_paused(paused));
        }
        if self.flaw == Flaw::CountsNoFinishedItems {
            let mut c = c;
            c.done = 0;
            return Ok(c);
        }
        if self.flaw == Flaw::CountsWithoutPauseOrAge {
            return Ok(c.with_paused(false).with_oldest_ready_age(None));
        }
        if self.flaw == Flaw::OldestAgeFromEnqueue {
            let due = self
                .inner
                .item_list(ItemListParams::new(queue.clone(), ListState::Ready).limit(MAX_PAGE))
                .await?;
            let now = self.clock.now();
            let oldest = due.items.iter().map(|i| i.created_at).min();
            return Ok(c.with_oldest_ready_age(oldest.map(|t| now.duration_since(t))));
        }
        Ok(c)
    }

    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        self.inner.instance_heartbeat(params).await
    }

    async fn instance_list(&self) -> Result<Vec<Instance>> {
        self.inner.instance_list().await
    }

    async fn instance_evict_stale(&self, mut params: EvictParams) -> Result<Evicted> {
        if self.flaw == Flaw::FixedStaleAfter {
            params.stale_after = Duration::from_secs(30);
        }
        if self.flaw == Flaw::NeverEvicts {
            params.validate(&self.limits())?;
            return Ok(Evicted::default());
        }
        let mut evicted = self.inner.instance_evict_stale(params).await?;
        evicted.released += self.stall_put_back_tails().await?;
        Ok(evicted)
    }

    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        if self.flaw == Flaw::DeregisterSkipsUnregisteredOwners
            && !self
                .inner
                .instance_list()
                .await?
                .iter()
                .any(|i| i.id == params.instance)
        {
            return Ok(Evicted::default());
        }
        self.inner.instance_deregister(params).await
    }

    async fn leader_acquire(&self, mut params: LeaderParams) -> Result<LeaderStatus> {
        if self.flaw == Flaw::FixedLeaderLease {
            params.lease_for = Duration::from_secs(15);
        }
        let holder = params.holder.clone();
        let name = params.name.clone();
        match self.inner.leader_acquire(params).await {
            Err(Error::Unavailable { .. }) if self.flaw == Flaw::FollowerWhenUnreachable => {
                Ok(LeaderStatus::Follower {
                    holder,
                    term: 0,
                    expires_at: tenure_core::Timestamp::EPOCH,
                })
            }
            Ok(LeaderStatus::Leader { term, expires_at }) => {
                self.hidden()
                    .leaders
                    .insert(name, LeaderInfo::new(holder, term, expires_at));
                Ok(LeaderStatus::Leader { term, expires_at })
            }
            other => other,
        }
    }

    async fn leader_resign(&self, params: LeaderParams) -> Result<bool> {
        self.inner.leader_resign(params).await
    }

    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        match self.flaw {
            Flaw::ReadsTheLeaderByAcquiring => {
                let me = OwnerId::new("leader-reader")?;
                let params = LeaderParams::new(name.clone(), me, self.limits().min_lease);
                match self.inner.leader_acquire(params.clone()).await? {
                    LeaderStatus::Follower {
                        holder,
                        term,
                        expires_at,
                    } => Ok(Some(LeaderInfo::new(holder, term, expires_at))),
                    LeaderStatus::Leader { .. } => {
                        self.inner.leader_resign(params).await?;
                        Ok(None)
                    }
                }
            }
            Flaw::ReadsAnExpiredLeader => {
                self.inner.leader_get(name).await?;
                Ok(self.hidden().leaders.get(name).cloned())
            }
            Flaw::NoLeaderWhenUnreachable => match self.inner.leader_get(name).await {
                Err(Error::Unavailable { .. }) => Ok(None),
                other => other,
            },
            _ => self.inner.leader_get(name).await,
        }
    }

    async fn item_list(&self, mut params: ItemListParams) -> Result<ItemPage> {
        if self.flaw == Flaw::ListsDelayedItemsAsScheduledOnceDue {
            match params.state {
                ListState::Ready => {
                    let mut page = self.inner.item_list(params).await?;
                    let delayed = self.hidden().delayed.clone();
                    page.items.retain(|i| !delayed.contains(&i.id));
                    return Ok(page);
                }
                ListState::Scheduled => {
                    let mut page = self.inner.item_list(params.clone()).await?;
                    let due = self
                        .inner
                        .item_list(
                            ItemListParams::new(params.queue, ListState::Ready).limit(MAX_PAGE),
                        )
                        .await?;
                    let delayed = self.hidden().delayed.clone();
                    page.items
                        .extend(due.items.into_iter().filter(|i| delayed.contains(&i.id)));
                    return Ok(page);
                }
                _ => {}
            }
        }
        if self.flaw == Flaw::ListingIgnoresTheCursor {
            params.cursor = None;
        }
        if self.flaw == Flaw::ListsScheduledAsReady && params.state == ListState::Ready {
            let mut page = self.inner.item_list(params.clone()).await?;
            let later = self
                .inner
                .item_list(ItemListParams::new(params.queue, ListState::Scheduled))
                .await?;
            page.items.extend(later.items);
            return Ok(page);
        }
        if self.flaw == Flaw::ListsQueuesByNamePrefix {
            let mut page = self.inner.item_list(params.clone()).await?;
            for other in self.inner.queue_list().await? {
                if other != params.queue && other.as_str().starts_with(params.queue.as_str()) {
                    let more = self
                        .inner
                        .item_list(ItemListParams::new(other, params.state).order(params.order))
                        .await?;
                    page.items.extend(more.items);
                }
            }
            return Ok(page);
        }
        self.inner.item_list(params).await
    }

    async fn lease_list(&self, params: LeaseListParams) -> Result<LeasePage> {
        if self.flaw == Flaw::LeaseCursorByExpiryOnly {
            params.validate(&self.limits())?;
            let after = match &params.cursor {
                Some(c) => Some(
                    c.as_str()
                        .strip_prefix("x.")
                        .and_then(|s| s.parse::<i64>().ok())
                        .ok_or_else(|| Error::invalid("cursor", "not a cursor of this store"))?,
                ),
                None => None,
            };
            let all = self
                .inner
                .lease_list(LeaseListParams::new(params.queue).limit(MAX_PAGE))
                .await?;
            let mut leases: Vec<_> = all
                .leases
                .into_iter()
                .filter(|l| after.is_none_or(|a| l.expires_at.as_micros() > a))
                .collect();
            let more = leases.len() > params.limit as usize;
            leases.truncate(params.limit as usize);
            let next = match (more, leases.last()) {
                (true, Some(l)) => Some(Cursor::new(format!("x.{}", l.expires_at.as_micros()))?),
                _ => None,
            };
            return Ok(LeasePage::new(leases, next, all.as_of));
        }
        let mut page = self.inner.lease_list(params).await?;
        if self.flaw == Flaw::LeaseListHidesExpired {
            let as_of = page.as_of;
            page.leases.retain(|l| l.expires_at > as_of);
        }
        Ok(page)
    }

    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        let all = self.inner.queue_list().await?;
        if self.flaw != Flaw::QueueListSkipsScheduledAndRunningQueues {
            return Ok(all);
        }
        let mut out = Vec::new();
        for q in all {
            let c = self.inner.queue_counts(&q).await?;
            if c.ready > 0 || c.dead > 0 || c.paused {
                out.push(q);
            }
        }
        Ok(out)
    }

    async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>> {
        if self.flaw == Flaw::CancelChecksThenDeletes {
            params.validate(&self.limits())?;
            let mut out = Vec::new();
            for &id in &params.ids {
                let seen = self.inner.item_get(id).await?;
                if seen.is_some_and(|i| i.state == ItemState::Ready) {
                    // The window between the read and the write, where a claim lands.
                    for _ in 0..8 {
                        tokio::task::yield_now().await;
                    }
                    match self.inner.item_get(id).await? {
                        Some(i) if i.state == ItemState::Running => {
                            let f = tenure_core::Failure::permanent(i.token(), "cancelled");
                            self.inner.fail(FailParams::one(f)).await?;
                            self.inner
                                .dead_discard(DiscardParams::new(vec![id]))
                                .await?;
                            out.push(CancelOutcome::Cancelled);
                            continue;
                        }
                        _ => {}
                    }
                }
                out.extend(self.inner.item_cancel(CancelParams::new(vec![id])).await?);
            }
            return Ok(out);
        }
        if self.flaw == Flaw::CancelsRunningItems {
            for &id in &params.ids {
                if let Some(item) = self.inner.item_get(id).await? {
                    if item.state == ItemState::Running {
                        let f = tenure_core::Failure::permanent(item.token(), "cancelled");
                        self.inner.fail(FailParams::one(f)).await?;
                        self.inner
                            .dead_discard(DiscardParams::new(vec![id]))
                            .await?;
                    }
                }
            }
            let mut out = self.inner.item_cancel(params).await?;
            for o in &mut out {
                if *o == CancelOutcome::NotFound {
                    *o = CancelOutcome::Cancelled;
                }
            }
            return Ok(out);
        }
        if self.flaw == Flaw::CancelDeletesKeptFinishedItems {
            params.validate(&self.limits())?;
            let mut out = Vec::new();
            for &id in &params.ids {
                let done = self
                    .inner
                    .item_get(id)
                    .await?
                    .is_some_and(|i| i.state == ItemState::Done);
                if done && self.hidden().gone.insert(id) {
                    out.push(CancelOutcome::Cancelled);
                    continue;
                }
                if self.hidden().gone.contains(&id) {
                    out.push(CancelOutcome::NotFound);
                    continue;
                }
                out.extend(self.inner.item_cancel(CancelParams::new(vec![id])).await?);
            }
            return Ok(out);
        }
        if self.flaw == Flaw::CancelLeavesAHoleInItsStream {
            // Which of the ids are ready items behind an unfinished earlier item of
            // their stream.
            let mut behind = Vec::new();
            for &id in &params.ids {
                let Some(it) = self.inner.item_get(id).await? else {
                    behind.push(None);
                    continue;
                };
                let Some(s) = it.stream.clone() else {
                    behind.push(None);
                    continue;
                };
                let order = self
                    .hidden()
                    .stream_order
                    .get(&s)
                    .cloned()
                    .unwrap_or_default();
                let mut earlier_unfinished = false;
                for &e in order.iter().take_while(|&&e| e != id) {
                    if self
                        .inner
                        .item_get(e)
                        .await?
                        .is_some_and(|i| i.state != ItemState::Done)
                    {
                        earlier_unfinished = true;
                    }
                }
                behind.push(earlier_unfinished.then_some(s));
            }
            let out = self.inner.item_cancel(params.clone()).await?;
            for ((o, s), &id) in out.iter().zip(behind).zip(&params.ids) {
                if let (CancelOutcome::Cancelled, Some(s)) = (o, s) {
                    self.hold_back_behind(&s, id);
                }
            }
            return Ok(out);
        }
        self.inner.item_cancel(params).await
    }

    async fn queue_pause(&self, params: PauseParams) -> Result<bool> {
        match self.flaw {
            Flaw::IgnoresPause => Ok(!self.inner.queue_counts(&params.queue).await?.paused),
            Flaw::PausesOnlyItsOwnHandle => Ok(self.hidden().local_pauses.insert(params.queue)),
            _ => self.inner.queue_pause(params).await,
        }
    }

    async fn queue_resume(&self, params: PauseParams) -> Result<bool> {
        if self.flaw == Flaw::PausesOnlyItsOwnHandle {
            return Ok(self.hidden().local_pauses.remove(&params.queue));
        }
        self.inner.queue_resume(params).await
    }

    async fn limits_set(&self, params: LimitsParams) -> Result<Option<QueueLimits>> {
        if self.flaw.of_limits() {
            return self.limit_set(params).await;
        }
        self.inner.limits_set(params).await
    }

    async fn limits_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        if self.flaw.of_limits() {
            return self.limit_get(queue).await;
        }
        self.inner.limits_get(queue).await
    }

    async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
        self.hidden().configs.remove(queue);
        self.inner.limits_clear(queue).await
    }

    async fn limits_list(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        self.inner.limits_list().await
    }

    async fn limits_defer(&self, params: DeferParams) -> Result<()> {
        if self.flaw == Flaw::IgnoresDeferrals {
            return params.validate(&self.limits());
        }
        self.inner.limits_defer(params).await
    }
}

// ---------------------------------------------------------------------------------------
// The flaws of queue limits (G16, G17).

impl Flawed {
    /// What the inner store is given for `limits`, with this flaw applied.
    fn inner_limits(&self, limits: &QueueLimits) -> QueueLimits {
        let mut l = limits.clone();
        match self.flaw {
            Flaw::IgnoresKeyOverrides => l.key_overrides.clear(),
            Flaw::IgnoresQueueConcurrency => l.concurrency = None,
            Flaw::IgnoresQueueRate => l.rate = None,
            Flaw::IgnoresConfiguredWeights => l.weights.clear(),
            Flaw::KeyRateCountsTheWholeQueue => {
                if let Some(r) = l.key_rate.take() {
                    l.rate = Some(r);
                }
            }
            _ => {}
        }
        l
    }

    async fn limit_set(&self, params: LimitsParams) -> Result<Option<QueueLimits>> {
        if self.flaw == Flaw::ClampsBadLimits && params.validate(&self.limits()).is_err() {
            let mut l = params.limits.clone();
            let clamp = |n: u32| n.clamp(1, MAX_CONCURRENCY);
            l.concurrency = l.concurrency.map(clamp);
            l.key_concurrency = l.key_concurrency.map(clamp);
            for n in l.key_overrides.values_mut() {
                *n = clamp(*n);
            }
            for r in l.rate.iter_mut().chain(l.key_rate.iter_mut()) {
                *r = Rate::new(r.starts.max(1), r.per.max(Duration::from_secs(1)));
            }
            return self
                .inner
                .limits_set(LimitsParams::new(params.queue, l))
                .await;
        }
        params.validate(&self.limits())?;
        let before = self.hidden().configs.get(&params.queue).cloned();
        if self.flaw == Flaw::IgnoresLimitChanges && before.is_some() {
            return Ok(before);
        }
        self.hidden()
            .configs
            .insert(params.queue.clone(), params.limits.clone());
        let inner = self.inner_limits(&params.limits);
        self.inner
            .limits_set(LimitsParams::new(params.queue, inner))
            .await?;
        Ok(before)
    }

    async fn limit_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        let shown = self.hidden().configs.get(queue).cloned();
        match shown {
            Some(l) if self.flaw != Flaw::ClampsBadLimits => Ok(Some(l)),
            _ => self.inner.limits_get(queue).await,
        }
    }

    /// A claim with one of the limit flaws.
    async fn limit_claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
        let now = self.clock.now();
        let config = params.queues.iter().find_map(|q| {
            self.hidden()
                .configs
                .get(q)
                .cloned()
                .map(|c| (q.clone(), c))
        });
        match (self.flaw, &config) {
            (Flaw::FreesTheSlotAtHalfTheLease, Some(_)) => {
                let old: Vec<Lease> = {
                    let mut h = self.hidden();
                    let (old, young): (Vec<_>, Vec<_>) =
                        h.keyed_leases.drain(..).partition(|(l, at)| {
                            (now.as_micros() - at.as_micros()) * 2
                                >= l.expires_at.as_micros() - at.as_micros()
                        });
                    h.keyed_leases = young;
                    old.into_iter().map(|(l, _)| l).collect()
                };
                for l in old {
                    self.inner
                        .release(ReleaseParams::new(vec![l.token]))
                        .await?;
                }
            }
            (Flaw::RatesInFixedWindows, Some((q, c))) => {
                if let Some(per) = c.key_rate.map(|r| r.per) {
                    let window = (now.as_micros() / per.as_micros() as i64) as u64;
                    let last = self.hidden().windows.insert(q.clone(), window);
                    if last.is_some_and(|w| w != window) {
                        self.inner.limits_clear(q).await?;
                        self.inner
                            .limits_set(LimitsParams::new(q.clone(), self.inner_limits(c)))
                            .await?;
                    }
                }
            }
            (Flaw::ConcurrentClaimsShareOneCount, Some((q, c))) => {
                self.hidden().claims_in_flight += 1;
                tokio::task::yield_now().await;
                let overlapping = self.hidden().claims_in_flight > 1;
                if overlapping {
                    // The counts this claim read did not see the other claim's.
                    let mut raised = c.clone();
                    raised.key_concurrency = raised.key_concurrency.map(|n| n * 8);
                    self.inner
                        .limits_set(LimitsParams::new(q.clone(), raised))
                        .await?;
                }
                let out = self.inner.claim(params).await;
                if overlapping {
                    self.inner
                        .limits_set(LimitsParams::new(q.clone(), c.clone()))
                        .await?;
                }
                self.hidden().claims_in_flight -= 1;
                return out;
            }
            _ => {}
        }
        let small = params.limit <= 2;
        let leases = self.inner.claim(params).await?;
        {
            let mut h = self.hidden();
            for l in &leases {
                if h.limit_keys.contains_key(&l.token.id) {
                    h.keyed_leases.push((l.clone(), now));
                }
            }
        }
        if self.flaw == Flaw::WaitsBehindASaturatedKey && small && config.is_some() {
            // Blocked: an earlier keyed item of another key still waits.
            let (order, keys) = {
                let h = self.hidden();
                (h.limit_order.clone(), h.limit_keys.clone())
            };
            for l in &leases {
                let mine = keys.get(&l.token.id).map(|(_, k)| k.clone());
                let pos = order.iter().position(|id| *id == l.token.id);
                let before: Vec<ItemId> = match pos {
                    Some(p) => order[..p].to_vec(),
                    None => order.clone(),
                };
                for id in before {
                    let other = keys.get(&id).map(|(_, k)| k.clone());
                    if other == mine {
                        continue;
                    }
                    let waiting = self
                        .inner
                        .item_get(id)
                        .await?
                        .is_some_and(|i| i.state == ItemState::Ready && i.run_at <= now);
                    if waiting {
                        let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
                        self.inner.release(ReleaseParams::new(tokens)).await?;
                        return Ok(Vec::new());
                    }
                }
            }
        }
        Ok(leases)
    }

    /// With [`Flaw::FencesLimitedItemsOnTheAttemptOnly`], keyed tokens rewritten to
    /// the items' current lease of the same attempt.
    async fn attempt_only(&self, tokens: &mut [LeaseToken]) -> Result<()> {
        if self.flaw != Flaw::FencesLimitedItemsOnTheAttemptOnly {
            return Ok(());
        }
        for t in tokens {
            if !self.hidden().limit_keys.contains_key(&t.id) {
                continue;
            }
            if let Some(item) = self.inner.item_get(t.id).await? {
                if item.state == ItemState::Running && item.attempt == t.attempt {
                    *t = item.token();
                }
            }
        }
        Ok(())
    }

    /// With [`Flaw::StaleFinishFreesASlot`], a slot given for each refused keyed token:
    /// the key's limit raised by one.
    async fn stale_frees(&self, refused: &[LeaseToken]) -> Result<()> {
        if self.flaw != Flaw::StaleFinishFreesASlot {
            return Ok(());
        }
        for t in refused {
            let keyed = self.hidden().limit_keys.get(&t.id).cloned();
            let Some((q, k)) = keyed else { continue };
            let Some(mut c) = self.inner.limits_get(&q).await? else {
                continue;
            };
            let n = c.key_limit(&k).unwrap_or(MAX_CONCURRENCY - 1) + 1;
            c.key_overrides.insert(k, n);
            self.inner.limits_set(LimitsParams::new(q, c)).await?;
        }
        Ok(())
    }
}

struct FlawedHarness(Flaw);

#[async_trait]
impl Harness for FlawedHarness {
    type Store = Flawed;

    async fn open(&self, clock: ManualClock) -> Result<Flawed> {
        Ok(Flawed {
            inner: MemoryStore::new(clock.clone()).keep_done(matches!(
                self.0,
                Flaw::PurgeIgnoresKeepDoneFor
                    | Flaw::CountsNoFinishedItems
                    | Flaw::CancelDeletesKeptFinishedItems
            )),
            clock,
            flaw: self.0,
            hidden: Arc::default(),
        })
    }

    async fn open_peer(&self, store: &Flawed, _clock: ManualClock) -> Result<Flawed> {
        let mut peer = store.clone();
        if self.0 == Flaw::PausesOnlyItsOwnHandle {
            peer.hidden = Arc::default();
        }
        Ok(peer)
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<Flawed>> {
        let store = self.open(clock).await?;
        store.inner.set_available(false);
        Ok(Unreachable::Store(store))
    }

    async fn snapshot(&self, store: &Flawed) -> Result<Snapshot> {
        Ok(rewind(&store.inner)?)
    }
}

/// A snapshot of a memory store that puts its data back (a forgetful failover).
fn rewind(store: &MemoryStore) -> Result<Snapshot> {
    struct Rewind(MemoryStore, MemorySnapshot);
    #[async_trait]
    impl Restore for Rewind {
        async fn restore(self: Box<Self>) -> Result<()> {
            self.0.restore(&self.1)
        }
    }
    Ok(Snapshot::taken(Rewind(store.clone(), store.snapshot()?)))
}

// ---------------------------------------------------------------------------------------
// The assertions.

/// Runs the whole suite against the flawed store: the group of the broken guarantee
/// must fail, and in it the case that names the behaviour most directly. Prints the
/// other groups it also failed.
async fn must_fail(flaw: Flaw, group: &str, case: &str) {
    let report = run_all(&FlawedHarness(flaw)).await;
    let failed = report.failed_groups();
    let in_group: Vec<&str> = report
        .failures()
        .filter(|f| f.group == group)
        .map(|f| f.case)
        .collect();
    eprintln!("{flaw:?}: failed groups {failed:?}; failed in {group}: {in_group:?}",);
    assert!(
        failed.contains(group),
        "{flaw:?} must fail {group}, but it failed only {failed:?}\n{report}"
    );
    assert!(
        in_group.contains(&case),
        "{flaw:?} must fail {group}::{case}; it failed {in_group:?}\n{report}"
    );
}

/// Like [`must_fail`], for a flaw the rest of the suite cannot see: `group::case` is
/// the one case it fails, so without that case the suite would pass it.
async fn must_fail_only(flaw: Flaw, group: &str, case: &str) {
    let report = run_all(&FlawedHarness(flaw)).await;
    let failed: Vec<(&str, &str)> = report.failures().map(|f| (f.group, f.case)).collect();
    eprintln!("{flaw:?}: failed {failed:?}");
    assert_eq!(
        failed,
        [(group, case)],
        "{flaw:?} must fail {group}::{case} and nothing else\n{report}"
    );
}

/// Like [`must_fail`], for a flaw that must fail every one of `in_cases` of `group`,
/// from one run.
async fn must_fail_each(flaw: Flaw, group: &str, in_cases: &[&str]) {
    let report = run_all(&FlawedHarness(flaw)).await;
    let in_group: Vec<&str> = report
        .failures()
        .filter(|f| f.group == group)
        .map(|f| f.case)
        .collect();
    eprintln!("{flaw:?}: failed in {group}: {in_group:?}");
    for case in in_cases {
        assert!(
            in_group.contains(case),
            "{flaw:?} must fail {group}::{case}; it failed {in_group:?}\n{report}"
        );
    }
}

fn assert_all_passed(report: &Report) {
    assert!(report.is_success(), "{report}");
    assert!(report.skipped().is_empty(), "{report}");
    assert_eq!(
        report.passed().len(),
        cases::<MemoryHarness>().len(),
        "{report}"
    );
}

mod memory_store {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn passes_every_case_deleting_finished_items() {
        let report = run_all(&MemoryHarness {
            keep_done: false,
            unreachable: true,
        })
        .await;
        assert_all_passed(&report);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn passes_every_case_keeping_finished_items() {
        let report = run_all(&MemoryHarness {
            keep_done: true,
            unreachable: true,
        })
        .await;
        assert_all_passed(&report);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_an_unreachable_store_the_fault_case_reports_did_not_apply() {
        let report = run_all(&MemoryHarness {
            keep_done: false,
            unreachable: false,
        })
        .await;
        assert!(report.is_success(), "{report}");
        assert_eq!(
            report.did_not_apply(),
            vec![
                "g13_leader::an_unreachable_store_is_an_error_never_a_follower".to_owned(),
                "g13_leader::reading_the_leader_of_an_unreachable_store_is_an_error_never_none"
                    .to_owned(),
            ],
        );
        assert!(
            report.to_string().contains("did not apply g13_leader::"),
            "{report}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_snapshots_the_forgetful_failover_is_not_certified_saying_why() {
        let report = run_all(&WithoutSnapshots(MemoryHarness {
            keep_done: false,
            unreachable: true,
        }))
        .await;
        assert!(report.is_success(), "{report}");
        assert_eq!(
            report.did_not_apply(),
            vec![
                "g03_fenced_finalize::a_claim_lost_in_a_failover_leaves_its_token_refused"
                    .to_owned(),
                "g16_concurrency_limits::a_claim_lost_in_a_failover_frees_no_slot_through_its_token"
                    .to_owned(),
            ],
        );
        let cert = report.certificate();
        assert!(!cert.is_complete(), "{cert}");
        assert_eq!(cert.not_certified.len(), 2, "{cert}");
        for (line, group) in cert
            .not_certified
            .iter()
            .zip(["g03_fenced_finalize: ", "g16_concurrency_limits: "])
        {
            assert!(
                line.starts_with(group) && line.contains("does not implement Harness::snapshot"),
                "{line}"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_an_unreachable_store_the_certificate_leaves_g13_uncertified_saying_why() {
        let report = run_all(&MemoryHarness {
            keep_done: false,
            unreachable: false,
        })
        .await;
        let cert = report.certificate();
        assert!(!cert.is_complete(), "{cert}");
        assert_eq!(cert.not_certified.len(), 1, "{cert}");
        let line = &cert.not_certified[0];
        assert!(line.starts_with("g13_leader: "), "{line}");
        assert!(
            line.contains("an_unreachable_store_is_an_error_never_a_follower")
                && line.contains("this harness keeps its store reachable"),
            "{line}"
        );
        assert!(!cert.groups_passed.contains(&"g13_leader"), "{cert}");
        assert_eq!(cert.groups_passed.len(), cert.groups - 1, "{cert}");
        let text = cert.to_string();
        assert!(text.contains("not certified:\n    g13_leader: "), "{text}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_run_certifies_every_group_naming_store_cases_and_capabilities() {
        let report = run_all(&MemoryHarness {
            keep_done: false,
            unreachable: true,
        })
        .await;
        let cert = report.certificate();
        assert!(cert.is_complete(), "{cert}");
        assert_eq!(cert.store, Some("memory"), "{cert}");
        assert_eq!(cert.groups_passed.len(), cert.groups, "{cert}");
        assert_eq!(cert.cases, cases::<MemoryHarness>().len(), "{cert}");
        assert_eq!(cert.passed, cert.cases, "{cert}");
        let caps = MemoryStore::new(ManualClock::default()).capabilities();
        assert!(caps.partitioned_claiming, "the memory store declares G14");
        assert!(
            cert.capabilities.contains(&"partitioned_claiming")
                && !cert.capabilities.contains(&"cross_process_wakeups"),
            "{cert}"
        );
        let text = cert.to_string();
        for want in [
            "memory store",
            &format!("groups passed: {0} of {0}", cert.groups),
            &format!("cases: {0} of {0} passed", cert.cases),
            &format!("capabilities declared: {}", cert.capabilities.join(", ")),
            "not certified: nothing",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failed_and_skipped_groups_are_not_certified_one_line_each() {
        // Breaks G10 across queues only.
        let report = run_all(&FlawedHarness(Flaw::ScopesPerQueue)).await;
        let cert = report.certificate();
        let g10: Vec<&String> = cert
            .not_certified
            .iter()
            .filter(|l| l.starts_with("g10_scope: "))
            .collect();
        assert_eq!(g10.len(), 1, "{cert}");
        assert!(
            g10[0].contains("failed")
                && g10[0].contains("a_busy_scope_is_passed_over_in_every_queue"),
            "{cert}"
        );
        let skipping = run_all(&FlawedHarness(Flaw::ClaimsAllWithoutThePartitionCapability)).await;
        let cert = skipping.certificate();
        assert!(cert.capabilities.is_empty(), "{cert}");
        assert!(
            cert.not_certified
                .iter()
                .any(|l| l.starts_with("g14_partitioned_claiming: ")
                    && l.contains("skipped: capability partitioned_claiming not declared")),
            "{cert}"
        );
    }
}

mod broken_wrappers {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fencing_on_the_attempt_alone_fails_g03_after_a_forgetful_failover() {
        must_fail(
            Flaw::FencesOnTheAttemptOnly,
            "g03_fenced_finalize",
            "a_claim_lost_in_a_failover_leaves_its_token_refused",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_the_attempt_on_complete_fails_g03() {
        must_fail(
            Flaw::IgnoresAttemptOnComplete,
            "g03_fenced_finalize",
            "stale_complete_after_a_reclaim_is_lease_lost_and_changes_nothing",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn handing_one_item_to_two_claimers_fails_g01() {
        must_fail(
            Flaw::HandsOneItemToTwoClaimers,
            "g01_exclusive_claim",
            "a_claimed_item_is_not_claimed_again_while_its_lease_is_live",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_scope_fails_g10() {
        must_fail(
            Flaw::IgnoresScope,
            "g10_scope",
            "a_busy_scope_is_passed_over_for_the_next_eligible_item",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_stream_order_fails_g09() {
        must_fail(
            Flaw::IgnoresStreamOrder,
            "g09_stream_fifo",
            "a_running_item_blocks_later_items_of_its_stream",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_renewal_cap_fails_g04() {
        must_fail(
            Flaw::NoRenewalCap,
            "g04_renewal_cap",
            "renewal_beyond_the_cap_is_refused_and_keeps_the_expiry",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claiming_future_items_fails_g07() {
        must_fail(
            Flaw::ClaimsFutureItems,
            "g07_schedule",
            "a_delayed_item_is_invisible_until_due",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answering_follower_when_unreachable_fails_g13() {
        must_fail(
            Flaw::FollowerWhenUnreachable,
            "g13_leader",
            "an_unreachable_store_is_an_error_never_a_follower",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reading_the_leader_by_taking_and_giving_back_its_lease_fails_g13() {
        must_fail_only(
            Flaw::ReadsTheLeaderByAcquiring,
            "g13_leader",
            "reading_the_leader_never_changes_its_holder_or_term",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reading_an_expired_holder_as_the_leader_fails_g13() {
        must_fail(
            Flaw::ReadsAnExpiredLeader,
            "g13_leader",
            "an_expired_or_resigned_lease_reads_as_no_leader",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reading_no_leader_when_unreachable_fails_g13() {
        must_fail_only(
            Flaw::NoLeaderWhenUnreachable,
            "g13_leader",
            "reading_the_leader_of_an_unreachable_store_is_an_error_never_none",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writing_before_validating_fails_g15() {
        must_fail(
            Flaw::WritesBeforeValidating,
            "g15_bad_input",
            "an_oversized_payload_names_payload_and_writes_nothing",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn losing_reclaimed_leases_fails_g02() {
        must_fail(
            Flaw::LosesReclaimedLeases,
            "g02_expiry",
            "an_expired_lease_is_reclaimed_with_the_next_attempt",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_the_retry_delay_fails_g05() {
        must_fail(
            Flaw::IgnoresRetryDelay,
            "g05_retry",
            "a_retryable_failure_waits_for_its_delay_keeping_the_attempt",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_max_stalls_fails_g06() {
        must_fail(
            Flaw::IgnoresMaxStalls,
            "g06_stalls",
            "dead_after_max_stalls_with_a_stalled_error",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_priority_fails_g08() {
        must_fail(
            Flaw::IgnoresPriority,
            "g08_order",
            "smaller_priority_goes_first",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_dedup_keys_fails_g11() {
        must_fail(
            Flaw::IgnoresDedupKeys,
            "g11_dedup",
            "a_second_enqueue_within_the_window_is_a_duplicate_of_the_first",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_partitions_fails_g14() {
        must_fail(
            Flaw::IgnoresPartitions,
            "g14_partitioned_claiming",
            "each_instance_takes_exactly_the_share_its_rank_gives_it",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serving_partitioned_claims_without_the_capability_fails_g14() {
        must_fail(
            Flaw::ClaimsAllWithoutThePartitionCapability,
            "g14_partitioned_claiming",
            "partitioned_claims_are_served_only_by_stores_that_declare_them",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_stream_runs_fails_g09() {
        must_fail(
            Flaw::IgnoresStreamRuns,
            "g09_stream_fifo",
            "a_run_leases_the_head_and_the_ready_items_behind_it_in_order",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_stream_runs_fails_the_zero_run_refusal_of_g09() {
        must_fail(
            Flaw::IgnoresStreamRuns,
            "g09_stream_fifo",
            "a_stream_run_of_zero_is_refused_naming_the_field",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serving_runs_without_the_capability_fails_g09() {
        must_fail(
            Flaw::RunsWithoutTheCapability,
            "g09_stream_fifo",
            "stream_runs_are_served_only_by_stores_that_declare_them",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn freeing_the_stream_behind_a_running_head_fails_g09() {
        must_fail(
            Flaw::FreesTheStreamBehindARunningHead,
            "g09_stream_fifo",
            "completing_an_item_of_a_run_before_the_items_ahead_of_it_is_refused_and_changes_nothing",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn accepting_a_run_out_of_order_fails_g09() {
        must_fail_each(
            Flaw::AcceptsRunItemsOutOfOrder,
            "g09_stream_fifo",
            &[
                "completing_an_item_of_a_run_before_the_items_ahead_of_it_is_refused_and_changes_nothing",
                "one_call_completes_a_run_in_stream_order_and_refuses_it_in_reverse",
            ],
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counting_a_run_as_one_lease_fails_g09() {
        must_fail(
            Flaw::CountsARunAsOneLease,
            "g09_stream_fifo",
            "a_run_counts_towards_the_claim_limit",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claiming_future_items_fails_the_run_stop_of_g09() {
        must_fail(
            Flaw::ClaimsFutureItems,
            "g09_stream_fifo",
            "a_run_stops_at_an_item_that_is_not_due_or_not_in_the_claimed_queues",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_scope_fails_the_run_stop_of_g09() {
        must_fail(
            Flaw::IgnoresScope,
            "g09_stream_fifo",
            "a_run_stops_at_an_item_whose_scope_is_busy",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leaving_a_run_running_after_a_failure_fails_g09() {
        must_fail(
            Flaw::LeavesTheRunRunning,
            "g09_stream_fifo",
            "a_failed_item_of_a_run_puts_every_later_item_back_untouched",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leaving_a_run_running_after_a_release_fails_g09() {
        must_fail(
            Flaw::LeavesTheRunRunning,
            "g09_stream_fifo",
            "a_released_item_of_a_run_puts_every_later_item_back_untouched",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stalling_a_whole_expired_run_fails_g09() {
        must_fail(
            Flaw::StallsTheRunBehindItsHead,
            "g09_stream_fifo",
            "an_expired_run_is_recovered_from_its_head_without_stalls_behind_it",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stalling_a_whole_evicted_run_fails_g09() {
        must_fail(
            Flaw::StallsTheRunBehindItsHead,
            "g09_stream_fifo",
            "evicting_the_owner_of_a_run_puts_the_items_behind_its_head_back_untouched",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_enqueue_pins_fails_g14() {
        must_fail(
            Flaw::IgnoresEnqueuePins,
            "g14_partitioned_claiming",
            "a_stream_pinned_at_enqueue_goes_only_to_the_enqueuing_instance_first_pin_winning",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_enqueue_pins_fails_the_unregistered_pin_refusal_of_g14() {
        must_fail(
            Flaw::IgnoresEnqueuePins,
            "g14_partitioned_claiming",
            "pinning_at_enqueue_to_an_unregistered_instance_is_refused_and_writes_nothing",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_enqueue_pins_fails_the_eviction_of_a_pin_of_g14() {
        must_fail(
            Flaw::IgnoresEnqueuePins,
            "g14_partitioned_claiming",
            "eviction_drops_a_pin_made_at_enqueue",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pinning_at_enqueue_without_the_capability_fails_g14() {
        must_fail(
            Flaw::ClaimsAllWithoutThePartitionCapability,
            "g14_partitioned_claiming",
            "pinning_at_enqueue_is_served_only_by_stores_that_declare_partitioned_claiming",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn never_evicting_fails_g12() {
        must_fail(
            Flaw::NeverEvicts,
            "g12_instances",
            "a_silent_instance_is_evicted_and_its_leases_released_at_once",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_the_cursor_fails_op_inspection() {
        must_fail(
            Flaw::ListingIgnoresTheCursor,
            "op_inspection",
            "pages_show_every_item_once_in_enqueue_order_either_way",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn listing_scheduled_items_as_ready_fails_op_inspection() {
        must_fail(
            Flaw::ListsScheduledAsReady,
            "op_inspection",
            "listings_split_items_by_state_and_carry_attempt_owner_expiry_and_error",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counts_without_pause_or_age_fail_op_inspection() {
        must_fail(
            Flaw::CountsWithoutPauseOrAge,
            "op_inspection",
            "queue_counts_report_the_oldest_due_wait_and_the_pause",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelling_running_items_fails_op_control() {
        must_fail(
            Flaw::CancelsRunningItems,
            "op_control",
            "cancel_leaves_running_dead_and_unknown_items_alone_and_says_which",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_pause_fails_op_control() {
        must_fail(
            Flaw::IgnoresPause,
            "op_control",
            "a_paused_queue_is_not_claimed_while_held_leases_run_on",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pausing_only_the_own_handle_fails_the_pause_race() {
        must_fail(
            Flaw::PausesOnlyItsOwnHandle,
            "op_control",
            "a_pause_racing_claims_is_told_consistently_to_every_racer",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelling_by_a_read_then_a_delete_fails_the_cancel_race_alone() {
        must_fail_only(
            Flaw::CancelChecksThenDeletes,
            "op_control",
            "a_cancel_racing_claims_never_leaves_an_item_both_cancelled_and_leased",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn measuring_the_oldest_wait_from_the_enqueue_fails_op_inspection_alone() {
        must_fail_only(
            Flaw::OldestAgeFromEnqueue,
            "op_inspection",
            "the_oldest_due_wait_of_a_delayed_or_retried_item_counts_from_its_run_at",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn listing_queues_by_name_prefix_fails_op_inspection_alone() {
        must_fail_only(
            Flaw::ListsQueuesByNamePrefix,
            "op_inspection",
            "a_queue_shows_nothing_of_the_queues_whose_names_it_begins",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hiding_expired_unrecovered_leases_fails_op_inspection_alone() {
        must_fail_only(
            Flaw::LeaseListHidesExpired,
            "op_inspection",
            "lease_list_shows_an_expired_lease_until_it_is_recovered",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn taking_dead_items_in_enqueue_order_fails_op_control_alone() {
        must_fail_only(
            Flaw::DeadFilterByEnqueueOrder,
            "op_control",
            "a_bounded_dead_filter_takes_the_earliest_dead_first",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_queue_list_missing_scheduled_and_running_queues_fails_op_inspection_alone() {
        must_fail_only(
            Flaw::QueueListSkipsScheduledAndRunningQueues,
            "op_inspection",
            "queue_list_names_a_queue_whose_only_items_are_scheduled_running_or_kept_done",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lease_cursor_holding_only_the_expiry_fails_op_inspection_alone() {
        must_fail_only(
            Flaw::LeaseCursorByExpiryOnly,
            "op_inspection",
            "lease_pages_show_leases_of_one_expiry_each_once",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn listing_a_due_delayed_item_as_scheduled_fails_op_inspection_alone() {
        must_fail_only(
            Flaw::ListsDelayedItemsAsScheduledOnceDue,
            "op_inspection",
            "a_delayed_item_is_listed_ready_from_the_instant_it_is_due",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_filtered_requeue_granting_one_attempt_fails_op_control_alone() {
        must_fail_only(
            Flaw::FilteredRequeueGrantsOneAttempt,
            "op_control",
            "a_filtered_requeue_grants_attempts_and_resets_stalls_as_a_requeue_by_id_does",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_filtered_discard_leaving_the_stream_blocked_fails_op_control_alone() {
        must_fail_only(
            Flaw::FilteredDiscardLeavesTheStreamBlocked,
            "op_control",
            "a_dead_head_discarded_or_requeued_by_filter_lets_its_stream_move_on",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_strict_dead_filter_age_fails_op_control_alone() {
        must_fail_only(
            Flaw::DeadFilterAgeIsStrict,
            "op_control",
            "a_dead_filter_takes_an_item_dead_for_exactly_older_than",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancel_leaving_a_hole_in_its_stream_fails_op_control_alone() {
        must_fail_only(
            Flaw::CancelLeavesAHoleInItsStream,
            "op_control",
            "cancelling_an_item_behind_its_stream_head_leaves_the_rest_of_the_stream_in_order",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_discard_forgetting_dedup_keys_fails_g11_alone() {
        must_fail_only(
            Flaw::DiscardForgetsDedupKeys,
            "g11_dedup",
            "a_discarded_dead_item_still_dedups_within_the_window",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_purge_ignoring_keep_done_for_fails_g11_alone() {
        must_fail_only(
            Flaw::PurgeIgnoresKeepDoneFor,
            "g11_dedup",
            "purge_keeps_finished_items_younger_than_keep_done_for_and_counts_those_it_deletes",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deregistration_skipping_unregistered_owners_fails_g12_alone() {
        must_fail_only(
            Flaw::DeregisterSkipsUnregisteredOwners,
            "g12_instances",
            "deregistering_an_owner_that_never_registered_still_releases_its_leases",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counts_without_kept_finished_items_fail_op_inspection_alone() {
        must_fail_only(
            Flaw::CountsNoFinishedItems,
            "op_inspection",
            "queue_counts_count_kept_finished_items_as_done",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelling_kept_finished_items_fails_op_control_alone() {
        must_fail_only(
            Flaw::CancelDeletesKeptFinishedItems,
            "op_control",
            "cancel_leaves_a_kept_finished_item_alone_answering_done",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_recovery_passing_over_paused_queues_fails_op_control_alone() {
        must_fail_only(
            Flaw::RecoveryPassesOverPausedQueues,
            "op_control",
            "a_paused_queues_expired_lease_is_recovered_and_its_failure_accepted_as_usual",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_filter_taking_ties_newest_first_fails_op_control_alone() {
        must_fail_only(
            Flaw::DeadFilterTiesNewestFirst,
            "op_control",
            "a_bounded_dead_filter_takes_items_that_died_together_in_enqueue_order",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_filter_skipping_its_age_bound_fails_op_control_alone() {
        must_fail_only(
            Flaw::FilterSkipsTheAgeBound,
            "op_control",
            "bad_filter_ages_granted_attempts_and_cancel_batches_are_refused_naming_the_field",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_filter_ignoring_age_fails_op_control() {
        must_fail(
            Flaw::FilterIgnoresAge,
            "op_control",
            "dead_items_are_requeued_and_discarded_by_queue_and_age_in_bounded_batches",
        )
        .await;
    }
}

mod limits {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claims_sharing_one_count_fail_the_eight_peer_hammer_alone() {
        must_fail_only(
            Flaw::ConcurrentClaimsShareOneCount,
            "g16_concurrency_limits",
            "a_key_limit_hammered_by_eight_peers_is_never_exceeded",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slot_freed_at_half_the_lease_fails_the_crashed_holder_alone() {
        must_fail_only(
            Flaw::FreesTheSlotAtHalfTheLease,
            "g16_concurrency_limits",
            "a_crashed_holders_slot_comes_back_at_its_lease_expiry_and_not_before",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stale_finish_freeing_a_slot_fails_the_takeover_case_alone() {
        must_fail_only(
            Flaw::StaleFinishFreesASlot,
            "g16_concurrency_limits",
            "a_stale_finish_after_a_takeover_frees_no_slot",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keyed_completes_fenced_on_the_attempt_fail_the_failover_case_alone() {
        must_fail_only(
            Flaw::FencesLimitedItemsOnTheAttemptOnly,
            "g16_concurrency_limits",
            "a_claim_lost_in_a_failover_frees_no_slot_through_its_token",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_behind_a_saturated_key_fails_the_head_of_line_case_alone() {
        must_fail_only(
            Flaw::WaitsBehindASaturatedKey,
            "g16_concurrency_limits",
            "a_saturated_key_is_passed_over_for_free_keys",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignored_overrides_fail_the_override_case_alone() {
        must_fail_only(
            Flaw::IgnoresKeyOverrides,
            "g16_concurrency_limits",
            "a_key_override_wins_over_the_per_key_default",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_ignored_queue_limit_fails_the_queue_wide_case_alone() {
        must_fail_only(
            Flaw::IgnoresQueueConcurrency,
            "g16_concurrency_limits",
            "a_queue_wide_limit_caps_running_items_across_keys",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignored_limit_changes_fail_the_lowering_case_alone() {
        must_fail_only(
            Flaw::IgnoresLimitChanges,
            "g16_concurrency_limits",
            "lowering_a_limit_preempts_nothing_and_stops_new_claims",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clamped_bad_limits_fail_the_bad_input_case_alone() {
        must_fail_only(
            Flaw::ClampsBadLimits,
            "g16_concurrency_limits",
            "bad_limits_name_their_field_and_write_nothing",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fixed_rate_windows_fail_the_window_edges_case_alone() {
        must_fail_only(
            Flaw::RatesInFixedWindows,
            "g17_rate_limits",
            "a_key_rate_holds_in_every_window_probed_at_its_edges",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_key_rate_counted_over_the_queue_fails_the_other_keys_case_alone() {
        must_fail_only(
            Flaw::KeyRateCountsTheWholeQueue,
            "g17_rate_limits",
            "a_key_at_its_rate_holds_up_no_other_key_and_its_items_use_no_attempt",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_ignored_queue_rate_fails_the_queue_rate_case_alone() {
        must_fail_only(
            Flaw::IgnoresQueueRate,
            "g17_rate_limits",
            "a_queue_rate_caps_starts_across_keys",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignored_deferrals_fail_the_deferral_case_alone() {
        must_fail_only(
            Flaw::IgnoresDeferrals,
            "g17_rate_limits",
            "a_deferred_key_starts_nothing_until_its_time_and_holds_up_no_other_key",
        )
        .await;
    }
}

mod forged_lease_ids {
    use super::*;

    const FORGED: &str =
        "a_token_of_the_right_attempt_and_another_lease_id_is_refused_on_every_path";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batches_fenced_on_the_attempt_fail_the_forged_token_and_failover_cases() {
        must_fail_each(
            Flaw::BatchesFenceOnTheAttemptOnly,
            "g03_fenced_finalize",
            &[
                FORGED,
                "a_claim_lost_in_a_failover_leaves_its_token_refused",
            ],
        )
        .await;
    }

    /// Without any failover: the forged-token case needs no snapshot, so a harness
    /// without one still catches a store that ignores the lease id.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fencing_on_the_attempt_alone_fails_the_forged_token_case_without_a_snapshot() {
        must_fail(Flaw::FencesOnTheAttemptOnly, "g03_fenced_finalize", FORGED).await;
    }
}

mod fair_shares {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_newcomer_joining_the_longest_line_fails_the_starvation_bound_alone() {
        must_fail_only(
            Flaw::ANewTenantJoinsTheLongestLine,
            "g18_fair_shares",
            "a_tenant_with_one_item_is_served_within_a_turn_beside_a_large_backlog",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignored_weights_fail_the_weight_ratio_alone() {
        must_fail_only(
            Flaw::IgnoresConfiguredWeights,
            "g18_fair_shares",
            "busy_tenants_are_served_in_the_ratio_of_their_weights_over_ten_thousand_claims",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shares_by_limit_key_fail_the_many_keys_tenant_alone() {
        must_fail_only(
            Flaw::FairSharesByLimitKey,
            "g18_fair_shares",
            "a_tenant_spreading_over_many_limit_keys_gains_nothing",
        )
        .await;
    }
}

mod keys_across_queues {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keying_streams_by_queue_fails_g09_across_queues() {
        must_fail(
            Flaw::StreamsPerQueue,
            "g09_stream_fifo",
            "a_stream_spanning_two_queues_is_claimed_in_enqueue_order_across_them",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keying_streams_by_queue_fails_g14_pins_across_queues() {
        must_fail(
            Flaw::StreamsPerQueue,
            "g14_partitioned_claiming",
            "a_streams_pin_holds_in_every_queue_of_the_stream",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keying_scopes_by_queue_fails_g10_across_queues() {
        must_fail(
            Flaw::ScopesPerQueue,
            "g10_scope",
            "a_busy_scope_is_passed_over_in_every_queue",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dedup_key_owned_by_the_last_queue_fails_g11_across_queues() {
        must_fail(
            Flaw::DedupKeyOwnedByLastQueue,
            "g11_dedup",
            "each_queue_answers_its_own_earlier_item_for_a_shared_dedup_key",
        )
        .await;
    }
}

mod mixed_batches {
    use super::*;

    const CASES: [&str; 4] = [
        "a_mixed_renew_batch_renews_only_the_current_tokens_answering_each_in_order",
        "a_mixed_complete_batch_completes_only_the_current_tokens_answering_each_in_order",
        "a_mixed_fail_batch_fails_only_the_current_tokens_answering_each_in_order",
        "a_mixed_release_batch_releases_only_the_current_tokens_answering_each_in_order",
    ];

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answering_batches_in_id_order_fails_every_mixed_batch_of_g03() {
        must_fail_each(Flaw::BatchAnswersInIdOrder, "g03_fenced_finalize", &CASES).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batches_that_ignore_the_attempt_fail_every_mixed_batch_of_g03() {
        must_fail_each(Flaw::BatchesIgnoreTheAttempt, "g03_fenced_finalize", &CASES).await;
    }
}

mod varied_inputs {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fixed_claim_lease_fails_g02() {
        must_fail(
            Flaw::FixedClaimLease,
            "g02_expiry",
            "the_claims_lease_duration_decides_the_expiry_and_when_the_item_is_reclaimed",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_the_recovery_limit_fails_g02() {
        must_fail(
            Flaw::IgnoresRecoverLimit,
            "g02_expiry",
            "a_recovery_pass_requeues_exactly_its_limit",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fixed_renewal_lease_fails_g04() {
        must_fail(
            Flaw::FixedRenewLease,
            "g04_renewal_cap",
            "the_renewals_lease_duration_decides_the_new_expiry",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fixed_delay_fails_g07() {
        must_fail(
            Flaw::FixedDelay,
            "g07_schedule",
            "an_enqueue_delay_decides_when_the_item_is_due",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_limit_off_by_one_fails_g08() {
        must_fail(
            Flaw::ClaimLimitOffByOne,
            "g08_order",
            "a_claim_takes_exactly_its_limit_in_claim_order",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ignoring_the_purge_limit_fails_g11() {
        must_fail(
            Flaw::IgnoresPurgeLimit,
            "g11_dedup",
            "a_purge_pass_forgets_exactly_its_limit_of_expired_keys",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fixed_stale_after_fails_g12() {
        must_fail(
            Flaw::FixedStaleAfter,
            "g12_instances",
            "the_stale_after_window_decides_which_instances_are_evicted",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fixed_leader_lease_fails_g13() {
        must_fail(
            Flaw::FixedLeaderLease,
            "g13_leader",
            "the_leader_lease_duration_decides_when_another_may_lead",
        )
        .await;
    }
}

mod bounds {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writing_a_run_at_outside_the_window_fails_g15() {
        must_fail(
            Flaw::ClampsRunAtIntoTheWindow,
            "g15_bad_input",
            "a_run_at_beyond_the_schedule_window_names_run_at_and_writes_nothing",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writing_a_delay_beyond_the_window_fails_g15() {
        must_fail(
            Flaw::ClampsLongDelays,
            "g15_bad_input",
            "a_delay_beyond_the_schedule_window_names_delay_and_writes_nothing",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn truncating_the_queue_list_fails_g15() {
        must_fail(
            Flaw::TruncatesTheQueueList,
            "g15_bad_input",
            "a_claim_naming_more_queues_than_the_limit_names_queues_and_changes_nothing",
        )
        .await;
    }
}

mod registry {
    use super::*;

    const GROUPS: [&str; 20] = [
        "g01_exclusive_claim",
        "g02_expiry",
        "g03_fenced_finalize",
        "g04_renewal_cap",
        "g05_retry",
        "g06_stalls",
        "g07_schedule",
        "g08_order",
        "g09_stream_fifo",
        "g10_scope",
        "g11_dedup",
        "g12_instances",
        "g13_leader",
        "g14_partitioned_claiming",
        "g15_bad_input",
        "g16_concurrency_limits",
        "g17_rate_limits",
        "g18_fair_shares",
        "op_inspection",
        "op_control",
    ];

    #[test]
    fn holds_at_least_45_uniquely_named_cases_over_every_mandatory_group() {
        let all = cases::<MemoryHarness>();
        assert!(all.len() >= 45, "{} cases", all.len());
        let names: HashSet<String> = all.iter().map(|c| c.full_name()).collect();
        assert_eq!(names.len(), all.len(), "case names must be unique");
        let groups: BTreeSet<&str> = all.iter().map(|c| c.group).collect();
        assert_eq!(groups, GROUPS.into_iter().collect::<BTreeSet<_>>());
        for c in &all {
            assert!(
                c.name
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_'),
                "{} is not a snake-case sentence",
                c.full_name()
            );
            if c.group != "g14_partitioned_claiming"
                && c.capability != Some(Capability::StreamRuns)
                && c.capability != Some(Capability::Limits)
                && c.capability != Some(Capability::FairShares)
            {
                assert_eq!(
                    c.capability,
                    None,
                    "{}: mandatory cases have no capability",
                    c.full_name()
                );
            }
        }
        let optional = all
            .iter()
            .filter(|c| c.capability == Some(Capability::PartitionedClaiming))
            .count();
        let g14 = all
            .iter()
            .filter(|c| c.group == "g14_partitioned_claiming")
            .count();
        // G14's first case is mandatory, and so is the first case of pinning at enqueue.
        assert_eq!(
            optional + 2,
            g14,
            "G14's mandatory cases: the partitioned claim and the pinned enqueue"
        );
    }

    fn partitioned_case<H: Harness>() -> Case<H> {
        Case::new(
            "g14_partitioned_claiming",
            "a_capability_case",
            Some(Capability::PartitionedClaiming),
            |_env| Box::pin(async { Ok(Verdict::Passed) }),
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_case_needing_an_undeclared_capability_is_skipped_with_the_reason() {
        let harness = FlawedHarness(Flaw::ClaimsAllWithoutThePartitionCapability);
        match run_case(&harness, &partitioned_case()).await {
            Status::Skipped { reason } => {
                assert!(reason.contains("partitioned_claiming"), "{reason}")
            }
            other => panic!("expected a skip, got {other:?}"),
        }
    }

    async fn panics(_env: Env<'_, MemoryHarness>) -> CaseResult {
        panic!("deliberate")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_case_is_reported_as_a_failure_not_a_crash() {
        let harness = MemoryHarness {
            keep_done: false,
            unreachable: true,
        };
        let case: Case<MemoryHarness> =
            Case::new("g00_demo", "panics", None, |env| Box::pin(panics(env)));
        match run_case(&harness, &case).await {
            Status::Failed(f) => {
                assert_eq!((f.group, f.case), ("g00_demo", "panics"));
                assert!(f.observed.contains("deliberate"), "{f}");
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }
}
