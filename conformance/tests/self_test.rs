//! The suite proves it can fail: it passes against the memory store, and each
//! deliberately broken wrapper around that store fails the group of the guarantee it
//! breaks. This tells flaws in a store from flaws in the suite.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_conformance::{
    cases, run_all, run_case, Capability, Case, CaseResult, Env, Harness, Report, Status, Verdict,
};
use tenure_core::{
    async_trait, Capabilities, ClaimParams, CompleteParams, DeregisterParams, DiscardParams,
    EnqueueParams, Enqueued, Error, EvictParams, Evicted, FailOutcome, FailParams, HeartbeatParams,
    Instance, Item, ItemId, ItemState, LeaderParams, LeaderStatus, Lease, LeaseToken, Limits,
    ManualClock, PurgeParams, Purged, QueueCounts, QueueName, RecoverParams, Recovered,
    ReleaseParams, RenewOutcome, RenewParams, RequeueParams, Result, Retry, Schedule, ScopeKey,
    Store, StreamKey, TokenOutcome, WakeSignal, MAX_ATTEMPTS_LIMIT,
};
use tenure_core::{
    CancelOutcome, CancelParams, DeadFilter, ItemListParams, ItemPage, LeaseListParams, LeasePage,
    ListState, PauseParams,
};
use tenure_memory::MemoryStore;

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

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Option<MemoryStore>> {
        if !self.unreachable {
            return Ok(None);
        }
        let store = MemoryStore::new(clock);
        store.set_available(false);
        Ok(Some(store))
    }
}

// ---------------------------------------------------------------------------------------
// The broken wrappers: every Store method delegates to a MemoryStore, with one flaw.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flaw {
    /// Completes whatever attempt is current, whatever the token says (breaks G3).
    IgnoresAttemptOnComplete,
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
}

/// What the wrapper hid from the inner store, to show it again on reads.
#[derive(Debug, Default)]
struct Hidden {
    scopes: HashMap<ItemId, ScopeKey>,
    streams: HashMap<ItemId, StreamKey>,
    renewals: HashMap<ItemId, u32>,
    stalls: HashMap<ItemId, u32>,
    handed: Vec<Lease>,
    local_pauses: HashSet<QueueName>,
}

#[derive(Clone, Debug)]
struct Flawed {
    inner: MemoryStore,
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
        self.inner.capabilities()
    }

    fn limits(&self) -> Limits {
        self.inner.limits()
    }

    fn wake_signal(&self) -> Option<WakeSignal> {
        self.inner.wake_signal()
    }

    async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
        for item in &mut params.items {
            match self.flaw {
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
        if matches!(
            self.flaw,
            Flaw::IgnoresPartitions | Flaw::ClaimsAllWithoutThePartitionCapability
        ) {
            params.partitioning = None;
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
        for lease in &mut leases {
            self.restore(&mut lease.item);
        }
        Ok(leases)
    }

    async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
        self.inner.renew(params).await
    }

    async fn complete(&self, mut params: CompleteParams) -> Result<Vec<TokenOutcome>> {
        if self.flaw == Flaw::IgnoresAttemptOnComplete {
            for token in &mut params.tokens {
                if let Some(item) = self.inner.item_get(token.id).await? {
                    if item.state == ItemState::Running {
                        *token = LeaseToken::new(token.id, item.attempt);
                    }
                }
            }
        }
        self.inner.complete(params).await
    }

    async fn fail(&self, mut params: FailParams) -> Result<Vec<FailOutcome>> {
        if self.flaw == Flaw::IgnoresRetryDelay {
            for f in &mut params.failures {
                if let Retry::After(_) = f.retry {
                    f.retry = Retry::After(Duration::ZERO);
                }
            }
        }
        self.inner.fail(params).await
    }

    async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        self.inner.release(params).await
    }

    async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered> {
        self.inner.recover_expired(params).await
    }

    async fn purge(&self, params: PurgeParams) -> Result<Purged> {
        self.inner.purge(params).await
    }

    async fn dead_requeue(&self, mut params: RequeueParams) -> Result<u64> {
        if self.flaw == Flaw::FilterIgnoresAge {
            if let Some(f) = &mut params.filter {
                *f = DeadFilter::new(f.queue.clone()).limit(f.limit);
            }
        }
        self.inner.dead_requeue(params).await
    }

    async fn dead_discard(&self, mut params: DiscardParams) -> Result<u64> {
        if self.flaw == Flaw::FilterIgnoresAge {
            if let Some(f) = &mut params.filter {
                *f = DeadFilter::new(f.queue.clone()).limit(f.limit);
            }
        }
        self.inner.dead_discard(params).await
    }

    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
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
        if self.flaw == Flaw::CountsWithoutPauseOrAge {
            return Ok(c.with_paused(false).with_oldest_ready_age(None));
        }
        Ok(c)
    }

    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        self.inner.instance_heartbeat(params).await
    }

    async fn instance_list(&self) -> Result<Vec<Instance>> {
        self.inner.instance_list().await
    }

    async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted> {
        if self.flaw == Flaw::NeverEvicts {
            params.validate(&self.limits())?;
            return Ok(Evicted::default());
        }
        self.inner.instance_evict_stale(params).await
    }

    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        self.inner.instance_deregister(params).await
    }

    async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus> {
        let holder = params.holder.clone();
        match self.inner.leader_acquire(params).await {
            Err(Error::Unavailable { .. }) if self.flaw == Flaw::FollowerWhenUnreachable => {
                Ok(LeaderStatus::Follower {
                    holder,
                    term: 0,
                    expires_at: tenure_core::Timestamp::EPOCH,
                })
            }
            other => other,
        }
    }

    async fn leader_resign(&self, params: LeaderParams) -> Result<bool> {
        self.inner.leader_resign(params).await
    }

    async fn item_list(&self, mut params: ItemListParams) -> Result<ItemPage> {
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
        self.inner.item_list(params).await
    }

    async fn lease_list(&self, params: LeaseListParams) -> Result<LeasePage> {
        self.inner.lease_list(params).await
    }

    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        self.inner.queue_list().await
    }

    async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>> {
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
}

struct FlawedHarness(Flaw);

#[async_trait]
impl Harness for FlawedHarness {
    type Store = Flawed;

    async fn open(&self, clock: ManualClock) -> Result<Flawed> {
        Ok(Flawed {
            inner: MemoryStore::new(clock),
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

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Option<Flawed>> {
        let store = self.open(clock).await?;
        store.inner.set_available(false);
        Ok(Some(store))
    }
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
            vec!["g13_leader::an_unreachable_store_is_an_error_never_a_follower".to_owned()],
        );
        assert!(
            report.to_string().contains("did not apply g13_leader::"),
            "{report}"
        );
    }
}

mod broken_wrappers {
    use super::*;

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
    async fn a_filter_ignoring_age_fails_op_control() {
        must_fail(
            Flaw::FilterIgnoresAge,
            "op_control",
            "dead_items_are_requeued_and_discarded_by_queue_and_age_in_bounded_batches",
        )
        .await;
    }
}

mod registry {
    use super::*;

    const GROUPS: [&str; 17] = [
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
            if c.group != "g14_partitioned_claiming" {
                assert_eq!(
                    c.capability,
                    None,
                    "{}: mandatory cases have no capability",
                    c.full_name()
                );
            }
        }
        let optional = all.iter().filter(|c| c.capability.is_some()).count();
        let g14 = all
            .iter()
            .filter(|c| c.group == "g14_partitioned_claiming")
            .count();
        assert_eq!(
            optional + 1,
            g14,
            "G14's first case is mandatory, the rest optional"
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
