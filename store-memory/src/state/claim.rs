//! Enqueue and claim (the contract's first group): [`State::enqueue`] and the
//! claims, ordinary and partitioned, with what every claim does first (recover the
//! claimed queues' expired leases, move their due scheduled items) and the stream runs.

use std::time::Duration;

use tenure_core::machine;
use tenure_core::partition::{self, Partitioning};
use tenure_core::{
    DedupKey, Enqueued, ItemId, ItemState, Lease, LeaseId, NewItem, OwnerId, QueueName, Recovered,
    StreamKey, Timestamp,
};

use super::limits::Gate;
use super::running::Claimed;
use super::{across_queues, DedupEntry, Entry, HashMap, OrderKey, Slot, State};

impl State {
    /// `Store::enqueue`.
    pub(crate) fn enqueue(
        &mut self,
        items: &[NewItem],
        pin_to: Option<&OwnerId>,
        now: Timestamp,
    ) -> tenure_core::Result<Vec<Enqueued>> {
        // Decide everything first, so an error writes nothing.
        if let Some(owner) = pin_to {
            if !self.instances.contains_key(owner) {
                return Err(tenure_core::Error::not_found("instance", owner.to_string()));
            }
        }
        let mut seen: HashMap<(&QueueName, &DedupKey), ItemId> = HashMap::default();
        let mut duplicate_of = Vec::with_capacity(items.len());
        for new in items {
            let mut dup = None;
            if let Some(key) = &new.dedup_key {
                if let Some(&id) = seen.get(&(&new.queue, key)) {
                    dup = Some(id);
                } else if let Some(d) = self
                    .queue_ids
                    .get(&new.queue)
                    .and_then(|&q| self.idx.queues[q].dedup.get(key))
                    .filter(|d| d.expires_at > now)
                {
                    dup = Some(d.id);
                } else {
                    seen.insert((&new.queue, key), new.id);
                }
            }
            if dup.is_none() && self.items.contains(new.id) {
                return Err(tenure_core::Error::conflict(
                    "item",
                    format!("an item with id {} already exists", new.id),
                ));
            }
            duplicate_of.push(dup);
        }
        let mut out = Vec::with_capacity(items.len());
        for (new, dup) in items.iter().zip(duplicate_of) {
            if let Some(id) = dup {
                out.push(Enqueued {
                    id,
                    duplicate: true,
                });
                continue;
            }
            let id = new.id;
            let seq = self.next_seq;
            self.next_seq += 1;
            let q = self.queue_id(&new.queue);
            let tag = self.idx.queues[q].limits.fair_tag(new);
            if let Some(key) = &new.dedup_key {
                let expires_at = now + new.dedup_window;
                let old = self.idx.queues[q]
                    .dedup
                    .insert(key.clone(), DedupEntry { id, expires_at });
                if let Some(old) = old {
                    self.dedup_expiry
                        .remove(&(old.expires_at, new.queue.clone(), key.clone()));
                }
                self.dedup_expiry
                    .insert((expires_at, new.queue.clone(), key.clone()));
            }
            let e = self.items.insert(id, |slot| Entry {
                item: machine::enqueue(new, now),
                seq,
                queue: q,
                slot,
                limit_key: new.limit_key.clone(),
                tag,
            });
            let slot = e.slot;
            self.idx.join_members(q, slot);
            let head = match &new.stream {
                None => true,
                Some(s) => {
                    let list = self.idx.streams.entry(s.clone()).or_default();
                    list.insert(seq, slot);
                    list.len() == 1
                }
            };
            if head {
                self.idx.place(e, now);
            }
            // G14: a stream pinned to nobody goes to the enqueuing instance.
            if let (Some(owner), Some(stream)) = (pin_to, &new.stream) {
                if !self.idx.pins.contains_key(stream) {
                    self.idx.pins.insert(stream.clone(), owner.clone());
                }
            }
            out.push(Enqueued {
                id,
                duplicate: false,
            });
        }
        Ok(out)
    }

