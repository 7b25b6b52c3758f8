//! The store's data, its indexes, and every operation as a synchronous function of
//! `now`. All of it runs under the store's one mutex; nothing here awaits.
//!
//! This file holds the data and its indexes; the operations are in the files of their
//! contract groups, as `store/` has them: [`claim`] (enqueue and claim), [`finalize`]
//! (renew, complete, fail, release), [`recovery`] (expired leases, the put-back of
//! stream runs, purge), [`instances`] (instances and leader) and [`inspect`] (dead
//! items, reads, listings, cancel, pause).
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

mod claim;
mod finalize;
mod inspect;
mod instances;
mod limits;
mod ready;
mod recovery;
mod running;

use std::collections::hash_map::Entry as HashEntry;
use std::collections::{BTreeMap, BTreeSet};

use self::ready::Ready;
use self::running::{Claimed, Expiries};
use tenure_core::machine;
use tenure_core::{
    DedupKey, Instance, Item, ItemId, ItemState, LeaderName, Lease, LeaseToken, OwnerId, QueueName,
    ScopeKey, StreamKey, Timestamp,
};

/// A hash map with foldhash: every claim and complete looks up ids and keys, and
/// SipHash (the std default) measured as the largest single cost of a complete.
/// foldhash is seeded per process, so keys a caller chooses cannot be aimed at it.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Claim order within a queue: priority, then the fair-share tag (G18; 0 in a queue
/// whose items never named a tenant), then `run_at`, then enqueue sequence (G8).
type OrderKey = (i16, u64, Timestamp, u64);
/// An instant, then the enqueue sequence to keep keys unique.
type TimeKey = (Timestamp, u64);
/// A position in the slab.
type Slot = usize;

/// One stored item and where it sits.
#[derive(Clone)]
struct Entry {
    item: Item,
    /// Enqueue sequence: global, assigned in enqueue order (G8, G9).
    seq: u64,
    /// Index of its queue in [`Indexes::queues`].
    queue: usize,
    /// Its own slot.
    slot: Slot,
    /// The key its queue's per-key limits count it under (G16, G17).
    limit_key: Option<tenure_core::LimitKey>,
    /// Its start tag in its queue's fair shares (G18), set at enqueue.
    tag: u64,
}

impl Entry {
    fn order_key(&self) -> OrderKey {
        (self.item.priority, self.tag, self.item.run_at, self.seq)
    }
}

/// An order key without its fair-share tag: how claims over several queues compare
/// their queues' first candidates (tags are per queue).
fn across_queues(k: &OrderKey) -> (i16, Timestamp, u64) {
    (k.0, k.2, k.3)
}

/// Items by slot, with free slots reused and a map from id to slot.
#[derive(Clone, Default)]
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
                lease: it.lease,
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
                progress: it.progress.clone(),
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
#[derive(Clone)]
struct DedupEntry {
    id: ItemId,
    expires_at: Timestamp,
}

#[derive(Clone, Default)]
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
    /// Its limits, what they count and the candidates they hold back (G16, G17).
    limits: limits::LimitState,
}

#[derive(Clone, Default)]
struct ScopeState {
    /// The one running item of the scope (G10).
    running: Option<Slot>,
    /// Due candidates of the scope, per queue, in claim order.
    waiting: HashMap<usize, BTreeMap<OrderKey, Slot>>,
}

#[derive(Clone, Default)]
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
    /// A slot came back under a limit that holds items back (G16); the store fires
    /// its wake signal and clears this.
    slot_wake: bool,
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
        if self.queues[e.queue].limits.freed(e.limit_key()) {
            self.slot_wake = true;
        }
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
#[derive(Clone)]
struct Registered {
    order: u64,
    instance: Instance,
}

/// One named leader lease (G13).
#[derive(Clone)]
struct LeaderLease {
    holder: Option<OwnerId>,
    term: u64,
    expires_at: Timestamp,
}

/// Everything a [`MemoryStore`](crate::MemoryStore) holds.
#[derive(Clone, Default)]
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

    /// True once after a slot came back under a limit that holds items back.
    pub(crate) fn take_slot_wake(&mut self) -> bool {
        std::mem::take(&mut self.idx.slot_wake)
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
}
