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
        FlawedHarness(Flaw::FreesTheStreamBehindARunningHead),
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
        FlawedHarness(Flaw::LeavesTheRunRunning),
        "g09_stream_fifo",
        "a_failed_item_of_a_run_puts_every_later_item_back_untouched",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_a_run_running_after_a_release_fails_g09() {
    must_fail(
        FlawedHarness(Flaw::LeavesTheRunRunning),
        "g09_stream_fifo",
        "a_released_item_of_a_run_puts_every_later_item_back_untouched",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalling_a_whole_expired_run_fails_g09() {
    must_fail(
        FlawedHarness(Flaw::StallsTheRunBehindItsHead),
        "g09_stream_fifo",
        "an_expired_run_is_recovered_from_its_head_without_stalls_behind_it",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalling_a_whole_evicted_run_fails_g09() {
    must_fail(
        FlawedHarness(Flaw::StallsTheRunBehindItsHead),
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
