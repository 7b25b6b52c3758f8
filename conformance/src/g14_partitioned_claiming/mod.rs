//! G14 Partitioned claiming (optional): partition = hash(stream or id) mod P; the
//! registered instances are ranked by id; rank r takes the unpinned work of the
//! partitions p with p mod live_count == r; a stream stays pinned to the instance that
//! first took it until that instance leaves the registry, in every queue the stream has
//! items in. A stream may also be pinned at enqueue. The rules are in
//! [`tenure_core::partition`].
//!
//! Two cases are mandatory, the first of the claims and the first of the pins: a store
//! that does not declare [`Capability::PartitionedClaiming`] must refuse a partitioned
//! claim, and a pin at enqueue, instead of quietly ignoring them, and one that does must
//! serve them. Every other case needs the capability.
//!
//! - `claims`: shares by rank, pins made by claims, eviction and deregistration;
//! - `pins`: streams pinned at enqueue;
//! - `across_queues`: a stream's pin reaches every queue.

mod across_queues;
mod claims;
mod pins;
mod shares;

use crate::case::{register, Capability, Case};
use crate::harness::Harness;

use across_queues::a_streams_pin_holds_in_every_queue_of_the_stream;
use claims::{
    a_free_scopes_item_in_the_share_is_taken_behind_one_outside_it,
    a_stream_goes_by_partition_then_stays_pinned_when_instances_join,
    an_unregistered_owner_is_refused_and_nothing_changes,
    claims_without_partitioning_ignore_shares_and_pins,
    deregistration_unpins_the_instances_streams,
    each_instance_takes_exactly_the_share_its_rank_gives_it,
    eviction_unpins_the_evicted_instances_streams,
    partitioned_claims_are_served_only_by_stores_that_declare_them,
    racing_instances_take_disjoint_shares_and_keep_each_stream_on_one_instance,
    streams_and_scopes_keep_their_rules_in_partitioned_claims,
    zero_partitions_are_refused_naming_the_field,
};
use pins::{
    a_stream_pinned_at_enqueue_goes_only_to_the_enqueuing_instance_first_pin_winning,
    eviction_drops_a_pin_made_at_enqueue,
    pinning_at_enqueue_is_served_only_by_stores_that_declare_partitioned_claiming,
    pinning_at_enqueue_to_an_unregistered_instance_is_refused_and_writes_nothing,
};

pub(crate) const GROUP: &str = "g14_partitioned_claiming";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    let mut all = register![GROUP;
        partitioned_claims_are_served_only_by_stores_that_declare_them,
    ];
    all.extend(register![GROUP, Capability::PartitionedClaiming;
        each_instance_takes_exactly_the_share_its_rank_gives_it,
        an_unregistered_owner_is_refused_and_nothing_changes,
        zero_partitions_are_refused_naming_the_field,
        a_stream_goes_by_partition_then_stays_pinned_when_instances_join,
        eviction_unpins_the_evicted_instances_streams,
        deregistration_unpins_the_instances_streams,
        streams_and_scopes_keep_their_rules_in_partitioned_claims,
        a_free_scopes_item_in_the_share_is_taken_behind_one_outside_it,
        claims_without_partitioning_ignore_shares_and_pins,
        racing_instances_take_disjoint_shares_and_keep_each_stream_on_one_instance,
    ]);
    all.extend(register![GROUP;
        pinning_at_enqueue_is_served_only_by_stores_that_declare_partitioned_claiming,
    ]);
    all.extend(register![GROUP, Capability::PartitionedClaiming;
        a_stream_pinned_at_enqueue_goes_only_to_the_enqueuing_instance_first_pin_winning,
        pinning_at_enqueue_to_an_unregistered_instance_is_refused_and_writes_nothing,
        eviction_drops_a_pin_made_at_enqueue,
        a_streams_pin_holds_in_every_queue_of_the_stream,
    ]);
    all
}
