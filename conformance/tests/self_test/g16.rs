//! The flaws that break G16, concurrency limits: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_sharing_one_count_fail_the_eight_peer_hammer_alone() {
    must_fail_only(
        broken::<ConcurrentClaimsShareOneCount>(),
        "g16_concurrency_limits",
        "a_key_limit_hammered_by_eight_peers_is_never_exceeded",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_freed_at_half_the_lease_fails_the_crashed_holder_alone() {
    must_fail_only(
        broken::<FreesTheSlotAtHalfTheLease>(),
        "g16_concurrency_limits",
        "a_crashed_holders_slot_comes_back_at_its_lease_expiry_and_not_before",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_finish_freeing_a_slot_fails_the_takeover_case_alone() {
    must_fail_only(
        broken::<StaleFinishFreesASlot>(),
        "g16_concurrency_limits",
        "a_stale_finish_after_a_takeover_frees_no_slot",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_completes_fenced_on_the_attempt_fail_the_failover_case_alone() {
    must_fail_only(
        broken::<FencesLimitedItemsOnTheAttemptOnly>(),
        "g16_concurrency_limits",
        "a_claim_lost_in_a_failover_frees_no_slot_through_its_token",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_behind_a_saturated_key_fails_the_head_of_line_case_alone() {
    must_fail_only(
        broken::<WaitsBehindASaturatedKey>(),
        "g16_concurrency_limits",
        "a_saturated_key_is_passed_over_for_free_keys",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_overrides_fail_the_override_case_alone() {
    must_fail_only(
        broken::<IgnoresKeyOverrides>(),
        "g16_concurrency_limits",
        "a_key_override_wins_over_the_per_key_default",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_queue_limit_fails_the_queue_wide_case_alone() {
    must_fail_only(
        broken::<IgnoresQueueConcurrency>(),
        "g16_concurrency_limits",
        "a_queue_wide_limit_caps_running_items_across_keys",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_limit_changes_fail_the_lowering_case_alone() {
    must_fail_only(
        broken::<IgnoresLimitChanges>(),
        "g16_concurrency_limits",
        "lowering_a_limit_preempts_nothing_and_stops_new_claims",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clamped_bad_limits_fail_the_bad_input_case_alone() {
    must_fail_only(
        broken::<ClampsBadLimits>(),
        "g16_concurrency_limits",
        "bad_limits_name_their_field_and_write_nothing",
    )
    .await;
}

/// Every keyed item enqueued (duplicates left out), in enqueue order, with its queue
/// and limit key: the memory store's items do not show their key.
#[derive(Clone, Debug, Default)]
struct Keyed(Shared<Vec<(ItemId, QueueName, LimitKey)>>);

impl Keyed {
    /// Enqueues into `inner`, noting the keyed items.
    async fn enqueue(&self, inner: &MemoryStore, params: EnqueueParams) -> Result<Vec<Enqueued>> {
        let out = inner.enqueue(params.clone()).await?;
        let mut keyed = lock(&self.0);
        for (item, told) in params.items.iter().zip(&out) {
            if let (Some(k), false) = (&item.limit_key, told.duplicate) {
                keyed.push((item.id, item.queue.clone(), k.clone()));
            }
        }
        Ok(out)
    }

    /// The queue and limit key of the item `id`, if it has a key.
    fn of(&self, id: ItemId) -> Option<(QueueName, LimitKey)> {
        lock(&self.0)
            .iter()
            .find(|(i, _, _)| *i == id)
            .map(|(_, q, k)| (q.clone(), k.clone()))
    }
}

/// The first of `queues` that has limits, with them.
pub(crate) async fn limited(
    inner: &MemoryStore,
    queues: &[QueueName],
) -> Result<Option<(QueueName, QueueLimits)>> {
    for q in queues {
        if let Some(limits) = inner.limits_get(q).await? {
            return Ok(Some((q.clone(), limits)));
        }
    }
    Ok(None)
}

flaw! {
    /// Lets a claim that overlaps another read the running counts from before the
    /// other's, as two claimers reading one snapshot do (pg-boss's "may be slightly
    /// exceeded"; G16 under concurrent claims).
    ConcurrentClaimsShareOneCount {
        shown: Shared<HashMap<QueueName, QueueLimits>>,
        in_flight: Shared<usize>,
    }
}

impl ConcurrentClaimsShareOneCount {
    fn alter(&self, _: &mut QueueLimits) {}
}

shows_the_limits_set!(ConcurrentClaimsShareOneCount {
    async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
        let config = params
            .queues
            .iter()
            .find_map(|q| lock(&self.shown).get(q).cloned().map(|c| (q.clone(), c)));
        let Some((q, c)) = config else {
            return self.inner.claim(params).await;
        };
        *lock(&self.in_flight) += 1;
        tokio::task::yield_now().await;
        let overlapping = *lock(&self.in_flight) > 1;
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
            self.inner.limits_set(LimitsParams::new(q, c)).await?;
        }
        *lock(&self.in_flight) -= 1;
        out
    }
});

flaw! {
    /// Gives a keyed lease's slot back once half its lease has passed without a
    /// finish, as a limiter trusting a heartbeat would (G16, a crashed holder).
    FreesTheSlotAtHalfTheLease {
        keyed: Keyed,
        leases: Shared<Vec<(Lease, Timestamp)>>,
    }
}

tenure_core::forward_store! {
    impl Store for FreesTheSlotAtHalfTheLease {
        forward self => self.inner;

        async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
            self.keyed.enqueue(&self.inner, params).await
        }

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            let now = self.clock.now();
            if limited(&self.inner, &params.queues).await?.is_some() {
                let old: Vec<Lease> = {
                    let mut leases = lock(&self.leases);
                    let (old, young): (Vec<_>, Vec<_>) =
                        leases.drain(..).partition(|(l, at)| {
                            (now.as_micros() - at.as_micros()) * 2
                                >= l.expires_at.as_micros() - at.as_micros()
                        });
                    *leases = young;
                    old.into_iter().map(|(l, _)| l).collect()
                };
                for l in old {
                    self.inner
                        .release(ReleaseParams::new(vec![l.token]))
                        .await?;
                }
            }
            let leases = self.inner.claim(params).await?;
            for l in &leases {
                if self.keyed.of(l.token.id).is_some() {
                    lock(&self.leases).push((l.clone(), now));
                }
            }
            Ok(leases)
        }
    }
}

flaw! {
    /// Gives a slot back on a release or fail before checking the token, so a
    /// superseded lease's refused finish still frees one (Solid Queue #761; G16).
    StaleFinishFreesASlot {
        shown: Shared<HashMap<QueueName, QueueLimits>>,
        keyed: Keyed,
    }
}

impl StaleFinishFreesASlot {
    fn alter(&self, _: &mut QueueLimits) {}

    /// A slot given for each refused keyed token: the key's limit raised by one.
    async fn stale_frees(&self, refused: impl Iterator<Item = LeaseToken>) -> Result<()> {
        for t in refused {
            let Some((q, k)) = self.keyed.of(t.id) else {
                continue;
            };
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

shows_the_limits_set!(StaleFinishFreesASlot {
    async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
        self.keyed.enqueue(&self.inner, params).await
    }

    async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>> {
        let tokens: Vec<LeaseToken> = params.failures.iter().map(|f| f.token).collect();
        let out = self.inner.fail(params).await?;
        let refused = tokens.into_iter().zip(&out);
        self.stale_frees(refused.filter(|(_, o)| **o == FailOutcome::LeaseLost).map(|(t, _)| t))
            .await?;
        Ok(out)
    }

    async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        let tokens = params.tokens.clone();
        let out = self.inner.release(params).await?;
        let refused = tokens.into_iter().zip(&out);
        self.stale_frees(refused.filter(|(_, o)| **o == TokenOutcome::LeaseLost).map(|(t, _)| t))
            .await?;
        Ok(out)
    }
});

flaw! {
    /// Fences the completes of keyed items on `(id, attempt)` alone, so a claim lost in
    /// a failover completes its successor and frees its slot (G16).
    FencesLimitedItemsOnTheAttemptOnly { keyed: Keyed }
}

tenure_core::forward_store! {
    impl Store for FencesLimitedItemsOnTheAttemptOnly {
        forward self => self.inner;

        async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
            self.keyed.enqueue(&self.inner, params).await
        }

        async fn complete(&self, mut params: CompleteParams) -> Result<Vec<TokenOutcome>> {
            for t in &mut params.tokens {
                if self.keyed.of(t.id).is_none() {
                    continue;
                }
                if let Some(item) = self.inner.item_get(t.id).await? {
                    if item.state == ItemState::Running && item.attempt == t.attempt {
                        *t = item.token();
                    }
                }
            }
            self.inner.complete(params).await
        }
    }
}

flaw! {
    /// Answers nothing to a small claim that would pass a saturated key over for
    /// another key's item, as a claim stopping at its first blocked candidate would
    /// (head-of-line blocking; G16).
    WaitsBehindASaturatedKey { keyed: Keyed }
}

impl WaitsBehindASaturatedKey {
    /// Whether an earlier keyed item of another key than the leased one still waits.
    async fn blocked(&self, lease: &Lease) -> Result<bool> {
        let now = self.clock.now();
        let keyed = lock(&self.keyed.0).clone();
        let mine = self.keyed.of(lease.token.id).map(|(_, k)| k);
        let pos = keyed.iter().position(|(id, _, _)| *id == lease.token.id);
        for (id, _, k) in &keyed[..pos.unwrap_or(keyed.len())] {
            if Some(k) == mine.as_ref() {
                continue;
            }
            let waiting = self
                .inner
                .item_get(*id)
                .await?
                .is_some_and(|i| i.state == ItemState::Ready && i.run_at <= now);
            if waiting {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

tenure_core::forward_store! {
    impl Store for WaitsBehindASaturatedKey {
        forward self => self.inner;

        async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
            self.keyed.enqueue(&self.inner, params).await
        }

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            let small = params.limit <= 2;
            let limited = limited(&self.inner, &params.queues).await?.is_some();
            let leases = self.inner.claim(params).await?;
            if !(small && limited) {
                return Ok(leases);
            }
            for l in &leases {
                if self.blocked(l).await? {
                    let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
                    self.inner.release(ReleaseParams::new(tokens)).await?;
                    return Ok(Vec::new());
                }
            }
            Ok(leases)
        }
    }
}

flaw! {
    /// Applies the per-key default to every key, overrides ignored (G16).
    IgnoresKeyOverrides { shown: Shared<HashMap<QueueName, QueueLimits>> }
}

impl IgnoresKeyOverrides {
    fn alter(&self, limits: &mut QueueLimits) {
        limits.key_overrides.clear();
    }
}

shows_the_limits_set!(IgnoresKeyOverrides {});

flaw! {
    /// Ignores the queue-wide concurrency limit (G16).
    IgnoresQueueConcurrency { shown: Shared<HashMap<QueueName, QueueLimits>> }
}

impl IgnoresQueueConcurrency {
    fn alter(&self, limits: &mut QueueLimits) {
        limits.concurrency = None;
    }
}

shows_the_limits_set!(IgnoresQueueConcurrency {});

flaw! {
    /// Applies a queue's first limits only: later changes are answered and dropped (G16).
    IgnoresLimitChanges
}

tenure_core::forward_store! {
    impl Store for IgnoresLimitChanges {
        forward self => self.inner;

        async fn limits_set(&self, params: LimitsParams) -> Result<Option<QueueLimits>> {
            params.validate(&self.limits())?;
            match self.inner.limits_get(&params.queue).await? {
                Some(first) => Ok(Some(first)),
                None => self.inner.limits_set(params).await,
            }
        }
    }
}

flaw! {
    /// Clamps out-of-range limits into range and writes them instead of refusing (G15
    /// for limits; G16).
    ClampsBadLimits
}

tenure_core::forward_store! {
    impl Store for ClampsBadLimits {
        forward self => self.inner;

        async fn limits_set(&self, params: LimitsParams) -> Result<Option<QueueLimits>> {
            if params.validate(&self.limits()).is_ok() {
                return self.inner.limits_set(params).await;
            }
            let mut l = params.limits;
            let clamp = |n: u32| n.clamp(1, MAX_CONCURRENCY);
            l.concurrency = l.concurrency.map(clamp);
            l.key_concurrency = l.key_concurrency.map(clamp);
            for n in l.key_overrides.values_mut() {
                *n = clamp(*n);
            }
            for r in l.rate.iter_mut().chain(l.key_rate.iter_mut()) {
                *r = Rate::new(r.starts.max(1), r.per.max(Duration::from_secs(1)));
            }
            self.inner
                .limits_set(LimitsParams::new(params.queue, l))
                .await
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_listed_without_their_limit_key_fail_the_lease_list_case_alone() {
    must_fail_only(
        broken::<ListsLeasesWithoutTheirLimitKey>(),
        "g16_concurrency_limits",
        "a_lease_list_names_the_limit_key_each_lease_holds_a_slot_of",
    )
    .await;
}

flaw! {
    /// Lists leases without the limit key whose slot each holds, so an operator cannot
    /// tell which key is saturated by what (G16).
    ListsLeasesWithoutTheirLimitKey
}

tenure_core::forward_store! {
    impl Store for ListsLeasesWithoutTheirLimitKey {
        forward self => self.inner;

        async fn lease_list(&self, params: LeaseListParams) -> Result<LeasePage> {
            let mut page = self.inner.lease_list(params).await?;
            for l in &mut page.leases {
                l.limit_key = None;
            }
            Ok(page)
        }
    }
}