    /// Extends the run of `stream`, whose head at `seq` was just claimed, with the
    /// items right behind it while each is ready, due, in one of `qs` and free of a busy
    /// scope, until the run holds `run` items or `leases` holds `limit` (G9).
    #[allow(clippy::too_many_arguments)]
    fn extend_run(
        &mut self,
        stream: &StreamKey,
        seq: u64,
        qs: &[usize],
        (run, limit): (usize, usize),
        (owner, lease, lease_for): (&OwnerId, LeaseId, Duration),
        now: Timestamp,
        leases: &mut Vec<Lease>,
    ) {
        let Some(list) = self.idx.streams.get(stream) else {
            return;
        };
        let behind: Vec<Slot> = list
            .range(seq + 1..)
            .take(run.saturating_sub(1))
            .map(|(_, slot)| *slot)
            .collect();
        for slot in behind {
            if leases.len() >= limit {
                break;
            }
            self.idx.visits += 1;
            let Some(e) = self.items.get(slot) else {
                break;
            };
            let scope_busy = e
                .item
                .scope
                .as_ref()
                .and_then(|sc| self.idx.scopes.get(sc))
                .is_some_and(|sc| sc.running.is_some());
            if !machine::is_due(&e.item, now) || !qs.contains(&e.queue) || scope_busy {
                break;
            }
            let (q, key) = (e.queue, e.order_key());
            let lk = e.limit_key.clone();
            if !matches!(self.idx.queues[q].limits.gate(lk.as_ref(), now), Gate::Open) {
                break;
            }
            if !self.take(slot, q, key, (owner, lease, lease_for), now, leases) {
                break;
            }
        }
    }

    /// `Store::claim`, its leases pushed onto `leases` (empty; allocated by the
    /// caller before it took the lock).
    pub(crate) fn claim(
        &mut self,
        queues: &[QueueName],
        owner: &OwnerId,
        (limit, run): (usize, usize),
        lease_for: Duration,
        now: Timestamp,
        mut leases: Vec<Lease>,
    ) -> Vec<Lease> {
        // One lease id for the leases of this claim: it only has to differ between the
        // leases of one item (`LeaseId`).
        let lease = LeaseId::mint();
        let qs = self.prepare_claim(queues, now);
        // Queues found at their own bound (G16, G17) during this claim.
        let mut shut: Vec<usize> = Vec::new();
        while leases.len() < limit {
            let mut best: Option<(OrderKey, usize)> = None;
            for &q in &qs {
                if !shut.is_empty() && shut.contains(&q) {
                    continue;
                }
                if let Some((k, _)) = self.idx.queues[q].ready.first_key_value() {
                    self.idx.visits += 1;
                    if best.is_none_or(|(b, _)| across_queues(k) < across_queues(&b)) {
                        best = Some((*k, q));
                    }
                }
            }
            let Some((key, q)) = best else {
                break;
            };
            // The chosen key is the first of its queue's ready index.
            let Some((_, slot)) = self.idx.queues[q].ready.pop_first() else {
                break;
            };
            let lk = self.items.get(slot).and_then(|e| e.limit_key.clone());
            match self.idx.queues[q].limits.gate(lk.as_ref(), now) {
                Gate::Open => {}
                Gate::QueueShut => {
                    self.idx.queues[q].ready.insert(key, slot);
                    shut.push(q);
                    continue;
                }
                Gate::KeyShut(at) => {
                    if let Some(lk) = &lk {
                        self.idx.queues[q].limits.park(lk, key, slot, at);
                    }
                    continue;
                }
            }
            if self.take(slot, q, key, (owner, lease, lease_for), now, &mut leases) {
                let head = leases
                    .last()
                    .and_then(|l| l.item.stream.clone())
                    .filter(|_| run > 1);
                if let (Some(stream), Some(e)) = (head, self.items.get(slot)) {
                    let seq = e.seq;
                    self.extend_run(
                        &stream,
                        seq,
                        &qs,
                        (run, limit),
                        (owner, lease, lease_for),
                        now,
                        &mut leases,
                    );
                }
            }
        }
        self.note_owner(owner);
        self.scratch_queues = qs;
        leases
    }

