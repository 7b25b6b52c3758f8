//! The store's data, its indexes, and every operation as a synchronous function of
//! `now`. All of it runs under the store's one mutex; nothing here awaits.
//!
//! # Layout
//!
//! Items live in a slab (a vector of slots, in enqueue order until slots are reused);
//! every index names slots, so a claim walks from an index entry straight to its item
//! without hashing. A map from id to slot serves calls that name items by id or token.
//!
//! # Indexes
//!
//! An item that is `ready` and the head of its stream (or has no stream) is a
//! *candidate*. Every candidate sits in exactly one place of its queue:
//!
//! - `scheduled`, keyed `(run_at, seq)`, while its `run_at` was in the future when it
//!   was placed. A claim moves the entries that have come due into the ones below.
//! - unscoped and due: `ready`, keyed `(priority, run_at, seq)` (G8).
//! - scoped and due: its scope's `waiting` set for this queue, keyed the same way. Only
//!   the first of that set is also in `ready`, and only while no item of the scope runs
//!   (G10). Claiming it marks the scope busy and takes the scope's first waiting item
//!   of every queue out of `ready`; when the running item leaves `running`, they go
//!   back.
//!
//! So every entry of `ready` is claimable and a claim of `B` items touches about
//! `B` entries, whatever waits behind a schedule, a stream head or a busy scope. Items
//! of a stream behind its head sit in the stream's list only (G9); when the head
//! finishes or is discarded, the next one is placed. Running items are indexed by
//! lease expiry per queue (recovery) and by owner (eviction), lazily (see
//! [`running`]): a claim writes a record into each and a finalize touches neither.

mod operate;
mod ready;
mod running;

use std::collections::hash_map::Entry as HashEntry;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use self::ready::Ready;
use self::running::{Claimed, Expiries};
use tenure_core::machine::{self, Recovery};
use tenure_core::partition::{self, Partitioning};
use tenure_core::{
    DedupKey, Enqueued, Evicted, FailOutcome, Failure, Instance, Item, ItemId, ItemState,
    LeaderInfo, LeaderName, LeaderStatus, Lease, LeaseToken, NewItem, OwnerId, Purged, QueueCounts,
    QueueName, Recovered, RenewOutcome, ScopeKey, StreamKey, Timestamp, TokenOutcome,
};

/// A hash map with foldhash: every claim and complete looks up ids and keys, and
/// SipHash (the std default) measured as the largest single cost of a complete.
/// foldhash is seeded per process, so keys a caller chooses cannot be aimed at it.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Claim order (G8): priority, then `run_at`, then enqueue sequence.
type OrderKey = (i16, Timestamp, u64);
/// An instant, then the enqueue sequence to keep keys unique.
type TimeKey = (Timestamp, u64);
/// A position in the slab.
type Slot = usize;

/// One stored item and where it sits.
struct Entry {
    item: Item,
    /// Enqueue sequence: global, assigned in enqueue order (G8, G9).
    seq: u64,
    /// Index of its queue in [`Indexes::queues`].
    queue: usize,
    /// Its own slot.
    slot: Slot,
}

impl Entry {
    fn order_key(&self) -> OrderKey {
        (self.item.priority, self.item.run_at, self.seq)
    }
}

/// Items by slot, with free slots reused and a map from id to slot.
#[derive(Default)]
struct Slab {
    entries: Vec<Option<Entry>>,
    free: Vec<Slot>,
    by_id: HashMap<ItemId, Slot>,
    /// Payload buffers of deleted items, reused for the payload copies leases carry
    /// (see [`Slab::push_lease`]).
    spare: Vec<Vec<u8>>,
}

/// Spare payload buffers kept at most, and the largest capacity kept: at most
/// `SPARE_BUFFERS * SPARE_CAPACITY` bytes (256 KiB) held for reuse.
const SPARE_BUFFERS: usize = 256;
const SPARE_CAPACITY: usize = 1024;

impl Slab {
    fn get(&self, slot: Slot) -> Option<&Entry> {
        self.entries.get(slot).and_then(Option::as_ref)
    }

