//! Queue limits (G16 concurrency, G17 rate): the gate every claim passes an item
//! through, and the items it parks.
//!
//! # A slot is a lease
//!
//! A queue's running count and each limit key's are changed in exactly two places:
//! [`State::take`](super::State) adds the claimed item, and
//! [`Indexes::unlink_running`](super::Indexes) takes it away when it leaves `running`,
//! which only the current lease's own finalize, expiry recovery, eviction and the put
//! back of a stream run do (every one of them checks the token first, G3). So the count
//! is always the number of the queue's (the key's) running items: a stale finish is
//! refused before it reaches `unlink_running` and frees nothing.
//!
//! # Passing saturated keys over
//!
//! A claim takes candidates from the ready index in claim order. One whose limit key is
//! at its concurrency or rate bound is moved out of `ready` into the key's `parked` set
//! and the claim goes on with the next candidate, so a saturated key's backlog never
//! holds up other keys. When a slot of the key may have come back (its running count
//! went down, its limits changed, the next start of its rate has come), the key is
//! marked and the next claim moves as many of its parked items back to `ready` as the
//! key has room for. A queue at its own bound (queue-wide concurrency, rate or
//! deferral) is simply not claimed from: its items stay where they are.
//!
//! Rates keep the start times of the last period (at most `starts` of them), so "fewer
//! than R starts in `(now - P, now]`" is exact in every window.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use tenure_core::{FairnessKey, ItemState, LimitKey, NewItem, QueueLimits, Rate, Timestamp};

use super::{Entry, HashMap, OrderKey, Slot, State};

/// The start times of the last period of one rate (G17).
#[derive(Clone, Default)]
struct Starts(VecDeque<Timestamp>);

impl Starts {
    /// Forgets starts that left the window `(now - per, now]`.
    fn prune(&mut self, per: Duration, now: Timestamp) {
        let from = now.saturating_sub(per);
        while self.0.front().is_some_and(|&t| t <= from) {
            self.0.pop_front();
        }
    }

    /// Starts still allowed at `now`.
    fn room(&mut self, rate: &Rate, now: Timestamp) -> usize {
        self.prune(rate.per, now);
        (rate.starts as usize).saturating_sub(self.0.len())
    }

    /// When the next start is allowed, once there is no room.
    fn next_room(&self, rate: &Rate) -> Option<Timestamp> {
        let over = self.0.len().checked_sub(rate.starts as usize)?;
        self.0.get(over).map(|&t| t + rate.per)
    }

    fn record(&mut self, now: Timestamp) {
        self.0.push_back(now);
    }
}

/// The limits of one queue and what they count.
#[derive(Clone, Default)]
pub(super) struct LimitState {
    /// The configuration; `None`: no limit.
    pub(super) config: Option<QueueLimits>,
    /// Running items of the queue (G16).
    running: usize,
    /// Running items per limit key (G16); a key with none has no entry.
    key_running: HashMap<LimitKey, usize>,
    /// Candidates passed over because their key was at a bound, in claim order.
    parked: HashMap<LimitKey, BTreeMap<OrderKey, Slot>>,
    /// Keys whose room may have grown since their items were parked.
    dirty: BTreeSet<LimitKey>,
    /// Parked keys waiting for a time (rate or deferral), by that time.
    wake: BTreeSet<(Timestamp, LimitKey)>,
    /// Starts of the last period of the queue's rate, and of each key's (G17).
    queue_starts: Starts,
    key_starts: HashMap<LimitKey, Starts>,
    /// Deferrals ([`tenure_core::Store::limits_defer`]): the queue's, and each key's.
    queue_deferred: Option<Timestamp>,
    key_deferred: HashMap<LimitKey, Timestamp>,
    /// Fair shares (G18).
    fair: FairShares,
}

/// One unit of fair-share work in tag units: an item of weight `w` moves its tenant's
/// tag on by `TAG_UNIT / w`.
const TAG_UNIT: u64 = 1 << 24;

/// Most tenants a queue remembers before it forgets those whose finish tag the
/// virtual time has passed (they would start at the virtual time anyway).
const TENANTS_KEPT: usize = 1024;

/// Start-time fair queueing (G18): every item gets a start tag at enqueue,
/// `max(virtual time, its tenant's finish tag)`, and moves the tenant's finish tag on
/// by `TAG_UNIT / weight`; claims take the least tag first (within a priority), and
/// the virtual time follows the tags claimed. A queue whose items never named a tenant
/// tags every item 0, so its order is G8's exactly.
#[derive(Clone, Default)]
struct FairShares {
    active: bool,
    vtime: u64,
    finish: HashMap<Option<FairnessKey>, u64>,
}

