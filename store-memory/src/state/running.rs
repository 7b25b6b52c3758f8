//! The indexes of running items, by lease expiry (G2) and by owner (G12), kept lazily.
//!
//! A claim (or renewal) writes one [`Claimed`] record into each; a finalize removes
//! nothing. A record stays true while the item in its slot is still the same item
//! (enqueue sequence), running the same attempt (and, for the expiry index, on the
//! same expiry); a record that is no longer true is *stale* and is skipped, and
//! dropped, by whoever meets it. So a claim and a complete each touch these indexes
//! with a push and nothing else, instead of a search and a rebalancing removal.
//!
//! Stale records cost memory until they are met, so [`Indexes::compact`] drops them all
//! once either index holds more than twice the running items (plus a constant): each
//! sweep costs no more than the records written since the last one, so the cost stays
//! `O(1)` per claim and the memory `O(running)`.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use tenure_core::{ItemState, Timestamp};

use super::{Indexes, Slab, Slot};

/// Stale records an index may hold beyond twice the running items before a sweep.
const SLACK: usize = 4096;

/// Microseconds per expiry bucket (about a millisecond): records of one bucket are
/// sorted only when the bucket comes due.
const BUCKET_MICROS: i64 = 1024;

/// One claim of one item, as the running indexes record it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Claimed {
    /// The lease's expiry when the record was written.
    pub(super) at: Timestamp,
    /// The item's enqueue sequence: unique, so a reused slot does not match.
    pub(super) seq: u64,
    /// The attempt the claim started: raised by every claim, so an old record of a
    /// re-claimed item does not match.
    pub(super) attempt: u32,
    /// Where the item is.
    pub(super) slot: Slot,
}

impl Slab {
    /// True while `c` names a running attempt (whatever its expiry now is).
    pub(super) fn runs(&self, c: &Claimed) -> bool {
        self.get(c.slot).is_some_and(|e| {
            e.seq == c.seq && e.item.state == ItemState::Running && e.item.attempt == c.attempt
        })
    }

    /// True while `c` names a running attempt whose lease ends at `c.at`.
    pub(super) fn expires(&self, c: &Claimed) -> bool {
        self.runs(c)
            && self
                .get(c.slot)
                .is_some_and(|e| e.item.lease_expires_at == Some(c.at))
    }
}

/// Records of one bucket of expiry times.
#[derive(Clone, Default)]
struct Bucket {
    claims: Vec<Claimed>,
    /// Stale records dropped and the rest sorted by `(at, seq)`, greatest first, so the
    /// earliest is last. Cleared by every push.
    sorted: bool,
}

/// A queue's running items by lease expiry.
#[derive(Clone, Default)]
pub(super) struct Expiries {
    buckets: BTreeMap<i64, Bucket>,
}

fn bucket_of(at: Timestamp) -> i64 {
    at.as_micros().div_euclid(BUCKET_MICROS)
}

impl Expiries {
    /// Records a lease ending at `c.at`.
    pub(super) fn push(&mut self, c: Claimed) {
        self.with_bucket(bucket_of(c.at), |b| b.claims.push(c));
    }

    /// Records leases that all end in one bucket (each in the bucket of the first),
    /// with one lookup.
    fn push_bucket(&mut self, claims: &[(usize, Claimed)]) {
        let Some((_, first)) = claims.first() else {
            return;
        };
        self.with_bucket(bucket_of(first.at), |b| match claims {
            [(_, c)] => b.claims.push(*c),
            all => b.claims.extend(all.iter().map(|(_, c)| *c)),
        });
    }

    /// Runs `add` on bucket `k` (made if missing), which it adds records to.
    fn with_bucket(&mut self, k: i64, add: impl FnOnce(&mut Bucket)) {
        // Claims mostly come in expiry order: the last bucket, without a search.
        let bucket = match self.buckets.last_entry() {
            Some(last) if *last.key() == k => last.into_mut(),
            last => {
                // Sized like the bucket before it, so a steady claim rate grows no
                // bucket by doubling.
                let size = last.map_or(0, |l| l.get().claims.len()).clamp(4, 1024);
                self.buckets.entry(k).or_insert_with(|| Bucket {
                    claims: Vec::with_capacity(size),
                    sorted: false,
                })
            }
        };
        bucket.sorted = false;
        add(bucket);
    }

