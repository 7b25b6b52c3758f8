//! The flaws that break G13, the leader lease: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answering_follower_when_unreachable_fails_g13() {
    must_fail(
        broken::<FollowerWhenUnreachable>(),
        "g13_leader",
        "an_unreachable_store_is_an_error_never_a_follower",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_the_leader_by_taking_and_giving_back_its_lease_fails_g13() {
    must_fail_only(
        broken::<ReadsTheLeaderByAcquiring>(),
        "g13_leader",
        "reading_the_leader_never_changes_its_holder_or_term",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_an_expired_holder_as_the_leader_fails_g13() {
    must_fail(
        broken::<ReadsAnExpiredLeader>(),
        "g13_leader",
        "an_expired_or_resigned_lease_reads_as_no_leader",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_no_leader_when_unreachable_fails_g13() {
    must_fail_only(
        broken::<NoLeaderWhenUnreachable>(),
        "g13_leader",
        "reading_the_leader_of_an_unreachable_store_is_an_error_never_none",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_leader_lease_fails_g13() {
    must_fail(
        broken::<FixedLeaderLease>(),
        "g13_leader",
        "the_leader_lease_duration_decides_when_another_may_lead",
    )
    .await;
}

flaw! {
    /// Answers Follower when the backend is unreachable (breaks G13).
    FollowerWhenUnreachable
}

tenure_core::forward_store! {
    impl Store for FollowerWhenUnreachable {
        forward self => self.inner;

        async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus> {
            let holder = params.holder.clone();
            match self.inner.leader_acquire(params).await {
                Err(Error::Unavailable { .. }) => Ok(LeaderStatus::Follower {
                    holder,
                    term: 0,
                    expires_at: Timestamp::EPOCH,
                }),
                other => other,
            }
        }
    }
}

flaw! {
    /// Reads the leader by taking the lease and giving it back when nobody holds it,
    /// so every read of a free lease raises its term (G13).
    ReadsTheLeaderByAcquiring
}

tenure_core::forward_store! {
    impl Store for ReadsTheLeaderByAcquiring {
        forward self => self.inner;

        async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
            let me = OwnerId::new("leader-reader")?;
            let params = LeaderParams::new(name.clone(), me, self.limits().min_lease);
            match self.inner.leader_acquire(params.clone()).await? {
                LeaderStatus::Follower {
                    holder,
                    term,
                    expires_at,
                } => Ok(Some(LeaderInfo::new(holder, term, expires_at))),
                LeaderStatus::Leader { .. } => {
                    self.inner.leader_resign(params).await?;
                    Ok(None)
                }
            }
        }
    }
}

flaw! {
    /// Reads the last holder it saw acquire the lease, expired or resigned (G13).
    ReadsAnExpiredLeader { leaders: Shared<HashMap<LeaderName, LeaderInfo>> }
}

tenure_core::forward_store! {
    impl Store for ReadsAnExpiredLeader {
        forward self => self.inner;

        async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus> {
            let holder = params.holder.clone();
            let name = params.name.clone();
            let status = self.inner.leader_acquire(params).await?;
            if let LeaderStatus::Leader { term, expires_at } = status {
                lock(&self.leaders).insert(name, LeaderInfo::new(holder, term, expires_at));
            }
            Ok(status)
        }

        async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
            self.inner.leader_get(name).await?;
            Ok(lock(&self.leaders).get(name).cloned())
        }
    }
}

flaw! {
    /// Reads no leader when the backend is unreachable (G13).
    NoLeaderWhenUnreachable
}

tenure_core::forward_store! {
    impl Store for NoLeaderWhenUnreachable {
        forward self => self.inner;

        async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
            match self.inner.leader_get(name).await {
                Err(Error::Unavailable { .. }) => Ok(None),
                other => other,
            }
        }
    }
}

flaw! {
    /// Leases the leader lease for 15 s, whatever was asked (G13).
    FixedLeaderLease
}

tenure_core::forward_store! {
    impl Store for FixedLeaderLease {
        forward self => self.inner;

        async fn leader_acquire(&self, mut params: LeaderParams) -> Result<LeaderStatus> {
            params.lease_for = Duration::from_secs(15);
            self.inner.leader_acquire(params).await
        }
    }
}