/// What the gate says of a candidate.
pub(super) enum Gate {
    /// Claim it.
    Open,
    /// The queue is at a bound: claim nothing more from it now.
    QueueShut,
    /// Its key is at a bound: park it (and wake the key at this time, if a time will
    /// open it).
    KeyShut(Option<Timestamp>),
}

impl LimitState {
    /// True when nothing is configured, parked or deferred: the gate is always open.
    fn idle(&self) -> bool {
        self.config.is_none() && self.queue_deferred.is_none() && self.key_deferred.is_empty()
    }

    /// The queue's own bounds at `now` (the items this claim took are counted already).
    fn queue_open(&mut self, now: Timestamp) -> bool {
        if self.queue_deferred.is_some_and(|t| t > now) {
            return false;
        }
        let Some(cfg) = &self.config else {
            return true;
        };
        if cfg.concurrency.is_some_and(|n| self.running >= n as usize) {
            return false;
        }
        if let Some(rate) = cfg.rate {
            if self.queue_starts.room(&rate, now) == 0 {
                return false;
            }
        }
        true
    }

    /// Room of `key` at `now`: how many more of its items may start, and when more
    /// will be allowed if time is what holds it.
    fn key_room(&mut self, key: &LimitKey, now: Timestamp) -> (usize, Option<Timestamp>) {
        if let Some(&until) = self.key_deferred.get(key) {
            if until > now {
                return (0, Some(until));
            }
            self.key_deferred.remove(key);
        }
        let Some(cfg) = &self.config else {
            return (usize::MAX, None);
        };
        let mut room = usize::MAX;
        if let Some(n) = cfg.key_limit(key) {
            let running = self.key_running.get(key).copied().unwrap_or(0);
            room = room.min((n as usize).saturating_sub(running));
        }
        let mut at = None;
        if let Some(rate) = cfg.key_rate {
            let starts = self.key_starts.entry(key.clone()).or_default();
            let r = starts.room(&rate, now);
            if r == 0 {
                at = starts.next_room(&rate);
            }
            room = room.min(r);
            if starts.0.is_empty() {
                self.key_starts.remove(key);
            }
        }
        (room, at)
    }

    /// The gate for a candidate of limit key `key` at `now`.
    pub(super) fn gate(&mut self, key: Option<&LimitKey>, now: Timestamp) -> Gate {
        if self.idle() {
            return Gate::Open;
        }
        if !self.queue_open(now) {
            return Gate::QueueShut;
        }
        match key {
            None => Gate::Open,
            Some(key) => match self.key_room(key, now) {
                (0, at) => Gate::KeyShut(at),
                _ => Gate::Open,
            },
        }
    }

    /// Counts a claim of an item of `key` at `now`: a slot and a start.
    pub(super) fn taken(&mut self, key: Option<&LimitKey>, now: Timestamp) {
        self.running += 1;
        let rate = self.config.as_ref().and_then(|c| c.rate);
        if rate.is_some() {
            self.queue_starts.record(now);
        }
        if let Some(key) = key {
            *self.key_running.entry(key.clone()).or_default() += 1;
            if self.config.as_ref().is_some_and(|c| c.key_rate.is_some()) {
                self.key_starts.entry(key.clone()).or_default().record(now);
            }
        }
    }

