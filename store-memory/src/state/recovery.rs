//! Time and recovery (the contract's third group): expired leases recovered, by a
//! claim for its own queues or by [`State::recover_expired`] across queues, the
//! put-back rule of stream runs, and [`State::purge`].

use std::time::Duration;

use tenure_core::machine::{self, Recovery};
use tenure_core::{ItemState, Purged, Recovered, StreamKey, Timestamp};

use super::running::Claimed;
use super::{Slot, State, TimeKey};

impl State {
    /// Recovers expired leases of queue `q`, oldest expiry first, up to `limit`.
    pub(super) fn recover_queue(
        &mut self,
        q: usize,
        now: Timestamp,
        limit: u64,
        counts: &mut Recovered,
    ) {
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
    pub(super) fn put_back_after(&mut self, stream: &StreamKey, seq: u64, now: Timestamp) {
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
}
