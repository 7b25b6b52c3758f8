//! The flaws that break G14, partitioned claiming: each broken store must fail the cases named with it.

use super::*;
use crate::g09::StreamsPerQueue;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_partitions_fails_g14() {
    must_fail(
        broken::<IgnoresPartitions>(),
        "g14_partitioned_claiming",
        "each_instance_takes_exactly_the_share_its_rank_gives_it",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_partitioned_claims_without_the_capability_fails_g14() {
    must_fail(
        broken::<ClaimsAllWithoutThePartitionCapability>(),
        "g14_partitioned_claiming",
        "partitioned_claims_are_served_only_by_stores_that_declare_them",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_enqueue_pins_fails_g14() {
    must_fail(
        broken::<IgnoresEnqueuePins>(),
        "g14_partitioned_claiming",
        "a_stream_pinned_at_enqueue_goes_only_to_the_enqueuing_instance_first_pin_winning",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_enqueue_pins_fails_the_unregistered_pin_refusal_of_g14() {
    must_fail(
        broken::<IgnoresEnqueuePins>(),
        "g14_partitioned_claiming",
        "pinning_at_enqueue_to_an_unregistered_instance_is_refused_and_writes_nothing",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_enqueue_pins_fails_the_eviction_of_a_pin_of_g14() {
    must_fail(
        broken::<IgnoresEnqueuePins>(),
        "g14_partitioned_claiming",
        "eviction_drops_a_pin_made_at_enqueue",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinning_at_enqueue_without_the_capability_fails_g14() {
    must_fail(
        broken::<ClaimsAllWithoutThePartitionCapability>(),
        "g14_partitioned_claiming",
        "pinning_at_enqueue_is_served_only_by_stores_that_declare_partitioned_claiming",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keying_streams_by_queue_fails_g14_pins_across_queues() {
    must_fail(
        broken::<StreamsPerQueue>(),
        "g14_partitioned_claiming",
        "a_streams_pin_holds_in_every_queue_of_the_stream",
    )
    .await;
}

flaw! {
    /// Declares partitioned claiming but claims as if no partitioning were asked (G14).
    IgnoresPartitions
}

tenure_core::forward_store! {
    impl Store for IgnoresPartitions {
        forward self => self.inner;

        async fn claim(&self, mut params: ClaimParams) -> Result<Vec<Lease>> {
            params.partitioning = None;
            self.inner.claim(params).await
        }
    }
}

flaw! {
    /// Does not declare partitioned claiming, yet serves partitioned claims as ordinary
    /// ones instead of refusing them (G14's mandatory case).
    ClaimsAllWithoutThePartitionCapability
}

tenure_core::forward_store! {
    impl Store for ClaimsAllWithoutThePartitionCapability {
        forward self => self.inner;

        fn capabilities(&self) -> Capabilities {
            Capabilities::default()
        }

        async fn claim(&self, mut params: ClaimParams) -> Result<Vec<Lease>> {
            params.partitioning = None;
            self.inner.claim(params).await
        }
    }
}

flaw! {
    /// Drops the pin of an enqueue (G14).
    IgnoresEnqueuePins
}

tenure_core::forward_store! {
    impl Store for IgnoresEnqueuePins {
        forward self => self.inner;

        async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
            params.pin_to = None;
            self.inner.enqueue(params).await
        }
    }
}