    /// Gives back the slot of an item of `key` that left `running`. True when a
    /// claim may now take what was held back: the key has parked items, or the queue
    /// was at its concurrency bound.
    pub(super) fn freed(&mut self, key: Option<&LimitKey>) -> bool {
        let queue_was_full = self
            .config
            .as_ref()
            .and_then(|c| c.concurrency)
            .is_some_and(|n| self.running >= n as usize);
        self.running = self.running.saturating_sub(1);
        let mut wake = queue_was_full;
        if let Some(key) = key {
            if let Some(n) = self.key_running.get_mut(key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.key_running.remove(key);
                }
            }
            if self.parked.contains_key(key) {
                self.dirty.insert(key.clone());
                wake = true;
            }
        }
        wake
    }

    /// Parks a candidate of `key`, waking the key at `at` if a time will open it.
    pub(super) fn park(
        &mut self,
        key: &LimitKey,
        order: OrderKey,
        slot: Slot,
        at: Option<Timestamp>,
    ) {
        self.parked
            .entry(key.clone())
            .or_default()
            .insert(order, slot);
        if let Some(at) = at {
            self.wake.insert((at, key.clone()));
        }
    }

    /// The start tag of a new item (G18), moving its tenant's finish tag on.
    pub(super) fn fair_tag(&mut self, new: &NewItem) -> u64 {
        let f = &mut self.fair;
        if !f.active {
            if new.fairness_key.is_none() {
                return 0;
            }
            f.active = true;
        }
        let weight = match &self.config {
            Some(c) => c.weight_of(new.fairness_key.as_ref(), new.weight),
            None => new.weight.max(1),
        };
        if f.finish.len() > TENANTS_KEPT {
            let v = f.vtime;
            f.finish.retain(|_, t| *t > v);
        }
        let finish = f.finish.entry(new.fairness_key.clone()).or_insert(0);
        let start = (*finish).max(f.vtime);
        *finish = start.saturating_add(TAG_UNIT / u64::from(weight));
        start
    }

    /// A claim served an item tagged `tag`: the virtual time follows it.
    pub(super) fn served(&mut self, tag: u64) {
        self.fair.vtime = self.fair.vtime.max(tag);
    }

    /// Forgets a parked candidate (cancelled, or claimed another way).
    pub(super) fn unpark_one(&mut self, key: &LimitKey, order: &OrderKey) {
        if let Some(p) = self.parked.get_mut(key) {
            p.remove(order);
            if p.is_empty() {
                self.parked.remove(key);
            }
        }
    }

    /// Marks every parked key: the limits changed.
    fn all_dirty(&mut self) {
        let keys: Vec<LimitKey> = self.parked.keys().cloned().collect();
        self.dirty.extend(keys);
    }

    /// Takes out of `parked` the candidates of the keys that may have room at `now`,
    /// as many per key as it has room for, for the caller to put back into `ready`.
    fn due(&mut self, now: Timestamp, out: &mut Vec<(OrderKey, Slot)>) {
        while let Some((at, key)) = self.wake.first().cloned() {
            if at > now {
                break;
            }
            self.wake.pop_first();
            self.dirty.insert(key);
        }
        if self.dirty.is_empty() {
            return;
        }
        let dirty = std::mem::take(&mut self.dirty);
        for key in dirty {
            let (room, at) = self.key_room(&key, now);
            let Some(p) = self.parked.get_mut(&key) else {
                continue;
            };
            for _ in 0..room.min(p.len()) {
                if let Some(entry) = p.pop_first() {
                    out.push(entry);
                }
            }
            if p.is_empty() {
                self.parked.remove(&key);
            } else if let Some(at) = at {
                self.wake.insert((at, key));
            }
        }
    }
}

impl LimitState {
    /// The earliest instant after `now` at which time alone may let a claim take
    /// something these limits hold back (a rate's start leaving its window, a
    /// deferral ending), and whether anything waits for a slot (G16).
    fn next_start(&mut self, now: Timestamp) -> (Option<Timestamp>, bool) {
        let mut at: Option<Timestamp> = None;
        let mut earliest = |t: Timestamp| {
            if t > now {
                at = Some(at.map_or(t, |a| a.min(t)));
            }
        };
        if let Some((t, _)) = self.wake.iter().find(|(t, _)| *t > now) {
            earliest(*t);
        }
        if let Some(t) = self.queue_deferred {
            earliest(t);
        }
        let mut waits_for_slot = !self.parked.is_empty();
        if let Some(cfg) = &self.config {
            if let Some(rate) = cfg.rate {
                if self.queue_starts.room(&rate, now) == 0 {
                    if let Some(t) = self.queue_starts.next_room(&rate) {
                        earliest(t);
                    }
                }
            }
            if cfg.concurrency.is_some_and(|n| self.running >= n as usize) {
                waits_for_slot = true;
            }
        }
        (at, waits_for_slot)
    }
}

