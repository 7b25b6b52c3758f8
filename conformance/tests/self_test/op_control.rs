//! The flaws that break the operator's control: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_running_items_fails_op_control() {
    must_fail(
        broken::<CancelsRunningItems>(),
        "op_control",
        "cancel_leaves_running_dead_and_unknown_items_alone_and_says_which",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_pause_fails_op_control() {
    must_fail(
        broken::<IgnoresPause>(),
        "op_control",
        "a_paused_queue_is_not_claimed_while_held_leases_run_on",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_only_the_own_handle_fails_the_pause_race() {
    must_fail(
        broken::<PausesOnlyItsOwnHandle>(),
        "op_control",
        "a_pause_racing_claims_is_told_consistently_to_every_racer",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_by_a_read_then_a_delete_fails_the_cancel_race_alone() {
    must_fail_only(
        broken::<CancelChecksThenDeletes>(),
        "op_control",
        "a_cancel_racing_claims_never_leaves_an_item_both_cancelled_and_leased",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taking_dead_items_in_enqueue_order_fails_op_control_alone() {
    must_fail_only(
        broken::<DeadFilterByEnqueueOrder>(),
        "op_control",
        "a_bounded_dead_filter_takes_the_earliest_dead_first",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_requeue_granting_one_attempt_fails_op_control_alone() {
    must_fail_only(
        broken::<FilteredRequeueGrantsOneAttempt>(),
        "op_control",
        "a_filtered_requeue_grants_attempts_and_resets_stalls_as_a_requeue_by_id_does",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_dead_filter_age_fails_op_control_alone() {
    must_fail_only(
        broken::<DeadFilterAgeIsStrict>(),
        "op_control",
        "a_dead_filter_takes_an_item_dead_for_exactly_older_than",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_kept_finished_items_fails_op_control_alone() {
    must_fail_only(
        broken::<CancelDeletesKeptFinishedItems>(),
        "op_control",
        "cancel_leaves_a_kept_finished_item_alone_answering_done",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_passing_over_paused_queues_fails_op_control_alone() {
    must_fail_only(
        broken::<RecoveryPassesOverPausedQueues>(),
        "op_control",
        "a_paused_queues_expired_lease_is_recovered_and_its_failure_accepted_as_usual",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_taking_ties_newest_first_fails_op_control_alone() {
    must_fail_only(
        broken::<DeadFilterTiesNewestFirst>(),
        "op_control",
        "a_bounded_dead_filter_takes_items_that_died_together_in_enqueue_order",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_skipping_its_age_bound_fails_op_control_alone() {
    must_fail_only(
        broken::<FilterSkipsTheAgeBound>(),
        "op_control",
        "bad_filter_ages_granted_attempts_and_cancel_batches_are_refused_naming_the_field",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_ignoring_age_fails_op_control() {
    must_fail(
        broken::<FilterIgnoresAge>(),
        "op_control",
        "dead_items_are_requeued_and_discarded_by_queue_and_age_in_bounded_batches",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_stop_running_fails_op_control() {
    must_fail(
        broken::<IgnoresStopRunning>(),
        "op_control",
        "cancelling_a_running_item_stops_it_dead_naming_who_and_when",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewing_a_stopped_lease_fails_op_control_alone() {
    must_fail_only(
        broken::<RenewsAStoppedLease>(),
        "op_control",
        "a_stopped_lease_is_refused_on_every_renew_and_finish",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_for_any_operator_name_fails_op_control_alone() {
    must_fail_only(
        broken::<StopsForAnyOperatorName>(),
        "op_control",
        "a_stop_naming_no_valid_operator_is_refused_and_writes_nothing",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_reported_progress_fails_op_control_alone() {
    must_fail_only(
        broken::<DropsProgress>(),
        "op_control",
        "progress_is_kept_from_the_holder_and_refused_from_a_superseded_lease",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keeping_a_superseded_leases_progress_fails_op_control_alone() {
    must_fail_only(
        broken::<KeepsProgressOfAnyLease>(),
        "op_control",
        "progress_is_kept_from_the_holder_and_refused_from_a_superseded_lease",
    )
    .await;
}

flaw! {
    /// Renews leases but drops the progress reported with them.
    DropsProgress
}

tenure_core::forward_store! {
    impl Store for DropsProgress {
        forward self => self.inner;

        async fn renew(&self, mut params: RenewParams) -> Result<Vec<RenewOutcome>> {
            params.validate(&self.limits())?;
            params.progress.clear();
            self.inner.renew(params).await
        }
    }
}

flaw! {
    /// Keeps the progress of every token reported, current or not (an unfenced write).
    KeepsProgressOfAnyLease { kept: Arc<Mutex<HashMap<ItemId, tenure_core::Progress>>> }
}

tenure_core::forward_store! {
    impl Store for KeepsProgressOfAnyLease {
        forward self => self.inner;

        async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
            params.validate(&self.limits())?;
            {
                let mut kept = self.kept.lock().expect("lock");
                for (i, t) in params.tokens.iter().enumerate() {
                    if let Some(p) = params.progress_at(i) {
                        kept.insert(t.id, p.clone().for_attempt(t.attempt));
                    }
                }
            }
            self.inner.renew(params).await
        }

        async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
            let mut item = self.inner.item_get(id).await?;
            if let Some(i) = &mut item {
                if let Some(p) = self.kept.lock().expect("lock").get(&id) {
                    i.progress = Some(p.clone());
                }
            }
            Ok(item)
        }
    }
}

flaw! {
    /// Leaves running items running whatever `stop_running` asks.
    IgnoresStopRunning
}

tenure_core::forward_store! {
    impl Store for IgnoresStopRunning {
        forward self => self.inner;

        async fn item_cancel(&self, mut params: CancelParams) -> Result<Vec<CancelOutcome>> {
            params.stop_running = None;
            self.inner.item_cancel(params).await
        }
    }
}

flaw! {
    /// Stops running items but keeps renewing their revoked leases, so the holder never
    /// learns of the stop.
    RenewsAStoppedLease { stopped: Arc<Mutex<HashSet<ItemId>>> }
}

tenure_core::forward_store! {
    impl Store for RenewsAStoppedLease {
        forward self => self.inner;

        async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>> {
            let ids = params.ids.clone();
            let out = self.inner.item_cancel(params).await?;
            let mut stopped = self.stopped.lock().expect("lock");
            for (id, o) in ids.iter().zip(&out) {
                if o.is_stopped() {
                    stopped.insert(*id);
                }
            }
            Ok(out)
        }

        async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
            let (tokens, lease_for) = (params.tokens.clone(), params.lease_for);
            let mut out = self.inner.renew(params).await?;
            let stopped = self.stopped.lock().expect("lock");
            for (t, o) in tokens.iter().zip(out.iter_mut()) {
                if stopped.contains(&t.id) && *o == RenewOutcome::LeaseLost {
                    *o = RenewOutcome::Renewed {
                        expires_at: self.clock.now() + lease_for,
                        renewals: 1,
                    };
                }
            }
            Ok(out)
        }
    }
}

flaw! {
    /// Stops running items for any operator name, putting a placeholder in for a bad one.
    StopsForAnyOperatorName
}

tenure_core::forward_store! {
    impl Store for StopsForAnyOperatorName {
        forward self => self.inner;

        async fn item_cancel(&self, mut params: CancelParams) -> Result<Vec<CancelOutcome>> {
            if params.validate(&self.limits()).is_err() {
                params.stop_running = Some("operator".to_owned());
            }
            self.inner.item_cancel(params).await
        }
    }
}

flaw! {
    /// Cancels a running item too, by failing and discarding it.
    CancelsRunningItems
}

tenure_core::forward_store! {
    impl Store for CancelsRunningItems {
        forward self => self.inner;

        async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>> {
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
            Ok(out)
        }
    }
}

flaw! {
    /// Answers a pause but never applies it.
    IgnoresPause
}

tenure_core::forward_store! {
    impl Store for IgnoresPause {
        forward self => self.inner;

        async fn queue_pause(&self, params: PauseParams) -> Result<bool> {
            Ok(!self.inner.queue_counts(&params.queue).await?.paused)
        }
    }
}

flaw! {
    /// Cancels by reading the item, then deleting it if it was ready when read, even
    /// when a claim leased it in between (breaks the cancel race).
    CancelChecksThenDeletes
}

tenure_core::forward_store! {
    impl Store for CancelChecksThenDeletes {
        forward self => self.inner;

        async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>> {
            params.validate(&self.limits())?;
            let mut out = Vec::new();
            for &id in &params.ids {
                let seen = self.inner.item_get(id).await?;
                if seen.is_some_and(|i| i.state == ItemState::Ready) {
                    // The window between the read and the write, where a claim lands.
                    for _ in 0..8 {
                        tokio::task::yield_now().await;
                    }
                    if let Some(i) = self.inner.item_get(id).await? {
                        if i.state == ItemState::Running {
                            let f = tenure_core::Failure::permanent(i.token(), "cancelled");
                            self.inner.fail(FailParams::one(f)).await?;
                            self.inner
                                .dead_discard(DiscardParams::new(vec![id]))
                                .await?;
                            out.push(CancelOutcome::Cancelled);
                            continue;
                        }
                    }
                }
                let mut one = CancelParams::new(vec![id]);
                one.stop_running.clone_from(&params.stop_running);
                out.extend(self.inner.item_cancel(one).await?);
            }
            Ok(out)
        }
    }
}

flaw! {
    /// Grants one attempt on a filtered requeue, whatever `additional_attempts` says.
    FilteredRequeueGrantsOneAttempt
}

tenure_core::forward_store! {
    impl Store for FilteredRequeueGrantsOneAttempt {
        forward self => self.inner;

        async fn dead_requeue(&self, mut params: RequeueParams) -> Result<u64> {
            if params.filter.is_some() && params.validate(&self.limits()).is_ok() {
                params.additional_attempts = 1;
            }
            self.inner.dead_requeue(params).await
        }
    }
}

/// `filter` without its age: every dead item of its queue, up to its limit.
fn ageless(filter: &mut Option<DeadFilter>) {
    if let Some(f) = filter {
        *f = DeadFilter::new(f.queue.clone()).limit(f.limit);
    }
}

flaw! {
    /// Requeues and discards dead items by filter whatever their age.
    FilterIgnoresAge
}

tenure_core::forward_store! {
    impl Store for FilterIgnoresAge {
        forward self => self.inner;

        async fn dead_requeue(&self, mut params: RequeueParams) -> Result<u64> {
            ageless(&mut params.filter);
            self.inner.dead_requeue(params).await
        }

        async fn dead_discard(&self, mut params: DiscardParams) -> Result<u64> {
            ageless(&mut params.filter);
            self.inner.dead_discard(params).await
        }
    }
}

/// `filter` with its age one tick longer.
fn one_tick_older(filter: &mut Option<DeadFilter>) {
    if let Some(f) = filter {
        if let Some(age) = f.older_than {
            f.older_than = Some(age + Duration::from_micros(1));
        }
    }
}

flaw! {
    /// Takes an item by a filter's `older_than` only once it has been dead for longer
    /// than that, not at exactly that age.
    DeadFilterAgeIsStrict
}

tenure_core::forward_store! {
    impl Store for DeadFilterAgeIsStrict {
        forward self => self.inner;

        async fn dead_requeue(&self, mut params: RequeueParams) -> Result<u64> {
            one_tick_older(&mut params.filter);
            self.inner.dead_requeue(params).await
        }

        async fn dead_discard(&self, mut params: DiscardParams) -> Result<u64> {
            one_tick_older(&mut params.filter);
            self.inner.dead_discard(params).await
        }
    }
}

/// `filter` with an age over ten years taken as ten years.
fn ten_years_at_most(filter: &mut Option<DeadFilter>) {
    let ten_years = Duration::from_secs(10 * 366 * 24 * 60 * 60);
    if let Some(f) = filter {
        if f.older_than.is_some_and(|a| a > ten_years) {
            f.older_than = Some(ten_years);
        }
    }
}

flaw! {
    /// Checks a dead filter's limit but not its age: an age over ten years is taken as
    /// ten years instead of refused.
    FilterSkipsTheAgeBound
}

tenure_core::forward_store! {
    impl Store for FilterSkipsTheAgeBound {
        forward self => self.inner;

        async fn dead_requeue(&self, mut params: RequeueParams) -> Result<u64> {
            ten_years_at_most(&mut params.filter);
            self.inner.dead_requeue(params).await
        }

        async fn dead_discard(&self, mut params: DiscardParams) -> Result<u64> {
            ten_years_at_most(&mut params.filter);
            self.inner.dead_discard(params).await
        }
    }
}

/// The ids a valid `filter` takes when its dead items, old enough for it and in
/// enqueue order, are put in `order` first; `None` when there is no filter or it is
/// invalid (so the store refuses it).
async fn taken_by(
    inner: &MemoryStore,
    clock: &ManualClock,
    filter: &Option<DeadFilter>,
    order: fn(&mut [(usize, Item)]),
) -> Result<Option<Vec<ItemId>>> {
    let Some(f) = filter else {
        return Ok(None);
    };
    if f.validate(&inner.limits()).is_err() {
        return Ok(None);
    }
    let dead = inner
        .item_list(ItemListParams::new(f.queue.clone(), ListState::Dead).limit(MAX_PAGE))
        .await?;
    let before = f.dead_before(clock.now());
    let mut matching: Vec<(usize, Item)> = dead
        .items
        .into_iter()
        .filter(|i| i.updated_at <= before)
        .enumerate()
        .collect();
    order(&mut matching);
    Ok(Some(
        matching
            .into_iter()
            .take(f.limit as usize)
            .map(|(_, i)| i.id)
            .collect(),
    ))
}

/// Dead items that died at one instant, latest enqueued first.
fn ties_newest_first(matching: &mut [(usize, Item)]) {
    matching.sort_by_key(|(n, i)| (i.updated_at, std::cmp::Reverse(*n)));
}

/// Dead items in enqueue order.
fn enqueue_order(_: &mut [(usize, Item)]) {}

/// A requeue or discard of `ids` instead of a filter; `None` when nothing matched.
macro_rules! by_ids {
    ($params:ident, $ids:expr) => {
        if let Some(ids) = $ids {
            if ids.is_empty() {
                return Ok(0);
            }
            $params.ids = ids;
            $params.filter = None;
        }
    };
}

flaw! {
    /// Takes a filter's dead items that died at one instant latest enqueued first.
    DeadFilterTiesNewestFirst
}

tenure_core::forward_store! {
    impl Store for DeadFilterTiesNewestFirst {
        forward self => self.inner;

        async fn dead_requeue(&self, mut params: RequeueParams) -> Result<u64> {
            let ids = taken_by(&self.inner, &self.clock, &params.filter, ties_newest_first).await?;
            by_ids!(params, ids);
            self.inner.dead_requeue(params).await
        }

        async fn dead_discard(&self, mut params: DiscardParams) -> Result<u64> {
            let ids = taken_by(&self.inner, &self.clock, &params.filter, ties_newest_first).await?;
            by_ids!(params, ids);
            self.inner.dead_discard(params).await
        }
    }
}

flaw! {
    /// Takes a filter's dead items in enqueue order, not by when they died.
    DeadFilterByEnqueueOrder
}

tenure_core::forward_store! {
    impl Store for DeadFilterByEnqueueOrder {
        forward self => self.inner;

        async fn dead_requeue(&self, mut params: RequeueParams) -> Result<u64> {
            let ids = taken_by(&self.inner, &self.clock, &params.filter, enqueue_order).await?;
            by_ids!(params, ids);
            self.inner.dead_requeue(params).await
        }

        async fn dead_discard(&self, mut params: DiscardParams) -> Result<u64> {
            let ids = taken_by(&self.inner, &self.clock, &params.filter, enqueue_order).await?;
            by_ids!(params, ids);
            self.inner.dead_discard(params).await
        }
    }
}

flaw! {
    /// Cancels a kept finished item like a ready one (deleting it, answering
    /// `Cancelled`), as a cancel of every item that is neither running nor dead would.
    CancelDeletesKeptFinishedItems { gone: Shared<HashSet<ItemId>> }; keep_done
}

tenure_core::forward_store! {
    impl Store for CancelDeletesKeptFinishedItems {
        forward self => self.inner;

        async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>> {
            params.validate(&self.limits())?;
            let mut out = Vec::new();
            for &id in &params.ids {
                let done = self
                    .inner
                    .item_get(id)
                    .await?
                    .is_some_and(|i| i.state == ItemState::Done);
                if done && lock(&self.gone).insert(id) {
                    out.push(CancelOutcome::Cancelled);
                    continue;
                }
                if lock(&self.gone).contains(&id) {
                    out.push(CancelOutcome::NotFound);
                    continue;
                }
                let mut one = CancelParams::new(vec![id]);
                one.stop_running.clone_from(&params.stop_running);
                out.extend(self.inner.item_cancel(one).await?);
            }
            Ok(out)
        }

        async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
            if lock(&self.gone).contains(&id) {
                return Ok(None);
            }
            self.inner.item_get(id).await
        }
    }
}

flaw! {
    /// Passes over the expired leases of paused queues in recovery, as a recovery
    /// going through the claim path's queue filter would.
    RecoveryPassesOverPausedQueues { frozen: Shared<HashMap<ItemId, Item>> }
}

tenure_core::forward_store! {
    impl Store for RecoveryPassesOverPausedQueues {
        forward self => self.inner;

        async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered> {
            let now = self.clock.now();
            let mut passed_over = Vec::new();
            for q in self.inner.queue_list().await? {
                if !self.inner.queue_counts(&q).await?.paused {
                    continue;
                }
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
            let mut recovered = self.inner.recover_expired(params).await?;
            for it in passed_over {
                recovered.requeued = recovered.requeued.saturating_sub(1);
                lock(&self.frozen).insert(it.id, it);
            }
            Ok(recovered)
        }

        async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
            if let Some(it) = lock(&self.frozen).get(&id) {
                return Ok(Some(it.clone()));
            }
            self.inner.item_get(id).await
        }
    }
}

/// Keeps a pause in the handle that paused, so claims through other handles onto
/// the same data go on (breaks the pause race).
#[derive(Clone, Debug)]
pub(crate) struct PausesOnlyItsOwnHandle {
    inner: MemoryStore,
    paused: Shared<HashSet<QueueName>>,
}

impl Broken for PausesOnlyItsOwnHandle {
    fn over(inner: MemoryStore, _clock: ManualClock) -> Self {
        PausesOnlyItsOwnHandle {
            inner,
            paused: Shared::default(),
        }
    }

    fn inner(&self) -> &MemoryStore {
        &self.inner
    }

    /// A peer starts with no pause of its own.
    fn peer(&self) -> Self {
        PausesOnlyItsOwnHandle {
            inner: self.inner.clone(),
            paused: Shared::default(),
        }
    }
}

tenure_core::forward_store! {
    impl Store for PausesOnlyItsOwnHandle {
        forward self => self.inner;

        async fn claim(&self, mut params: ClaimParams) -> Result<Vec<Lease>> {
            let paused = lock(&self.paused).clone();
            params.queues.retain(|q| !paused.contains(q));
            if params.queues.is_empty() {
                return Ok(Vec::new());
            }
            self.inner.claim(params).await
        }

        async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
            let c = self.inner.queue_counts(queue).await?;
            Ok(c.with_paused(lock(&self.paused).contains(queue)))
        }

        async fn queue_pause(&self, params: PauseParams) -> Result<bool> {
            Ok(lock(&self.paused).insert(params.queue))
        }

        async fn queue_resume(&self, params: PauseParams) -> Result<bool> {
            Ok(lock(&self.paused).remove(&params.queue))
        }
    }
}