    fn get_mut(&mut self, slot: Slot) -> Option<&mut Entry> {
        self.entries.get_mut(slot).and_then(Option::as_mut)
    }

    fn find(&self, id: ItemId) -> Option<&Entry> {
        self.by_id.get(&id).and_then(|&s| self.get(s))
    }

    fn find_mut(&mut self, id: ItemId) -> Option<&mut Entry> {
        let slot = *self.by_id.get(&id)?;
        self.get_mut(slot)
    }

    fn contains(&self, id: ItemId) -> bool {
        self.by_id.contains_key(&id)
    }

    /// Stores the entry `make` builds for the slot it is given.
    fn insert(&mut self, id: ItemId, make: impl FnOnce(Slot) -> Entry) -> &Entry {
        let slot = self.free.pop().unwrap_or(self.entries.len());
        if slot == self.entries.len() {
            self.entries.push(None);
        }
        self.by_id.insert(id, slot);
        self.entries[slot].insert(make(slot))
    }

    /// Drops the entry in `slot` where it lies (an entry is large; moving it out to
    /// drop it was a measurable share of a complete) and answers what the indexes need
    /// to forget it: its queue, and its key in `done` if it was done.
    fn remove(&mut self, slot: Slot) -> Option<(usize, Option<TimeKey>)> {
        let (id, out) = self.remove_unmapped(slot)?;
        self.by_id.remove(&id);
        Some(out)
    }

    /// [`remove`](Self::remove) for an entry whose id is already out of `by_id`
    /// (see [`take_id`](Self::take_id)); answers its id too.
    fn remove_unmapped(&mut self, slot: Slot) -> Option<(ItemId, (usize, Option<TimeKey>))> {
        let cell = self.entries.get_mut(slot)?;
        let e = cell.as_mut()?;
        let id = e.item.id;
        let done = (e.item.state == ItemState::Done).then_some((e.item.updated_at, e.seq));
        let queue = e.queue;
        let payload = std::mem::take(&mut e.item.payload);
        *cell = None;
        self.free.push(slot);
        if payload.capacity() <= SPARE_CAPACITY && self.spare.len() < SPARE_BUFFERS {
            self.spare.push(payload);
        }
        Some((id, (queue, done)))
    }

    /// Pushes a lease on the item in `slot` (just claimed) onto `leases`, its
    /// payload copied into a spare buffer when there is one. A claim and the delete
    /// of a finished item were each an allocator call per item (the lease's copy, and
    /// the stored payload freed); with the buffers of deleted items reused, a steady
    /// claim + complete loop makes neither.
    ///
    /// The lease's item is written field by field in the lease literal rather than
    /// through `Item::clone` and a payload swap (which cloned every field and then
    /// swapped the payload in). A field added to `Item` fails to compile here, so
    /// none is ever left out.
    fn push_lease(
        &mut self,
        slot: Slot,
        owner: &OwnerId,
        expires_at: Timestamp,
        leases: &mut Vec<Lease>,
    ) -> bool {
        let Some(e) = self.entries.get(slot).and_then(Option::as_ref) else {
            return false;
        };
        let it = &e.item;
        let payload = match self.spare.pop() {
            Some(mut buf) => {
                buf.clear();
                buf.extend_from_slice(&it.payload);
                buf
            }
            None => it.payload.clone(),
        };
        leases.push(Lease {
            token: it.token(),
            owner: owner.clone(),
            expires_at,
            item: Item {
                id: it.id,
                queue: it.queue.clone(),
                payload,
                stream: it.stream.clone(),
                scope: it.scope.clone(),
                dedup_key: it.dedup_key.clone(),
                priority: it.priority,
                run_at: it.run_at,
                state: it.state,
                attempt: it.attempt,
                owner: it.owner.clone(),
                lease_expires_at: it.lease_expires_at,
                renewals: it.renewals,
                stalls: it.stalls,
                max_attempts: it.max_attempts,
                max_stalls: it.max_stalls,
                max_renewals: it.max_renewals,
                last_error: it.last_error.clone(),
                created_at: it.created_at,
                updated_at: it.updated_at,
            },
        });
        true
    }

