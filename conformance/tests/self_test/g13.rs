//! The flaws that break G13, the leader lease: each broken store must fail the cases named with it.

use super::*;

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
async fn reading_the_leader_by_taking_and_giving_back_its_lease_fails_g13() {
    must_fail_only(
        Flaw::ReadsTheLeaderByAcquiring,
        "g13_leader",
        "reading_the_leader_never_changes_its_holder_or_term",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_an_expired_holder_as_the_leader_fails_g13() {
    must_fail(
        Flaw::ReadsAnExpiredLeader,
        "g13_leader",
        "an_expired_or_resigned_lease_reads_as_no_leader",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_no_leader_when_unreachable_fails_g13() {
    must_fail_only(
        Flaw::NoLeaderWhenUnreachable,
        "g13_leader",
        "reading_the_leader_of_an_unreachable_store_is_an_error_never_none",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_leader_lease_fails_g13() {
    must_fail(
        Flaw::FixedLeaderLease,
        "g13_leader",
        "the_leader_lease_duration_decides_when_another_may_lead",
    )
    .await;
}
