//! Inspection and control (the contract's fifth group) on [`State`]: dead items
//! requeued and discarded (by id or by filter), the reads (an item, a queue's counts),
//! listings, cancel and pause.
//!
//! Listings sort the queue's own items (its `members`) by enqueue sequence, and leases
//! the live records of the queue's running index by expiry and sequence, and cut a
//! page after the cursor, so a page costs `O(n log n)` in the queue's size. A cursor
//! is `m.<seq>` for items and `m.<expiry>.<seq>` for leases.

use tenure_core::machine;
use tenure_core::{
    CancelOutcome, Cursor, DeadFilter, Error, FailOutcome, Item, ItemId, ItemPage, ItemState,
    LeaseInfo, LeasePage, ListOrder, ListState, QueueCounts, QueueName, Result, Timestamp,
};

use super::{Entry, Indexes, State};

fn bad_cursor() -> Error {
    Error::invalid("cursor", "was not handed out by a memory store listing")
}

fn item_cursor(c: &Cursor) -> Result<u64> {
    c.as_str()
        .strip_prefix("m.")
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad_cursor)
}

fn lease_cursor(c: &Cursor) -> Result<(Timestamp, u64)> {
    let rest = c.as_str().strip_prefix("m.").ok_or_else(bad_cursor)?;
    let (at, seq) = rest.split_once('.').ok_or_else(bad_cursor)?;
    match (at.parse(), seq.parse()) {
        (Ok(at), Ok(seq)) => Ok((Timestamp::from_micros(at), seq)),
        _ => Err(bad_cursor()),
    }
}

fn cursor(text: String) -> Result<Cursor> {
    Cursor::new(text)
}

impl Indexes {
    /// Takes a ready candidate out of the claim indexes (the inverse of `place`): from
    /// `scheduled`, or from `ready` and its scope's waiting set, putting the scope's
    /// next waiting item into `ready` when this one was first and the scope is free.
    fn unplace(&mut self, e: &Entry) {
        let q = e.queue;
        if self.queues[q]
            .scheduled
            .remove(&(e.item.run_at, e.seq))
            .is_some()
        {
            return;
        }
        let key = e.order_key();
        self.queues[q].ready.remove(&key);
        if let Some(k) = e.limit_key() {
            self.queues[q].limits.unpark_one(k, &key);
        }
        let Some(scope) = &e.item.scope else {
            return;
        };
        let Some(sc) = self.scopes.get_mut(scope) else {
            return;
        };
        if let Some(w) = sc.waiting.get_mut(&q) {
            let was_first = w.first_key_value().map(|(k, _)| *k) == Some(key);
            w.remove(&key);
            if was_first && sc.running.is_none() {
                if let Some((k, slot)) = w.first_key_value() {
                    self.queues[q].ready.insert(*k, *slot);
                }
            }
            if w.is_empty() {
                sc.waiting.remove(&q);
            }
        }
        if sc.running.is_none() && sc.waiting.is_empty() {
            self.scopes.remove(scope);
        }
    }
}

impl State {
    /// The queue's entries, by enqueue sequence.
    fn members_by_seq(&self, queue: &QueueName) -> Vec<&Entry> {
        let Some(&q) = self.queue_ids.get(queue) else {
            return Vec::new();
        };
        let mut all: Vec<&Entry> = self.idx.queues[q]
            .members
            .iter()
            .filter_map(|&slot| self.items.get(slot))
            .collect();
        all.sort_unstable_by_key(|e| e.seq);
        all
    }

    /// `Store::item_list`.
    pub(crate) fn item_list(
        &self,
        queue: &QueueName,
        state: ListState,
        order: ListOrder,
        limit: usize,
        after: Option<&Cursor>,
        now: Timestamp,
    ) -> Result<ItemPage> {
        let after = after.map(item_cursor).transpose()?;
        let mut all = self.members_by_seq(queue);
        if order == ListOrder::NewestFirst {
            all.reverse();
        }
        let past = |seq: u64| match (after, order) {
            (None, _) => true,
            (Some(a), ListOrder::OldestFirst) => seq > a,
            (Some(a), ListOrder::NewestFirst) => seq < a,
        };
        let mut page: Vec<&Entry> = all
            .into_iter()
            .filter(|e| past(e.seq) && state.matches(&e.item, now))
            .take(limit + 1)
            .collect();
        let more = page.len() > limit;
        page.truncate(limit);
        let next = match (more, page.last()) {
            (true, Some(last)) => Some(cursor(format!("m.{}", last.seq))?),
            _ => None,
        };
        let items: Vec<Item> = page.into_iter().map(|e| e.item.clone()).collect();
        Ok(ItemPage::new(items, next, now))
    }