    /// `Store::claim` with [`Partitioning`] (G14): the owner's share of the claimable
    /// items, pinning the streams it takes. `None` when `owner` is not registered
    /// (nothing changed).
    ///
    /// This walks every due candidate of the queues, the scoped ones waiting behind
    /// their scope's first included, so it costs O(n log n) where an ordinary claim
    /// costs O(B log n): partitioning buys nothing within one process, and this store
    /// offers it so that code and tests written for it run here too.
    pub(crate) fn claim_partitioned(
        &mut self,
        queues: &[QueueName],
        owner: &OwnerId,
        (limit, run): (usize, usize),
        lease_for: Duration,
        partitioning: Partitioning,
        now: Timestamp,
    ) -> Option<Vec<Lease>> {
        if !self.instances.contains_key(owner) {
            return None;
        }
        let live = u32::try_from(self.instances.len()).unwrap_or(u32::MAX);
        let rank = u32::try_from(self.instances.keys().filter(|id| *id < owner).count())
            .unwrap_or(u32::MAX);
        let lease = LeaseId::mint();
        let qs = self.prepare_claim(queues, now);
        // Every due candidate: the ready index, and the scoped items waiting behind
        // the first of a free scope.
        let mut candidates: Vec<(OrderKey, usize, Slot)> = Vec::new();
        for &q in &qs {
            for (k, slot) in self.idx.queues[q].ready.iter() {
                candidates.push((*k, q, *slot));
            }
        }
        for sc in self.idx.scopes.values() {
            if sc.running.is_some() {
                continue;
            }
            for &q in &qs {
                if let Some(w) = sc.waiting.get(&q) {
                    // The first is in `ready` already.
                    candidates.extend(w.iter().skip(1).map(|(k, slot)| (*k, q, *slot)));
                }
            }
        }
        self.idx.visits += candidates.len() as u64;
        candidates.sort_unstable();
        let mut leases = Vec::new();
        for (key, q, slot) in candidates {
            if leases.len() >= limit {
                break;
            }
            let Some(e) = self.items.get(slot) else {
                continue;
            };
            let mine = match e.item.stream.as_ref().and_then(|s| self.idx.pins.get(s)) {
                Some(pinned_to) => pinned_to == owner,
                None => {
                    let hash = partition::key_hash(e.item.stream.as_ref(), e.item.id);
                    partition::takes(partitioning.partition_of(hash), rank, live)
                }
            };
            // An earlier item of this batch may have taken the scope.
            let scope_busy = e
                .item
                .scope
                .as_ref()
                .and_then(|sc| self.idx.scopes.get(sc))
                .is_some_and(|sc| sc.running.is_some());
            if !mine || scope_busy {
                continue;
            }
            let lk = e.limit_key.clone();
            if !matches!(self.idx.queues[q].limits.gate(lk.as_ref(), now), Gate::Open) {
                continue;
            }
            let stream = e.item.stream.clone();
            let seq = e.seq;
            if self.idx.queues[q].ready.remove(&key).is_none() {
                // Taken out of `ready` by an earlier run of this claim, or passed over.
                if !self.idx.is_stream_head(e) || e.item.state != ItemState::Ready {
                    continue;
                }
            }
            if self.take(slot, q, key, (owner, lease, lease_for), now, &mut leases) {
                if let Some(stream) = stream {
                    self.idx
                        .pins
                        .entry(stream.clone())
                        .or_insert_with(|| owner.clone());
                    if run > 1 {
                        self.extend_run(
                            &stream,
                            seq,
                            &qs,
                            (run, limit),
                            (owner, lease, lease_for),
                            now,
                            &mut leases,
                        );
                    }
                }
            }
        }
        self.note_owner(owner);
        self.scratch_queues = qs;
        Some(leases)
    }