    /// The slot of `id` when `pick` accepts its entry, with the id taken out of
    /// `by_id` when `unmap` is also true: one hash lookup for a finalize that deletes
    /// the item, where a lookup and then a removal were two.
    fn take_id(
        &mut self,
        id: ItemId,
        pick: impl FnOnce(&Entry) -> bool,
        unmap: bool,
    ) -> Option<Slot> {
        let HashEntry::Occupied(o) = self.by_id.entry(id) else {
            return None;
        };
        let slot = *o.get();
        if !pick(self.entries.get(slot)?.as_ref()?) {
            return None;
        }
        if unmap {
            o.remove();
        }
        Some(slot)
    }
}

/// A recorded dedup key (G11).
struct DedupEntry {
    id: ItemId,
    expires_at: Timestamp,
}

#[derive(Default)]
struct QueueIndex {
    /// Claimable now (see the module docs).
    ready: Ready,
    /// Candidates whose `run_at` was in the future when they were placed.
    scheduled: BTreeMap<TimeKey, Slot>,
    /// Running items by lease expiry (G2), lazily.
    running: Expiries,
    /// Every item of the queue, unordered, for `queue_counts`; a slot's place in it
    /// is in [`Indexes::member_pos`], so adding and removing one is O(1).
    members: Vec<Slot>,
    /// Dedup keys of the queue (G11).
    dedup: HashMap<DedupKey, DedupEntry>,
    /// Paused: claims pass the queue over (`Store::queue_pause`).
    paused: bool,
}

#[derive(Default)]
struct ScopeState {
    /// The one running item of the scope (G10).
    running: Option<Slot>,
    /// Due candidates of the scope, per queue, in claim order.
    waiting: HashMap<usize, BTreeMap<OrderKey, Slot>>,
}

#[derive(Default)]
struct Indexes {
    queues: Vec<QueueIndex>,
    /// Unfinished items (ready, running, dead) of each stream by enqueue sequence; the
    /// first is the head (G9).
    streams: HashMap<StreamKey, BTreeMap<u64, Slot>>,
    scopes: HashMap<ScopeKey, ScopeState>,
    /// Claims per owner, for eviction (G12), lazily: a record stays after its item
    /// leaves `running` until a sweep or the owner's eviction meets it.
    owners: HashMap<OwnerId, Vec<Claimed>>,
    /// Running items in all queues.
    running_now: usize,
    /// Records in the queues' expiry indexes, stale ones included.
    expiry_records: usize,
    /// Records in `owners`, stale ones included.
    owner_records: usize,
    /// For each stored slot, its index in its queue's `members`.
    member_pos: Vec<usize>,
    /// Streams pinned to an instance by partitioned claims (G14). A pin goes when its
    /// instance leaves the registry or its stream has no unfinished items left.
    pins: HashMap<StreamKey, OwnerId>,
    /// Kept finished items by finish time, for purge.
    done: BTreeMap<TimeKey, Slot>,
    /// Index entries a claim looked at; tests assert claims do not scan.
    visits: u64,
}

impl Indexes {
    /// Adds a newly stored slot to its queue's members.
    fn join_members(&mut self, q: usize, slot: Slot) {
        let members = &mut self.queues[q].members;
        if self.member_pos.len() <= slot {
            self.member_pos.resize(slot + 1, 0);
        }
        self.member_pos[slot] = members.len();
        members.push(slot);
    }

    /// Takes a deleted slot out of its queue's members.
    fn leave_members(&mut self, q: usize, slot: Slot) {
        let members = &mut self.queues[q].members;
        let at = self
            .member_pos
            .get(slot)
            .copied()
            .filter(|&p| members.get(p) == Some(&slot))
            .or_else(|| members.iter().position(|&s| s == slot));
        if let Some(at) = at {
            members.swap_remove(at);
            if let Some(&moved) = members.get(at) {
                self.member_pos[moved] = at;
            }
        }
    }