    /// `Store::lease_list`: in (expiry, seq) order.
    pub(crate) fn lease_list(
        &self,
        queue: &QueueName,
        limit: usize,
        after: Option<&Cursor>,
        now: Timestamp,
    ) -> Result<LeasePage> {
        let after = after.map(lease_cursor).transpose()?;
        let Some(&q) = self.queue_ids.get(queue) else {
            return Ok(LeasePage::new(Vec::new(), None, now));
        };
        let mut page: Vec<((Timestamp, u64), LeaseInfo)> = self.idx.queues[q]
            .running
            .live(&self.items)
            .into_iter()
            .filter(|c| after.is_none_or(|k| (c.at, c.seq) > k))
            .filter_map(|c| {
                let e = self.items.get(c.slot)?;
                LeaseInfo::from_item(&e.item)
                    .map(|l| ((c.at, c.seq), l.with_limit_key(e.limit_key().cloned())))
            })
            .take(limit + 1)
            .collect();
        let more = page.len() > limit;
        page.truncate(limit);
        let next = match (more, page.last()) {
            (true, Some(((at, seq), _))) => Some(cursor(format!("m.{}.{}", at.as_micros(), seq))?),
            _ => None,
        };
        let leases = page.into_iter().map(|(_, l)| l).collect();
        Ok(LeasePage::new(leases, next, now))
    }

    /// `Store::queue_list`: queues with any item, or paused.
    pub(crate) fn queue_list(&self) -> Vec<QueueName> {
        let mut out: Vec<QueueName> = self
            .queue_ids
            .iter()
            .filter(|(_, &q)| {
                let qi = &self.idx.queues[q];
                qi.paused || !qi.members.is_empty()
            })
            .map(|(name, _)| name.clone())
            .collect();
        out.sort();
        out
    }

    /// `Store::item_cancel`.
    pub(crate) fn item_cancel(
        &mut self,
        ids: &[ItemId],
        stop_running: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<CancelOutcome>> {
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let Some(e) = self.items.find(id) else {
                out.push(CancelOutcome::NotFound);
                continue;
            };
            match e.item.state {
                ItemState::Ready => {}
                ItemState::Running => {
                    let owner = e.item.owner.clone().ok_or_else(|| {
                        Error::internal("memory", format!("running item {id} has no owner"))
                    })?;
                    let attempt = e.item.attempt;
                    let stop = stop_running.and_then(|by| machine::cancel_running(&e.item, by));
                    let Some(failure) = stop else {
                        out.push(CancelOutcome::Running { attempt, owner });
                        continue;
                    };
                    // Under the one lock: the failure is applied to the token just read.
                    match self.fail(&[failure], now).as_slice() {
                        [FailOutcome::Dead] => out.push(CancelOutcome::Stopped { attempt, owner }),
                        other => {
                            return Err(Error::internal(
                                "memory",
                                format!("stopping running item {id} answered {other:?}"),
                            ))
                        }
                    }
                    continue;
                }
                ItemState::Dead => {
                    out.push(CancelOutcome::Dead);
                    continue;
                }
                ItemState::Done => {
                    out.push(CancelOutcome::Done);
                    continue;
                }
            }
            if self.idx.is_stream_head(e) {
                self.idx.unplace(e);
            }
            let next = self.idx.stream_leave(e);
            let slot = e.slot;
            // The dedup key stays in the queue's dedup map until its window ends (G11).
            self.delete(slot);
            if let Some(next) = next {
                self.place_if_candidate(next, now);
            }
            out.push(CancelOutcome::Cancelled);
        }
        Ok(out)
    }

    /// `Store::queue_pause` and `Store::queue_resume`: true when the flag changed.
    pub(crate) fn set_paused(&mut self, queue: &QueueName, paused: bool) -> bool {
        let q = self.queue_id(queue);
        let qi = &mut self.idx.queues[q];
        let changed = qi.paused != paused;
        qi.paused = paused;
        changed
    }

    /// The dead items a filter matches, earliest death first, at most its limit.
    pub(crate) fn dead_matching(&self, filter: &DeadFilter, now: Timestamp) -> Vec<ItemId> {
        let before = filter.dead_before(now);
        let Some(&q) = self.queue_ids.get(&filter.queue) else {
            return Vec::new();
        };
        let mut dead: Vec<(Timestamp, u64, ItemId)> = self.idx.queues[q]
            .members
            .iter()
            .filter_map(|&slot| self.items.get(slot))
            .filter(|e| e.item.state == ItemState::Dead && e.item.updated_at <= before)
            .map(|e| (e.item.updated_at, e.seq, e.item.id))
            .collect();
        dead.sort_unstable();
        let limit = usize::try_from(filter.limit).unwrap_or(usize::MAX);
        dead.into_iter().take(limit).map(|(_, _, id)| id).collect()
    }
}

impl State {
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
}
