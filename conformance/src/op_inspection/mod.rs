//! Inspection: operators list a queue's items by state in enqueue order, paged by an
//! opaque cursor, list its live leases, see its counts with the oldest due item's wait
//! and its pause flag, and list the known queues.
//!
//! - `items`: item listings and their pages;
//! - `leases`: lease listings and their pages;
//! - `queues`: queue counts and the queue list.

mod items;
mod leases;
mod queues;

use crate::case::{register, Case};
use crate::harness::Harness;

use items::{
    a_delayed_item_is_listed_ready_from_the_instant_it_is_due,
    a_queue_shows_nothing_of_the_queues_whose_names_it_begins,
    listings_split_items_by_state_and_carry_attempt_owner_expiry_and_error,
    page_size_and_foreign_cursors_are_refused_naming_the_field,
    pages_show_every_item_once_in_enqueue_order_either_way,
};
use leases::{
    lease_list_shows_an_expired_lease_until_it_is_recovered,
    lease_list_shows_owner_attempt_expiry_and_renewals_soonest_expiry_first,
    lease_pages_show_leases_of_one_expiry_each_once,
};
use queues::{
    queue_counts_count_kept_finished_items_as_done,
    queue_counts_report_the_oldest_due_wait_and_the_pause,
    queue_list_names_a_queue_whose_only_items_are_scheduled_running_or_kept_done,
    queue_list_names_every_queue_with_items_and_every_paused_queue,
    the_oldest_due_wait_of_a_delayed_or_retried_item_counts_from_its_run_at,
};

pub(crate) const GROUP: &str = "op_inspection";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        pages_show_every_item_once_in_enqueue_order_either_way,
        listings_split_items_by_state_and_carry_attempt_owner_expiry_and_error,
        page_size_and_foreign_cursors_are_refused_naming_the_field,
        lease_list_shows_owner_attempt_expiry_and_renewals_soonest_expiry_first,
        queue_counts_report_the_oldest_due_wait_and_the_pause,
        queue_list_names_every_queue_with_items_and_every_paused_queue,
        the_oldest_due_wait_of_a_delayed_or_retried_item_counts_from_its_run_at,
        a_queue_shows_nothing_of_the_queues_whose_names_it_begins,
        lease_list_shows_an_expired_lease_until_it_is_recovered,
        queue_list_names_a_queue_whose_only_items_are_scheduled_running_or_kept_done,
        lease_pages_show_leases_of_one_expiry_each_once,
        a_delayed_item_is_listed_ready_from_the_instant_it_is_due,
        queue_counts_count_kept_finished_items_as_done,
    ]
}
