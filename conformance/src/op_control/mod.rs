//! Control: operators cancel ready and scheduled items (a running one only when asked
//! to stop it), pause and resume queues (held leases run on), and requeue or discard
//! dead items by filter in bounded batches.
//!
//! - `cancel`: cancelling items, alone, behind a stream's head and racing claims;
//! - `pause`: pausing and resuming queues;
//! - `dead_filter`: requeueing and discarding dead items by filter;
//! - `bad_input`: cancel and filter input that is refused, writing nothing;
//! - `stop`: stopping running items, their revoked leases refused;
//! - `progress`: progress reported with renewals, fenced on the lease.

mod bad_input;
mod cancel;
mod dead_filter;
mod pause;
mod progress;
mod stop;

use crate::case::{register, Case};
use crate::harness::Harness;

use bad_input::{
    bad_cancel_and_filter_input_is_refused_and_writes_nothing,
    bad_filter_ages_granted_attempts_and_cancel_batches_are_refused_naming_the_field,
};
use cancel::{
    a_cancel_racing_claims_never_leaves_an_item_both_cancelled_and_leased,
    a_cancelled_head_no_longer_holds_up_its_stream_or_scope,
    cancel_deletes_ready_and_scheduled_items_and_keeps_their_dedup_keys,
    cancel_leaves_a_kept_finished_item_alone_answering_done,
    cancel_leaves_running_dead_and_unknown_items_alone_and_says_which,
    cancelling_an_item_behind_its_stream_head_leaves_the_rest_of_the_stream_in_order,
};
use dead_filter::{
    a_bounded_dead_filter_takes_items_that_died_together_in_enqueue_order,
    a_bounded_dead_filter_takes_the_earliest_dead_first,
    a_dead_filter_takes_an_item_dead_for_exactly_older_than,
    a_dead_head_discarded_or_requeued_by_filter_lets_its_stream_move_on,
    a_filtered_requeue_grants_attempts_and_resets_stalls_as_a_requeue_by_id_does,
    dead_items_are_requeued_and_discarded_by_queue_and_age_in_bounded_batches,
};
use pause::{
    a_pause_racing_claims_is_told_consistently_to_every_racer,
    a_paused_queue_is_not_claimed_while_held_leases_run_on,
    a_paused_queues_expired_lease_is_recovered_and_its_failure_accepted_as_usual,
};
use progress::progress_is_kept_from_the_holder_and_refused_from_a_superseded_lease;
use stop::{
    a_stop_naming_no_valid_operator_is_refused_and_writes_nothing,
    a_stopped_lease_is_refused_on_every_renew_and_finish,
    cancelling_a_running_item_stops_it_dead_naming_who_and_when,
};

pub(crate) const GROUP: &str = "op_control";

/// The cases in the order they were written, which is the order a run shows them.
pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        cancel_deletes_ready_and_scheduled_items_and_keeps_their_dedup_keys,
        cancel_leaves_running_dead_and_unknown_items_alone_and_says_which,
        a_cancelled_head_no_longer_holds_up_its_stream_or_scope,
        a_paused_queue_is_not_claimed_while_held_leases_run_on,
        a_pause_racing_claims_is_told_consistently_to_every_racer,
        dead_items_are_requeued_and_discarded_by_queue_and_age_in_bounded_batches,
        bad_cancel_and_filter_input_is_refused_and_writes_nothing,
        a_cancel_racing_claims_never_leaves_an_item_both_cancelled_and_leased,
        a_bounded_dead_filter_takes_the_earliest_dead_first,
        a_filtered_requeue_grants_attempts_and_resets_stalls_as_a_requeue_by_id_does,
        a_dead_head_discarded_or_requeued_by_filter_lets_its_stream_move_on,
        a_dead_filter_takes_an_item_dead_for_exactly_older_than,
        cancelling_an_item_behind_its_stream_head_leaves_the_rest_of_the_stream_in_order,
        cancel_leaves_a_kept_finished_item_alone_answering_done,
        a_paused_queues_expired_lease_is_recovered_and_its_failure_accepted_as_usual,
        a_bounded_dead_filter_takes_items_that_died_together_in_enqueue_order,
        bad_filter_ages_granted_attempts_and_cancel_batches_are_refused_naming_the_field,
        cancelling_a_running_item_stops_it_dead_naming_who_and_when,
        a_stopped_lease_is_refused_on_every_renew_and_finish,
        a_stop_naming_no_valid_operator_is_refused_and_writes_nothing,
        progress_is_kept_from_the_holder_and_refused_from_a_superseded_lease,
    ]
}