impl State {
    /// `Store::limits_wait`: how long from `now` until time alone may make something
    /// the limits of `queues` hold back claimable: a rate's window, a deferral, or the
    /// expiry of a running lease while items wait for a slot.
    pub(crate) fn limits_wait(
        &mut self,
        queues: &[tenure_core::QueueName],
        now: Timestamp,
    ) -> Option<Duration> {
        let mut at: Option<Timestamp> = None;
        for queue in queues {
            let Some(&q) = self.queue_ids.get(queue) else {
                continue;
            };
            let (t, waits) = self.idx.queues[q].limits.next_start(now);
            if let Some(t) = t {
                at = Some(at.map_or(t, |a| a.min(t)));
            }
            if waits {
                // The first live lease of the queue: its expiry gives a slot back.
                let far = now + Duration::from_secs(100 * 366 * 24 * 60 * 60);
                let mut removed = 0;
                let first =
                    self.idx.queues[q]
                        .running
                        .first_expired(&self.items, far, &mut removed);
                self.idx.expiry_records -= removed;
                if let Some(c) = first {
                    at = Some(at.map_or(c.at, |a| a.min(c.at)));
                }
            }
        }
        at.map(|t| {
            Duration::from_micros(u64::try_from(t.as_micros() - now.as_micros()).unwrap_or(0))
        })
    }

    /// Moves the parked candidates of the claimed queues `qs` whose keys have room again
    /// back into `ready` (G16, G17). Called by every claim after recovery, so slots
    /// freed by that recovery count.
    pub(super) fn unpark_due(&mut self, qs: &[usize], now: Timestamp) {
        let mut back = Vec::new();
        for &q in qs {
            back.clear();
            self.idx.queues[q].limits.due(now, &mut back);
            for &(order, slot) in &back {
                // Only a candidate still ready, still the same item, and whose scope is
                // free goes back (the scope index places the others itself).
                let Some(e) = self.items.get(slot) else {
                    continue;
                };
                if e.order_key() != order || e.item.state != ItemState::Ready {
                    continue;
                }
                let scope_busy = e
                    .item
                    .scope
                    .as_ref()
                    .and_then(|sc| self.idx.scopes.get(sc))
                    .is_some_and(|sc| sc.running.is_some());
                if scope_busy {
                    continue;
                }
                let ready = &mut self.idx.queues[q].ready;
                ready.remove(&order);
                ready.insert(order, slot);
            }
        }
    }

    /// `Store::limits_set`: answers the limits before.
    pub(crate) fn limits_set(
        &mut self,
        queue: &tenure_core::QueueName,
        limits: QueueLimits,
    ) -> Option<QueueLimits> {
        let q = self.queue_id(queue);
        let l = &mut self.idx.queues[q].limits;
        let before = l.config.replace(limits);
        l.all_dirty();
        before
    }

    /// `Store::limits_get`.
    pub(crate) fn limits_get(&self, queue: &tenure_core::QueueName) -> Option<QueueLimits> {
        let &q = self.queue_ids.get(queue)?;
        self.idx.queues[q].limits.config.clone()
    }

    /// `Store::limits_clear`: the configuration, the rate history and the deferrals go.
    pub(crate) fn limits_clear(&mut self, queue: &tenure_core::QueueName) -> bool {
        let Some(&q) = self.queue_ids.get(queue) else {
            return false;
        };
        let l = &mut self.idx.queues[q].limits;
        let had = l.config.take().is_some();
        l.queue_starts = Starts::default();
        l.key_starts.clear();
        l.queue_deferred = None;
        l.key_deferred.clear();
        l.all_dirty();
        had
    }

    /// `Store::limits_list`, by queue name.
    pub(crate) fn limits_list(&self) -> Vec<(tenure_core::QueueName, QueueLimits)> {
        let mut out: Vec<_> = self
            .queue_ids
            .iter()
            .filter_map(|(name, &q)| {
                let c = self.idx.queues[q].limits.config.clone()?;
                Some((name.clone(), c))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// `Store::limits_defer`: a deferral never shortens an earlier one.
    pub(crate) fn limits_defer(
        &mut self,
        queue: &tenure_core::QueueName,
        key: Option<&LimitKey>,
        until: Timestamp,
    ) {
        let q = self.queue_id(queue);
        let l = &mut self.idx.queues[q].limits;
        match key {
            None => {
                l.queue_deferred = Some(l.queue_deferred.map_or(until, |t| t.max(until)));
            }
            Some(key) => {
                let t = l.key_deferred.entry(key.clone()).or_insert(until);
                *t = (*t).max(until);
                if l.parked.contains_key(key) {
                    let at = *t;
                    l.wake.insert((at, key.clone()));
                }
            }
        }
    }
}

impl Entry {
    /// Its limit key, for the gate.
    pub(super) fn limit_key(&self) -> Option<&LimitKey> {
        self.limit_key.as_ref()
    }
}