    /// What every claim does first: recovers the expired leases of `queues` (G2, G6)
    /// and moves their scheduled candidates that have come due (G7). Returns the
    /// indexes of the queues that exist.
    fn prepare_claim(&mut self, queues: &[QueueName], now: Timestamp) -> Vec<usize> {
        // The claim hands the vector back when it is done, so a claim allocates none.
        let mut qs = std::mem::take(&mut self.scratch_queues);
        qs.clear();
        if let [queue] = queues {
            // One queue, the common claim: no sort, and the queue of the last claim
            // is found without hashing its name.
            qs.extend(self.claim_queue_id(queue));
        } else {
            qs.extend(queues.iter().filter_map(|q| self.queue_ids.get(q).copied()));
            qs.sort_unstable();
            qs.dedup();
        }
        // Expired leases of these queues first (G2, G6).
        let mut recovered = Recovered::default();
        for &q in &qs {
            self.recover_queue(q, now, u64::MAX, &mut recovered);
        }
        // A paused queue's items are not claimed; its expired leases are still
        // recovered above, as a maintenance pass would.
        qs.retain(|&q| !self.idx.queues[q].paused);
        // Scheduled candidates that have come due (G7).
        for &q in &qs {
            loop {
                let qi = &mut self.idx.queues[q];
                match qi.scheduled.first_key_value() {
                    Some((&(at, _), _)) if at <= now => {}
                    _ => break,
                }
                let Some((_, slot)) = qi.scheduled.pop_first() else {
                    break;
                };
                self.idx.visits += 1;
                if let Some(e) = self.items.get(slot) {
                    self.idx.place_due(e);
                }
            }
        }
        // Parked candidates whose keys have room again (G16, G17).
        self.unpark_due(&qs, now);
        qs
    }

    /// Claims the candidate in `slot` (already out of `ready`) of queue `q` for
    /// `owner`: the transition, the scope marker, the lease pushed onto `leases` and
    /// the claim onto `scratch_claims` (which [`note_owner`](Self::note_owner) writes
    /// into the running indexes at the end of the claim). False if it was not
    /// claimable (a bug: the ready index names only claimable items).
    fn take(
        &mut self,
        slot: Slot,
        q: usize,
        key: OrderKey,
        (owner, lease, lease_for): (&OwnerId, LeaseId, Duration),
        now: Timestamp,
        leases: &mut Vec<Lease>,
    ) -> bool {
        let expires_at = now + lease_for;
        let Some(e) = self.items.get_mut(slot) else {
            debug_assert!(false, "the ready index names an empty slot");
            return false;
        };
        if !machine::claim(&mut e.item, owner, lease, now, lease_for) {
            debug_assert!(false, "the ready index names an unclaimable item");
            return false;
        }
        if let Some(scope) = &e.item.scope {
            self.idx.scope_taken(scope, q, key, slot);
        }
        let c = Claimed {
            at: expires_at,
            seq: e.seq,
            attempt: e.item.attempt,
            slot,
        };
        self.idx.running_now += 1;
        self.idx.queues[q].limits.taken(e.limit_key.as_ref(), now);
        self.idx.queues[q].limits.served(e.tag);
        self.scratch_claims.push((q, c));
        self.items.push_lease(slot, owner, expires_at, leases)
    }

    /// Records what `owner` just claimed (`scratch_claims`) in the expiry index of its
    /// queue (G2) and the owner index (G12), and sweeps the running indexes when they
    /// have grown stale. One claim's leases share an expiry, so each queue's run of
    /// them goes into the expiry index with one bucket lookup rather than one each.
    fn note_owner(&mut self, owner: &OwnerId) {
        let claimed = &mut self.scratch_claims;
        if claimed.is_empty() {
            return;
        }
        let idx = &mut self.idx;
        idx.expiry_push_all(claimed);
        let list = match idx.owners.get_mut(owner) {
            Some(list) => list,
            None => idx.owners.entry(owner.clone()).or_default(),
        };
        idx.owner_records += claimed.len();
        match claimed.as_slice() {
            [(_, c)] => list.push(*c),
            all => list.extend(all.iter().map(|(_, c)| *c)),
        }
        claimed.clear();
        idx.compact(&self.items);
    }
}
