//! The broken wrappers not yet written as a type of their own: every `Store` method
//! delegates to a `MemoryStore`, with the one flaw a `Flaw` names.

use super::*;

mod limits;
mod store;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flaw {
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
    /// Discards dead items by filter without letting their streams move on, as a
    /// store deleting the matching rows without promoting the next head would.
    FilteredDiscardLeavesTheStreamBlocked,
    /// Cancels an item behind its stream's head without taking it out of the stream,
    /// so the stream stops where it was.
    CancelLeavesAHoleInItsStream,
    /// Forgets the dedup keys of discarded dead items, as a store deleting an item's
    /// key with it would.
    DiscardForgetsDedupKeys,
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
    pub(crate) fn of_limits(self) -> bool {
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
pub(crate) struct Hidden {
    pub(crate) dedup_keys: HashMap<ItemId, DedupKey>,
    /// Leases of items behind the head of a run, in claim order.
    pub(crate) tails: Vec<Lease>,
    /// Tail leases shown as still running after an earlier item of their run left.
    pub(crate) kept: HashMap<ItemId, Lease>,
    /// Every lease of a run of two or more, in claim order.
    pub(crate) runs: Vec<Lease>,
    /// Stalls shown on top of the real ones.
    pub(crate) extra_stalls: HashMap<ItemId, u32>,
    /// Every stream's items in enqueue order.
    pub(crate) stream_order: HashMap<StreamKey, Vec<ItemId>>,
    /// Items a claim never takes (their stream is stuck behind them).
    pub(crate) held_back: HashSet<ItemId>,
    /// Per queue and dedup key, how often the key was forgotten.
    pub(crate) key_generation: HashMap<(QueueName, String), u32>,
    /// Every keyed item's queue and limit key, and the keyed items in enqueue order.
    pub(crate) limit_keys: HashMap<ItemId, (QueueName, LimitKey)>,
    pub(crate) limit_order: Vec<ItemId>,
    /// Limits as the caller set them, per queue.
    pub(crate) configs: HashMap<QueueName, QueueLimits>,
    /// Keyed leases handed out, with the instant of their claim.
    pub(crate) keyed_leases: Vec<(Lease, Timestamp)>,
    /// Per queue, the fixed window the last claim fell in.
    pub(crate) windows: HashMap<QueueName, u64>,
    /// Claims in flight, across handles.
    pub(crate) claims_in_flight: usize,
    /// Items enqueued per queue and tenant.
    pub(crate) tenants: HashMap<(QueueName, Option<FairnessKey>), usize>,
}

#[derive(Clone, Debug)]
pub(crate) struct Flawed {
    pub(crate) inner: MemoryStore,
    pub(crate) clock: ManualClock,
    pub(crate) flaw: Flaw,
    pub(crate) hidden: Arc<Mutex<Hidden>>,
}

impl Flawed {
    pub(crate) fn hidden(&self) -> std::sync::MutexGuard<'_, Hidden> {
        self.hidden
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Shows the item as the caller enqueued it.
    pub(crate) fn restore(&self, item: &mut Item) {
        let hidden = self.hidden();
        if let Some(k) = hidden.dedup_keys.get(&item.id) {
            item.dedup_key = Some(k.clone());
        }
        if let Some(&n) = hidden.extra_stalls.get(&item.id) {
            item.stalls += n;
        }
    }

    /// For [`Flaw::LeavesTheRunRunning`]: the items of a run behind `failed` are shown
    /// as still running under their lease.
    pub(crate) async fn keep_tails_behind(&self, failed: &[LeaseToken]) -> Result<()> {
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

    /// For [`Flaw::FreesTheStreamBehindARunningHead`]: before an item behind its
    /// run's head completes, the earlier items of its run that still run are completed
    /// underneath (so the stream moves on) and kept, shown as still running.
    pub(crate) async fn free_the_stream_behind(&self, tokens: &[LeaseToken]) -> Result<()> {
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

    /// For [`Flaw::FilteredDiscardLeavesTheStreamBlocked`] and
    /// [`Flaw::CancelLeavesAHoleInItsStream`]: the items of `stream` enqueued after `id`
    /// are never claimed again.
    pub(crate) fn hold_back_behind(&self, stream: &StreamKey, id: ItemId) {
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
    pub(crate) async fn discard_candidates(&self, params: &DiscardParams) -> Result<Vec<Item>> {
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
    pub(crate) async fn after_discard(&self, candidates: Vec<Item>, by_filter: bool) -> Result<()> {
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
    pub(crate) async fn stall_put_back_tails(&self) -> Result<u64> {
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

/// The harness of one [`Flaw`] of [`Flawed`].
pub(crate) struct FlawedHarness(pub(crate) Flaw);

impl std::fmt::Debug for FlawedHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[async_trait]
impl Harness for FlawedHarness {
    type Store = Flawed;

    async fn open(&self, clock: ManualClock) -> Result<Flawed> {
        Ok(Flawed {
            inner: MemoryStore::new(clock.clone()),
            clock,
            flaw: self.0,
            hidden: Arc::default(),
        })
    }

    async fn open_peer(&self, store: &Flawed, _clock: ManualClock) -> Result<Flawed> {
        Ok(store.clone())
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