    /// Places a candidate at `now`: scheduled, or due.
    fn place(&mut self, e: &Entry, now: Timestamp) {
        debug_assert_eq!(e.item.state, ItemState::Ready);
        if e.item.run_at > now {
            self.queues[e.queue]
                .scheduled
                .insert((e.item.run_at, e.seq), e.slot);
        } else {
            self.place_due(e);
        }
    }

    /// Places a due candidate: in `ready`, or in its scope's waiting set (and in `ready`
    /// when it is the first of that set and the scope is free).
    fn place_due(&mut self, e: &Entry) {
        let key = e.order_key();
        let Some(scope) = &e.item.scope else {
            self.queues[e.queue].ready.insert(key, e.slot);
            return;
        };
        if !self.scopes.contains_key(scope) {
            self.scopes.insert(scope.clone(), ScopeState::default());
        }
        let Some(sc) = self.scopes.get_mut(scope) else {
            return;
        };
        let waiting = sc.waiting.entry(e.queue).or_default();
        let first = waiting.first_key_value().map(|(k, _)| *k);
        waiting.insert(key, e.slot);
        if sc.running.is_some() {
            return;
        }
        let ready = &mut self.queues[e.queue].ready;
        match first {
            Some(f) if f < key => {}
            Some(f) => {
                ready.remove(&f);
                ready.insert(key, e.slot);
            }
            None => {
                ready.insert(key, e.slot);
            }
        }
    }

    /// Marks `scope` busy with `slot`, just claimed from `queue` under `key`: the
    /// scope's waiting items leave `ready` (G10).
    fn scope_taken(&mut self, scope: &ScopeKey, queue: usize, key: OrderKey, slot: Slot) {
        if !self.scopes.contains_key(scope) {
            self.scopes.insert(scope.clone(), ScopeState::default());
        }
        let Some(sc) = self.scopes.get_mut(scope) else {
            return;
        };
        if let Some(w) = sc.waiting.get_mut(&queue) {
            w.remove(&key);
            if w.is_empty() {
                sc.waiting.remove(&queue);
            }
        }
        debug_assert!(sc.running.is_none(), "two running items in one scope");
        sc.running = Some(slot);
        for (&q, w) in &sc.waiting {
            if let Some((k, _)) = w.first_key_value() {
                self.queues[q].ready.remove(k);
            }
        }
    }

    /// Marks `scope` free: the first waiting item of each queue goes back to `ready`.
    fn scope_freed(&mut self, scope: &ScopeKey) {
        let Some(sc) = self.scopes.get_mut(scope) else {
            return;
        };
        sc.running = None;
        for (&q, w) in &sc.waiting {
            if let Some((k, slot)) = w.first_key_value() {
                self.queues[q].ready.insert(*k, *slot);
            }
        }
        if sc.waiting.is_empty() {
            self.scopes.remove(scope);
        }
    }

    /// Takes a running item out of the running indexes (their records of it go
    /// stale) and frees its scope. Called while the item is still `running`, just
    /// before the transition that ends it.
    fn unlink_running(&mut self, e: &Entry) {
        debug_assert_eq!(e.item.state, ItemState::Running);
        self.running_now = self.running_now.saturating_sub(1);
        if let Some(scope) = &e.item.scope {
            self.scope_freed(scope);
        }
    }

    /// Takes a finished or deleted item out of its stream. Returns the new head when
    /// the item was the head and another item follows (G9).
    fn stream_leave(&mut self, e: &Entry) -> Option<Slot> {
        let stream = e.item.stream.as_ref()?;
        let list = self.streams.get_mut(stream)?;
        let was_head = list.first_key_value().map(|(s, _)| *s) == Some(e.seq);
        list.remove(&e.seq);
        let next = if was_head {
            list.first_key_value().map(|(_, slot)| *slot)
        } else {
            None
        };
        if list.is_empty() {
            self.streams.remove(stream);
            self.pins.remove(stream);
        }
        next
    }

