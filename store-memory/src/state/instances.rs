//! Instances and leader (the contract's fourth group): heartbeats, eviction and
//! deregistration (which release an owner's leases), and the leader leases.

use std::time::Duration;

use tenure_core::machine::{self, Recovery};
use tenure_core::{
    Evicted, Instance, ItemState, LeaderInfo, LeaderName, LeaderStatus, OwnerId, Timestamp,
};

use super::running::Claimed;
use super::{LeaderLease, Registered, State};

impl State {
    /// `Store::instance_heartbeat`.
    pub(crate) fn heartbeat(&mut self, instance: &OwnerId, now: Timestamp) {
        if let Some(r) = self.instances.get_mut(instance) {
            r.instance.last_seen = now;
            return;
        }
        let order = self.next_registration;
        self.next_registration += 1;
        self.instances.insert(
            instance.clone(),
            Registered {
                order,
                instance: Instance {
                    id: instance.clone(),
                    started_at: now,
                    last_seen: now,
                },
            },
        );
    }

    /// `Store::instance_list`.
    pub(crate) fn instance_list(&self) -> Vec<Instance> {
        let mut all: Vec<&Registered> = self.instances.values().collect();
        all.sort_by_key(|r| r.order);
        all.into_iter().map(|r| r.instance.clone()).collect()
    }

    /// `Store::instance_evict_stale`.
    pub(crate) fn evict_stale(&mut self, stale_after: Duration, now: Timestamp) -> Evicted {
        let mut stale: Vec<(u64, OwnerId)> = self
            .instances
            .values()
            .filter(|r| r.instance.last_seen + stale_after <= now)
            .map(|r| (r.order, r.instance.id.clone()))
            .collect();
        stale.sort();
        let mut evicted = Evicted::default();
        for (_, owner) in stale {
            self.instances.remove(&owner);
            self.idx.pins.retain(|_, pinned_to| *pinned_to != owner);
            evicted.released += self.release_owner(&owner, now);
            evicted.instances.push(owner);
        }
        evicted
    }

    /// `Store::instance_deregister`.
    pub(crate) fn deregister(&mut self, owner: &OwnerId, now: Timestamp) -> Evicted {
        let registered = self.instances.remove(owner).is_some();
        self.idx.pins.retain(|_, pinned_to| pinned_to != owner);
        Evicted {
            released: self.release_owner(owner, now),
            instances: if registered {
                vec![owner.clone()]
            } else {
                Vec::new()
            },
        }
    }

    /// Applies `machine::evict` to every running item of `owner`; returns how many.
    fn release_owner(&mut self, owner: &OwnerId, now: Timestamp) -> u64 {
        let records = self.idx.owners.remove(owner).unwrap_or_default();
        self.idx.owner_records -= records.len();
        let mut running: Vec<Claimed> =
            records.into_iter().filter(|c| self.items.runs(c)).collect();
        // In enqueue order, so the head of a stream run is evicted before the items
        // behind it, which are then put back untouched (G9).
        running.sort_unstable_by_key(|c| c.seq);
        let mut released = 0;
        for Claimed { slot, .. } in running {
            let Some(e) = self.items.get_mut(slot) else {
                continue;
            };
            if e.item.state != ItemState::Running {
                continue;
            }
            self.idx.unlink_running(e);
            let after = e.item.stream.clone().map(|s| (s, e.seq));
            match machine::evict(&mut e.item, now) {
                Some(Recovery::Requeued) => {
                    self.place_if_candidate(slot, now);
                    released += 1;
                }
                Some(Recovery::Dead) => released += 1,
                None => {}
            }
            if let Some((stream, seq)) = after {
                self.put_back_after(&stream, seq, now);
            }
        }
        released
    }

    /// `Store::leader_acquire`.
    pub(crate) fn leader_acquire(
        &mut self,
        name: &LeaderName,
        holder: &OwnerId,
        lease_for: Duration,
        now: Timestamp,
    ) -> LeaderStatus {
        let expires_at = now + lease_for;
        if let Some(l) = self.leaders.get_mut(name) {
            if l.expires_at > now {
                if let Some(h) = &l.holder {
                    if h != holder {
                        return LeaderStatus::Follower {
                            holder: h.clone(),
                            term: l.term,
                            expires_at: l.expires_at,
                        };
                    }
                    // Held by the caller and live: extended, same term.
                    l.expires_at = expires_at;
                    return LeaderStatus::Leader {
                        term: l.term,
                        expires_at,
                    };
                }
            }
            // Free or expired: a new holder, a greater term.
            l.term += 1;
            l.holder = Some(holder.clone());
            l.expires_at = expires_at;
            return LeaderStatus::Leader {
                term: l.term,
                expires_at,
            };
        }
        self.leaders.insert(
            name.clone(),
            LeaderLease {
                holder: Some(holder.clone()),
                term: 1,
                expires_at,
            },
        );
        LeaderStatus::Leader {
            term: 1,
            expires_at,
        }
    }

    /// `Store::leader_get`: the live holder, if any; changes nothing.
    pub(crate) fn leader_get(&self, name: &LeaderName, now: Timestamp) -> Option<LeaderInfo> {
        let l = self.leaders.get(name)?;
        match &l.holder {
            Some(h) if l.expires_at > now => Some(LeaderInfo::new(h.clone(), l.term, l.expires_at)),
            _ => None,
        }
    }

    /// `Store::leader_resign`: true when the caller held the unexpired lease.
    pub(crate) fn leader_resign(
        &mut self,
        name: &LeaderName,
        holder: &OwnerId,
        now: Timestamp,
    ) -> bool {
        match self.leaders.get_mut(name) {
            Some(l) if l.expires_at > now && l.holder.as_ref() == Some(holder) => {
                l.holder = None;
                l.expires_at = now;
                true
            }
            _ => false,
        }
    }
}
