//! The flaws that break G9, stream FIFO: each broken store must fail the cases named with it.

use super::*;
use crate::g07::ClaimsFutureItems;
use crate::g10::IgnoresScope;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_stream_order_fails_g09() {
    must_fail(
        broken::<IgnoresStreamOrder>(),
        "g09_stream_fifo",
        "a_running_item_blocks_later_items_of_its_stream",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_stream_runs_fails_g09() {
    must_fail(
        broken::<IgnoresStreamRuns>(),
        "g09_stream_fifo",
        "a_run_leases_the_head_and_the_ready_items_behind_it_in_order",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_stream_runs_fails_the_zero_run_refusal_of_g09() {
    must_fail(
        broken::<IgnoresStreamRuns>(),
        "g09_stream_fifo",
        "a_stream_run_of_zero_is_refused_naming_the_field",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_runs_without_the_capability_fails_g09() {
    must_fail(
        broken::<RunsWithoutTheCapability>(),
        "g09_stream_fifo",
        "stream_runs_are_served_only_by_stores_that_declare_them",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freeing_the_stream_behind_a_running_head_fails_g09() {
    must_fail(
        broken::<FreesTheStreamBehindARunningHead>(),
        "g09_stream_fifo",
        "completing_an_item_of_a_run_before_the_items_ahead_of_it_is_refused_and_changes_nothing",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_a_run_out_of_order_fails_g09() {
    must_fail_each(
        broken::<AcceptsRunItemsOutOfOrder>(),
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
        broken::<CountsARunAsOneLease>(),
        "g09_stream_fifo",
        "a_run_counts_towards_the_claim_limit",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claiming_future_items_fails_the_run_stop_of_g09() {
    must_fail(
        broken::<ClaimsFutureItems>(),
        "g09_stream_fifo",
        "a_run_stops_at_an_item_that_is_not_due_or_not_in_the_claimed_queues",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_scope_fails_the_run_stop_of_g09() {
    must_fail(
        broken::<IgnoresScope>(),
        "g09_stream_fifo",
        "a_run_stops_at_an_item_whose_scope_is_busy",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_a_run_running_after_a_failure_fails_g09() {
    must_fail(
        broken::<LeavesTheRunRunning>(),
        "g09_stream_fifo",
        "a_failed_item_of_a_run_puts_every_later_item_back_untouched",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_a_run_running_after_a_release_fails_g09() {
    must_fail(
        broken::<LeavesTheRunRunning>(),
        "g09_stream_fifo",
        "a_released_item_of_a_run_puts_every_later_item_back_untouched",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalling_a_whole_expired_run_fails_g09() {
    must_fail(
        broken::<StallsTheRunBehindItsHead>(),
        "g09_stream_fifo",
        "an_expired_run_is_recovered_from_its_head_without_stalls_behind_it",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalling_a_whole_evicted_run_fails_g09() {
    must_fail(
        broken::<StallsTheRunBehindItsHead>(),
        "g09_stream_fifo",
        "evicting_the_owner_of_a_run_puts_the_items_behind_its_head_back_untouched",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keying_streams_by_queue_fails_g09_across_queues() {
    must_fail(
        broken::<StreamsPerQueue>(),
        "g09_stream_fifo",
        "a_stream_spanning_two_queues_is_claimed_in_enqueue_order_across_them",
    )
    .await;
}

flaw! {
    /// Declares stream runs but claims heads only, whatever run is asked (G9).
    IgnoresStreamRuns
}

tenure_core::forward_store! {
    impl Store for IgnoresStreamRuns {
        forward self => self.inner;

        async fn claim(&self, mut params: ClaimParams) -> Result<Vec<Lease>> {
            params.stream_run = 1;
            self.inner.claim(params).await
        }
    }
}

flaw! {
    /// Does not declare stream runs, yet serves them (G9's mandatory runs case).
    RunsWithoutTheCapability
}

tenure_core::forward_store! {
    impl Store for RunsWithoutTheCapability {
        forward self => self.inner;

        fn capabilities(&self) -> Capabilities {
            Capabilities::default().with_partitioned_claiming()
        }
    }
}

flaw! {
    /// Counts a whole run as one lease against the claim's limit (G9).
    CountsARunAsOneLease
}

tenure_core::forward_store! {
    impl Store for CountsARunAsOneLease {
        forward self => self.inner;

        async fn claim(&self, mut params: ClaimParams) -> Result<Vec<Lease>> {
            if params.stream_run > 1 {
                params.limit = (params.limit * params.stream_run).min(1_000);
            }
            self.inner.claim(params).await
        }
    }
}

flaw! {
    /// Answers an out-of-order complete of a run's item as accepted, as a store that
    /// does not check the stream's order would (G9).
    AcceptsRunItemsOutOfOrder
}

tenure_core::forward_store! {
    impl Store for AcceptsRunItemsOutOfOrder {
        forward self => self.inner;

        async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
            let out = self.inner.complete(params).await?;
            Ok(out
                .into_iter()
                .map(|o| match o {
                    TokenOutcome::OutOfOrder => TokenOutcome::Accepted,
                    o => o,
                })
                .collect())
        }
    }
}

flaw! {
    /// Drops the stream key on enqueue, showing it again on reads (breaks G9).
    IgnoresStreamOrder { streams: Shared<HashMap<ItemId, StreamKey>> }
}

impl IgnoresStreamOrder {
    fn hide(&self, item: &mut NewItem) -> Result<()> {
        if let Some(s) = item.stream.take() {
            lock(&self.streams).insert(item.id, s);
        }
        Ok(())
    }

    fn show(&self, item: &mut Item) {
        if let Some(s) = lock(&self.streams).get(&item.id) {
            item.stream = Some(s.clone());
        }
    }
}

hidden_on_enqueue!(IgnoresStreamOrder);

flaw! {
    /// Keys streams by queue and stream, so a stream's order and pin stop at its queue
    /// (breaks G9 and G14 across queues).
    StreamsPerQueue { streams: Shared<HashMap<ItemId, StreamKey>> }
}

impl StreamsPerQueue {
    fn hide(&self, item: &mut NewItem) -> Result<()> {
        if let Some(s) = item.stream.take() {
            item.stream = Some(StreamKey::new(format!("{}/{s}", item.queue))?);
            lock(&self.streams).insert(item.id, s);
        }
        Ok(())
    }

    fn show(&self, item: &mut Item) {
        if let Some(s) = lock(&self.streams).get(&item.id) {
            item.stream = Some(s.clone());
        }
    }
}

hidden_on_enqueue!(StreamsPerQueue);

flaw! {
    /// Leaves the later items of a run running after an earlier one fails or is
    /// released, as a store without the put-back rule would (G9).
    LeavesTheRunRunning {
        tails: Shared<Vec<Lease>>,
        kept: Shared<HashMap<ItemId, Lease>>,
    }
}

impl LeavesTheRunRunning {
    /// The items of a run behind each of `failed` are shown as still running under
    /// their lease.
    async fn keep_tails_behind(&self, failed: &[LeaseToken]) -> Result<()> {
        for t in failed {
            let Some(item) = self.inner.item_get(t.id).await? else {
                continue;
            };
            if !(item.state == ItemState::Running && item.attempt == t.attempt) {
                continue;
            }
            let tails = lock(&self.tails);
            let from = tails.iter().position(|l| l.token.id == t.id);
            let later = tails.iter().enumerate().filter(|(j, l)| {
                l.item.stream == item.stream && from.is_none_or(|p| *j > p) && l.token != *t
            });
            let mut kept = lock(&self.kept);
            for (_, l) in later {
                kept.insert(l.token.id, l.clone());
            }
        }
        Ok(())
    }
}

tenure_core::forward_store! {
    impl Store for LeavesTheRunRunning {
        forward self => self.inner;

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            let leases = self.inner.claim(params).await?;
            lock(&self.tails).extend(tails_of_runs(&leases));
            Ok(leases)
        }

        async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
            complete_unless_kept(&self.inner, &self.kept, params).await
        }

        async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>> {
            let tokens: Vec<LeaseToken> = params.failures.iter().map(|f| f.token).collect();
            self.keep_tails_behind(&tokens).await?;
            self.inner.fail(params).await
        }

        async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
            self.keep_tails_behind(&params.tokens).await?;
            self.inner.release(params).await
        }

        async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
            item_unless_kept(&self.inner, &self.kept, id).await
        }
    }
}

/// The leases of `leases` behind the head of their run, in claim order.
fn tails_of_runs(leases: &[Lease]) -> Vec<Lease> {
    leases
        .windows(2)
        .filter(|pair| pair[1].item.stream.is_some() && pair[1].item.stream == pair[0].item.stream)
        .map(|pair| pair[1].clone())
        .collect()
}

/// Completes each token, answering a token of a kept lease as accepted (and forgetting
/// the lease) without completing anything.
async fn complete_unless_kept(
    inner: &MemoryStore,
    kept: &Shared<HashMap<ItemId, Lease>>,
    params: CompleteParams,
) -> Result<Vec<TokenOutcome>> {
    let mut out = Vec::new();
    for t in params.tokens {
        let lease = lock(kept).remove(&t.id);
        match lease {
            Some(l) if l.token == t => out.push(TokenOutcome::Accepted),
            _ => out.extend(inner.complete(CompleteParams::new(vec![t])).await?),
        }
    }
    Ok(out)
}

/// The item, shown as still running when its lease is kept.
async fn item_unless_kept(
    inner: &MemoryStore,
    kept: &Shared<HashMap<ItemId, Lease>>,
    id: ItemId,
) -> Result<Option<Item>> {
    let lease = lock(kept).get(&id).cloned();
    match lease {
        Some(l) => Ok(Some(l.item)),
        None => inner.item_get(id).await,
    }
}

flaw! {
    /// Counts a stall on every item of an expired or evicted run, not only on its head,
    /// as a store recovering each item on its own would (G9).
    StallsTheRunBehindItsHead {
        tails: Shared<Vec<Lease>>,
        stalls: Shared<HashMap<ItemId, u32>>,
    }
}

impl StallsTheRunBehindItsHead {
    /// Every tail put back by recovery or eviction is shown with a stall of its own;
    /// returns how many.
    async fn stall_put_back_tails(&self) -> Result<u64> {
        let tails = std::mem::take(&mut *lock(&self.tails));
        let mut stalled = 0;
        let mut still = Vec::new();
        for l in tails {
            match self.inner.item_get(l.token.id).await? {
                Some(i) if i.state == ItemState::Ready && i.attempt == l.token.attempt => {
                    *lock(&self.stalls).entry(l.token.id).or_default() += 1;
                    stalled += 1;
                }
                _ => still.push(l),
            }
        }
        *lock(&self.tails) = still;
        Ok(stalled)
    }

    fn show(&self, item: &mut Item) {
        if let Some(&n) = lock(&self.stalls).get(&item.id) {
            item.stalls += n;
        }
    }
}

tenure_core::forward_store! {
    impl Store for StallsTheRunBehindItsHead {
        forward self => self.inner;

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            let mut leases = self.inner.claim(params).await?;
            lock(&self.tails).extend(tails_of_runs(&leases));
            for lease in &mut leases {
                self.show(&mut lease.item);
            }
            Ok(leases)
        }

        async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered> {
            let mut recovered = self.inner.recover_expired(params).await?;
            recovered.requeued += self.stall_put_back_tails().await?;
            Ok(recovered)
        }

        async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted> {
            let mut evicted = self.inner.instance_evict_stale(params).await?;
            evicted.released += self.stall_put_back_tails().await?;
            Ok(evicted)
        }

        async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
            let mut item = self.inner.item_get(id).await?;
            if let Some(item) = &mut item {
                self.show(item);
            }
            Ok(item)
        }
    }
}

flaw! {
    /// Lets the stream's next item be claimed once the items behind a run's head
    /// complete, while the head still runs, as a store promoting a new head on every
    /// complete would (G9).
    FreesTheStreamBehindARunningHead {
        runs: Shared<Vec<Lease>>,
        kept: Shared<HashMap<ItemId, Lease>>,
    }
}

impl FreesTheStreamBehindARunningHead {
    /// Before an item behind its run's head completes, the earlier items of its run
    /// that still run are completed underneath (so the stream moves on) and kept, shown
    /// as still running.
    async fn free_the_stream_behind(&self, tokens: &[LeaseToken]) -> Result<()> {
        for t in tokens {
            let earlier: Vec<Lease> = {
                let runs = lock(&self.runs);
                let kept = lock(&self.kept);
                let Some(at) = runs.iter().position(|l| l.token == *t) else {
                    continue;
                };
                let stream = &runs[at].item.stream;
                runs[..at]
                    .iter()
                    .filter(|l| l.item.stream == *stream && !kept.contains_key(&l.token.id))
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
                    lock(&self.kept).insert(l.token.id, l);
                }
            }
        }
        Ok(())
    }
}

tenure_core::forward_store! {
    impl Store for FreesTheStreamBehindARunningHead {
        forward self => self.inner;

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            let leases = self.inner.claim(params).await?;
            let mut runs = lock(&self.runs);
            for (j, l) in leases.iter().enumerate() {
                let same = |k: Option<usize>| {
                    k.and_then(|k| leases.get(k))
                        .is_some_and(|o| l.item.stream.is_some() && o.item.stream == l.item.stream)
                };
                if same(j.checked_sub(1)) || same(Some(j + 1)) {
                    runs.push(l.clone());
                }
            }
            drop(runs);
            Ok(leases)
        }

        async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
            self.free_the_stream_behind(&params.tokens).await?;
            complete_unless_kept(&self.inner, &self.kept, params).await
        }

        async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
            item_unless_kept(&self.inner, &self.kept, id).await
        }
    }
}