    /// True when the item is the first unfinished item of its stream, or has none.
    fn is_stream_head(&self, e: &Entry) -> bool {
        match &e.item.stream {
            None => true,
            Some(s) => self
                .streams
                .get(s)
                .and_then(|l| l.first_key_value())
                .is_some_and(|(seq, _)| *seq == e.seq),
        }
    }
}

/// The first step of every finalize: the entry `t` is the current token of (G3), taken
/// out of the running indexes; `None` when there is no such item or `t` is superseded.
fn unlink_current<'a>(
    items: &'a mut Slab,
    idx: &mut Indexes,
    t: &LeaseToken,
) -> Option<&'a mut Entry> {
    let e = items.find_mut(t.id)?;
    if !machine::is_current(&e.item, t) {
        return None;
    }
    idx.unlink_running(e);
    Some(e)
}

/// A registered instance and the order it registered in.
struct Registered {
    order: u64,
    instance: Instance,
}

/// One named leader lease (G13).
struct LeaderLease {
    holder: Option<OwnerId>,
    term: u64,
    expires_at: Timestamp,
}

/// Everything a [`MemoryStore`](crate::MemoryStore) holds.
#[derive(Default)]
pub(crate) struct State {
    /// Keep finished items as `done` until purged instead of deleting them at once.
    pub(crate) keep_done: bool,
    next_seq: u64,
    items: Slab,
    queue_ids: HashMap<QueueName, usize>,
    idx: Indexes,
    /// Dedup keys by expiry (then queue and key), for purge.
    dedup_expiry: BTreeSet<(Timestamp, QueueName, DedupKey)>,
    instances: HashMap<OwnerId, Registered>,
    next_registration: u64,
    leaders: HashMap<LeaderName, LeaderLease>,
    /// The queue the last one-queue claim named, and its index (see
    /// `claim_queue_id`).
    last_claim_queue: Option<(QueueName, usize)>,
    /// Reused by every claim: the queues it reads (see `prepare_claim`).
    scratch_queues: Vec<usize>,
    /// Reused by every claim: what it took and from which queue, for the expiry and
    /// owner indexes.
    scratch_claims: Vec<(usize, Claimed)>,
}

impl State {
    /// Index entries claims have looked at so far (a test aid).
    #[cfg(test)]
    pub(crate) fn visits(&self) -> u64 {
        self.idx.visits
    }

    /// Records in the expiry and owner indexes, and the running items (a test aid).
    #[cfg(test)]
    pub(crate) fn running_records(&self) -> (usize, usize, usize) {
        let i = &self.idx;
        (i.expiry_records, i.owner_records, i.running_now)
    }

    fn queue_id(&mut self, queue: &QueueName) -> usize {
        if let Some(&q) = self.queue_ids.get(queue) {
            return q;
        }
        let q = self.idx.queues.len();
        self.idx.queues.push(QueueIndex::default());
        self.queue_ids.insert(queue.clone(), q);
        q
    }

    /// The index of an existing queue named by a one-queue claim. The last answer is
    /// kept: a name equal to it (the same shared string, compared by pointer first, or
    /// equal text) skips the hash lookup. Queues are never removed, so a kept index
    /// stays right.
    fn claim_queue_id(&mut self, queue: &QueueName) -> Option<usize> {
        if let Some((name, q)) = &self.last_claim_queue {
            if name == queue {
                return Some(*q);
            }
        }
        let q = *self.queue_ids.get(queue)?;
        self.last_claim_queue = Some((queue.clone(), q));
        Some(q)
    }

    /// Places the item in `slot` if it is ready and heads its stream.
    fn place_if_candidate(&mut self, slot: Slot, now: Timestamp) {
        if let Some(e) = self.items.get(slot) {
            if e.item.state == ItemState::Ready && self.idx.is_stream_head(e) {
                self.idx.place(e, now);
            }
        }
    }

    /// Deletes an item that is in no claim index (done or dead).
    fn delete(&mut self, slot: Slot) {
        if let Some((queue, done)) = self.items.remove(slot) {
            self.idx.leave_members(queue, slot);
            if let Some(key) = done {
                self.idx.done.remove(&key);
            }
        }
    }

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