    /// The earliest live record whose lease ended at or before `now`, dropping stale
    /// records on the way; `removed` counts the records dropped.
    pub(super) fn first_expired(
        &mut self,
        items: &Slab,
        now: Timestamp,
        removed: &mut usize,
    ) -> Option<Claimed> {
        loop {
            let mut first = self.buckets.first_entry()?;
            if *first.key() > bucket_of(now) {
                return None;
            }
            let b = first.get_mut();
            if !b.sorted {
                let before = b.claims.len();
                b.claims.retain(|c| items.expires(c));
                *removed += before - b.claims.len();
                b.claims.sort_unstable_by_key(|c| Reverse((c.at, c.seq)));
                b.sorted = true;
            }
            while let Some(c) = b.claims.last() {
                if items.expires(c) {
                    break;
                }
                b.claims.pop();
                *removed += 1;
            }
            match b.claims.last() {
                None => {
                    first.remove();
                }
                Some(c) if c.at <= now => return Some(*c),
                Some(_) => return None,
            }
        }
    }

    /// Takes out the record [`first_expired`](Self::first_expired) just answered.
    pub(super) fn pop_first(&mut self) {
        if let Some(mut first) = self.buckets.first_entry() {
            first.get_mut().claims.pop();
            if first.get().claims.is_empty() {
                first.remove();
            }
        }
    }

    /// Every live record, by `(expiry, seq)`.
    pub(super) fn live(&self, items: &Slab) -> Vec<Claimed> {
        let mut all: Vec<Claimed> = self
            .buckets
            .values()
            .flat_map(|b| b.claims.iter().copied())
            .filter(|c| items.expires(c))
            .collect();
        all.sort_unstable_by_key(|c| (c.at, c.seq));
        all.dedup_by_key(|c| (c.at, c.seq));
        all
    }

    /// Drops every stale record; answers how many.
    fn sweep(&mut self, items: &Slab) -> usize {
        let mut removed = 0;
        self.buckets.retain(|_, b| {
            let before = b.claims.len();
            b.claims.retain(|c| items.expires(c));
            removed += before - b.claims.len();
            !b.claims.is_empty()
        });
        removed
    }
}

impl Indexes {
    /// Records the claim `c` in the expiry index of queue `q`.
    pub(super) fn expiry_push(&mut self, q: usize, c: Claimed) {
        self.queues[q].running.push(c);
        self.expiry_records += 1;
    }

    /// Records claims `(queue, record)` in the expiry indexes of their queues: each
    /// run of records of one queue and one expiry bucket with one bucket lookup.
    pub(super) fn expiry_push_all(&mut self, claims: &[(usize, Claimed)]) {
        let mut rest = claims;
        while let Some(&(q, first)) = rest.first() {
            let k = bucket_of(first.at);
            let n = rest
                .iter()
                .position(|(q2, c)| *q2 != q || bucket_of(c.at) != k)
                .unwrap_or(rest.len());
            let (run, tail) = rest.split_at(n);
            self.queues[q].running.push_bucket(run);
            self.expiry_records += run.len();
            rest = tail;
        }
    }

    /// Sweeps stale records out of either running index once it holds more than twice
    /// the running items (see the module docs).
    pub(super) fn compact(&mut self, items: &Slab) {
        let bound = self.running_now.saturating_mul(2).saturating_add(SLACK);
        if self.expiry_records > bound {
            let mut removed = 0;
            for qi in &mut self.queues {
                removed += qi.running.sweep(items);
            }
            self.expiry_records -= removed;
        }
        if self.owner_records > bound {
            let mut removed = 0;
            self.owners.retain(|_, list| {
                let before = list.len();
                list.retain(|c| items.runs(c));
                removed += before - list.len();
                !list.is_empty()
            });
            self.owner_records -= removed;
        }
    }
}