    /// Recovers expired leases of queue `q`, oldest expiry first, up to `limit`.
    fn recover_queue(&mut self, q: usize, now: Timestamp, limit: u64, counts: &mut Recovered) {
        while counts.requeued + counts.dead < limit {
            let Some(c) = self.first_expired(q, now) else {
                break;
            };
            self.pop_expired(q);
            self.idx.visits += 1;
            self.recover_one(c.slot, now, counts);
        }
    }

    /// The earliest live expired lease of queue `q` (stale records met on the way
    /// are dropped).
    fn first_expired(&mut self, q: usize, now: Timestamp) -> Option<Claimed> {
        let mut removed = 0;
        let c = self.idx.queues[q]
            .running
            .first_expired(&self.items, now, &mut removed);
        self.idx.expiry_records -= removed;
        c
    }

    /// Takes out the record `first_expired` just answered for queue `q`.
    fn pop_expired(&mut self, q: usize) {
        self.idx.queues[q].running.pop_first();
        self.idx.expiry_records -= 1;
    }

    fn recover_one(&mut self, slot: Slot, now: Timestamp, counts: &mut Recovered) {
        let Some(e) = self.items.get_mut(slot) else {
            return;
        };
        if !machine::is_expired(&e.item, now) {
            return;
        }
        self.idx.unlink_running(e);
        let after = e.item.stream.clone().map(|s| (s, e.seq));
        match machine::recover(&mut e.item, now) {
            Some(Recovery::Requeued) => {
                counts.requeued += 1;
                self.place_if_candidate(slot, now);
            }
            Some(Recovery::Dead) => counts.dead += 1,
            None => {}
        }
        if let Some((stream, seq)) = after {
            self.put_back_after(&stream, seq, now);
        }
    }

    /// The put-back rule of a stream run (G9): an item of `stream` at `seq` left
    /// `running` unfinished, so every later running item of the stream goes back to
    /// `ready` untouched ([`machine::put_back`]). They are not heads, so no index but
    /// the stream's list names them.
    fn put_back_after(&mut self, stream: &StreamKey, seq: u64, now: Timestamp) {
        let Some(list) = self.idx.streams.get(stream) else {
            return;
        };
        // The rest of a run is the running items right behind `seq`; the first item
        // that is not running ends it (a stream's running items are a prefix).
        let mut later: Vec<Slot> = Vec::new();
        for (_, &slot) in list.range(seq + 1..) {
            match self.items.get(slot) {
                Some(e) if e.item.state == ItemState::Running => later.push(slot),
                _ => break,
            }
        }
        for slot in later {
            let Some(e) = self.items.get_mut(slot) else {
                continue;
            };
            if e.item.state != ItemState::Running {
                continue;
            }
            self.idx.unlink_running(e);
            machine::put_back(&mut e.item, now);
        }
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
        owner: &OwnerId,
        lease_for: Duration,
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
            if !self.take(slot, q, key, (owner, lease_for), now, leases) {
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
        let qs = self.prepare_claim(queues, now);
        while leases.len() < limit {
            let mut best: Option<(OrderKey, usize)> = None;
            for &q in &qs {
                if let Some((k, _)) = self.idx.queues[q].ready.first_key_value() {
                    self.idx.visits += 1;
                    if best.is_none_or(|(b, _)| *k < b) {
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
            if self.take(slot, q, key, (owner, lease_for), now, &mut leases) {
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
                        owner,
                        lease_for,
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
            let stream = e.item.stream.clone();
            let seq = e.seq;
            if self.idx.queues[q].ready.remove(&key).is_none() {
                // Taken out of `ready` by an earlier run of this claim, or passed over.
                if !self.idx.is_stream_head(e) || e.item.state != ItemState::Ready {
                    continue;
                }
            }
            if self.take(slot, q, key, (owner, lease_for), now, &mut leases) {
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
                            owner,
                            lease_for,
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
        (owner, lease_for): (&OwnerId, Duration),
        now: Timestamp,
        leases: &mut Vec<Lease>,
    ) -> bool {
        let expires_at = now + lease_for;
        let Some(e) = self.items.get_mut(slot) else {
            debug_assert!(false, "the ready index names an empty slot");
            return false;
        };
        if !machine::claim(&mut e.item, owner, now, lease_for) {
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

    /// `Store::renew`.
    pub(crate) fn renew(
        &mut self,
        tokens: &[LeaseToken],
        lease_for: Duration,
        now: Timestamp,
    ) -> Vec<RenewOutcome> {
        let mut out = Vec::with_capacity(tokens.len());
        for t in tokens {
            let Some(e) = self.items.find_mut(t.id) else {
                out.push(RenewOutcome::LeaseLost);
                continue;
            };
            let answer = machine::renew(&mut e.item, t, now, lease_for);
            if let RenewOutcome::Renewed { expires_at, .. } = answer {
                // The record of the old expiry goes stale.
                let c = Claimed {
                    at: expires_at,
                    seq: e.seq,
                    attempt: e.item.attempt,
                    slot: e.slot,
                };
                self.idx.expiry_push(e.queue, c);
            }
            out.push(answer);
        }
        self.idx.compact(&self.items);
        out
    }

    /// `Store::complete`, the outcomes pushed onto `out` (empty; allocated by the
    /// caller before it took the lock).
    pub(crate) fn complete(
        &mut self,
        tokens: &[LeaseToken],
        now: Timestamp,
        mut out: Vec<TokenOutcome>,
    ) -> Vec<TokenOutcome> {
        let keep = self.keep_done;
        for t in tokens {
            let current = |e: &Entry| machine::is_current(&e.item, t);
            let Some(slot) = self.items.take_id(t.id, current, !keep) else {
                out.push(TokenOutcome::LeaseLost);
                continue;
            };
            let Some(e) = self.items.get_mut(slot) else {
                out.push(TokenOutcome::LeaseLost);
                continue;
            };
            self.idx.unlink_running(e);
            let answer = machine::complete(&mut e.item, t, now);
            debug_assert_eq!(answer, TokenOutcome::Accepted);
            let next = self.idx.stream_leave(e);
            if keep {
                self.idx.done.insert((e.item.updated_at, e.seq), slot);
            } else if let Some((_, (queue, _))) = self.items.remove_unmapped(slot) {
                // The id left `by_id` in `take_id`.
                self.idx.leave_members(queue, slot);
            }
            if let Some(next) = next {
                self.place_if_candidate(next, now);
            }
            out.push(answer);
        }
        out
    }

    /// `Store::fail`.
    pub(crate) fn fail(&mut self, failures: &[Failure], now: Timestamp) -> Vec<FailOutcome> {
        let mut out = Vec::with_capacity(failures.len());
        for f in failures {
            let Some(e) = unlink_current(&mut self.items, &mut self.idx, &f.token) else {
                out.push(FailOutcome::LeaseLost);
                continue;
            };
            let answer = machine::fail(&mut e.item, f, now);
            let (slot, after) = (e.slot, e.item.stream.clone().map(|s| (s, e.seq)));
            if let FailOutcome::Retrying { .. } = answer {
                // A candidate again if it heads its stream (an item of a run may not).
                self.place_if_candidate(slot, now);
            }
            if let Some((stream, seq)) = after {
                self.put_back_after(&stream, seq, now);
            }
            out.push(answer);
        }
        out
    }

    /// `Store::release`.
    pub(crate) fn release(&mut self, tokens: &[LeaseToken], now: Timestamp) -> Vec<TokenOutcome> {
        let mut out = Vec::with_capacity(tokens.len());
        for t in tokens {
            let Some(e) = unlink_current(&mut self.items, &mut self.idx, t) else {
                out.push(TokenOutcome::LeaseLost);
                continue;
            };
            let answer = machine::release(&mut e.item, t, now);
            let (slot, after) = (e.slot, e.item.stream.clone().map(|s| (s, e.seq)));
            self.place_if_candidate(slot, now);
            if let Some((stream, seq)) = after {
                self.put_back_after(&stream, seq, now);
            }
            out.push(answer);
        }
        out
    }

    /// `Store::recover_expired`: oldest expiry first across queues, up to `limit`.
    pub(crate) fn recover_expired(&mut self, limit: u64, now: Timestamp) -> Recovered {
        let mut counts = Recovered::default();
        while counts.requeued + counts.dead < limit {
            let mut oldest: Option<(TimeKey, usize, Slot)> = None;
            for q in 0..self.idx.queues.len() {
                if let Some(c) = self.first_expired(q, now) {
                    if oldest.is_none_or(|(k, _, _)| (c.at, c.seq) < k) {
                        oldest = Some(((c.at, c.seq), q, c.slot));
                    }
                }
            }
            let Some((_, q, slot)) = oldest else {
                break;
            };
            self.pop_expired(q);
            self.recover_one(slot, now, &mut counts);
        }
        counts
    }

    /// `Store::purge`: finished items oldest first, dedup keys earliest expiry first
    /// (then by queue and key), up to `limit` of each.
    pub(crate) fn purge(&mut self, keep_done_for: Duration, limit: u64, now: Timestamp) -> Purged {
        let mut purged = Purged::default();
        let cutoff = now - keep_done_for;
        while purged.items < limit {
            let Some((&(at, _), &slot)) = self.idx.done.first_key_value() else {
                break;
            };
            if at > cutoff {
                break;
            }
            self.idx.done.pop_first();
            self.delete(slot);
            purged.items += 1;
        }
        while purged.dedup_keys < limit {
            let Some((at, q, key)) = self.dedup_expiry.first().cloned() else {
                break;
            };
            if at > now {
                break;
            }
            self.dedup_expiry.pop_first();
            if let Some(&q) = self.queue_ids.get(&q) {
                self.idx.queues[q].dedup.remove(&key);
            }
            purged.dedup_keys += 1;
        }
        purged
    }

    /// `Store::dead_requeue`.
    pub(crate) fn dead_requeue(&mut self, ids: &[ItemId], additional: u32, now: Timestamp) -> u64 {
        let mut n = 0;
        for id in ids {
            let Some(e) = self.items.find_mut(*id) else {
                continue;
            };
            if machine::requeue(&mut e.item, now, additional) {
                n += 1;
                let slot = e.slot;
                self.place_if_candidate(slot, now);
            }
        }
        n
    }

    /// `Store::dead_discard`.
    pub(crate) fn dead_discard(&mut self, ids: &[ItemId], now: Timestamp) -> u64 {
        let mut n = 0;
        for id in ids {
            let Some(e) = self.items.find(*id) else {
                continue;
            };
            if !machine::discard(&e.item) {
                continue;
            }
            let next = self.idx.stream_leave(e);
            let slot = e.slot;
            self.delete(slot);
            if let Some(next) = next {
                self.place_if_candidate(next, now);
            }
            n += 1;
        }
        n
    }

    /// `Store::item_get`.
    pub(crate) fn item_get(&self, id: ItemId) -> Option<Item> {
        self.items.find(id).map(|e| e.item.clone())
    }

    /// `Store::queue_counts`: visits the queue's own items only.
    pub(crate) fn queue_counts(&self, queue: &QueueName, now: Timestamp) -> QueueCounts {
        let mut c = QueueCounts::default();
        let Some(&q) = self.queue_ids.get(queue) else {
            return c;
        };
        c.paused = self.idx.queues[q].paused;
        let mut oldest: Option<Timestamp> = None;
        for &slot in &self.idx.queues[q].members {
            let Some(e) = self.items.get(slot) else {
                continue;
            };
            match e.item.state {
                ItemState::Ready if e.item.run_at <= now => {
                    c.ready += 1;
                    if oldest.is_none_or(|o| e.item.run_at < o) {
                        oldest = Some(e.item.run_at);
                    }
                }
                ItemState::Ready => c.scheduled += 1,
                ItemState::Running => c.running += 1,
                ItemState::Dead => c.dead += 1,
                ItemState::Done => c.done += 1,
            }
        }
        c.oldest_ready_age = oldest.map(|at| now.duration_since(at));
        c
    }

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
