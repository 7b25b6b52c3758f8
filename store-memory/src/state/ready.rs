//! The ready index of a queue: its claimable candidates in claim order (G8).

use std::collections::{BTreeMap, VecDeque};

use super::{OrderKey, Slot};

/// A slot number no entry has: marks a lane entry taken out from the middle.
const GONE: Slot = Slot::MAX;

/// Claimable candidates by `(priority, run_at, seq)`.
///
/// Keys mostly arrive in claim order (every enqueue of a due item at the same
/// priority, on a clock that does not go back), so they go to `lane`, a sorted deque
/// where an insert is a push at the back and taking the first is a pop at the front.
/// A key that is not above the lane's last goes to `tree`. The first candidate is the
/// lesser of the two firsts. A key taken out of the middle of the lane (cancel, a
/// scope's waiting item) is found by binary search and marked [`GONE`] in place; the
/// lane's front is never a marked entry.
#[derive(Clone, Default)]
pub(super) struct Ready {
    lane: VecDeque<(OrderKey, Slot)>,
    tree: BTreeMap<OrderKey, Slot>,
}

impl Ready {
    /// Adds a candidate (not already in).
    pub(super) fn insert(&mut self, key: OrderKey, slot: Slot) {
        match self.lane.back() {
            Some((last, _)) if *last >= key => {
                self.tree.insert(key, slot);
            }
            _ => self.lane.push_back((key, slot)),
        }
    }

    /// The first candidate.
    pub(super) fn first_key_value(&self) -> Option<(&OrderKey, &Slot)> {
        let lane = self.lane.front().map(|(k, s)| (k, s));
        let tree = self.tree.first_key_value();
        match (lane, tree) {
            (Some(l), Some(t)) => Some(if t.0 < l.0 { t } else { l }),
            (l, t) => l.or(t),
        }
    }

    /// Takes out the first candidate.
    pub(super) fn pop_first(&mut self) -> Option<(OrderKey, Slot)> {
        let from_tree = match (self.lane.front(), self.tree.first_key_value()) {
            (Some((l, _)), Some((t, _))) => t < l,
            (None, _) => true,
            (Some(_), None) => false,
        };
        if from_tree {
            return self.tree.pop_first();
        }
        let first = self.lane.pop_front();
        self.trim();
        first
    }

    /// Takes out the candidate with `key`, if it is in.
    pub(super) fn remove(&mut self, key: &OrderKey) -> Option<Slot> {
        if let Some(slot) = self.tree.remove(key) {
            return Some(slot);
        }
        let at = self.lane.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
        let slot = std::mem::replace(&mut self.lane.get_mut(at)?.1, GONE);
        if slot == GONE {
            return None;
        }
        self.trim();
        Some(slot)
    }

    /// Every candidate, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&OrderKey, &Slot)> {
        self.lane
            .iter()
            .filter(|(_, s)| *s != GONE)
            .map(|(k, s)| (k, s))
            .chain(self.tree.iter())
    }

    /// Drops marked entries from the lane's front.
    fn trim(&mut self) {
        while self.lane.front().is_some_and(|(_, s)| *s == GONE) {
            self.lane.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use tenure_core::Timestamp;

    use super::Ready;
    use crate::state::OrderKey;

    #[derive(Clone, Debug)]
    enum Op {
        Insert { priority: i16, run_at: i64 },
        Remove(usize),
        PopFirst,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0i16..3, 0i64..20).prop_map(|(priority, run_at)| Op::Insert { priority, run_at }),
            1 => any::<usize>().prop_map(Op::Remove),
            2 => Just(Op::PopFirst),
        ]
    }

    proptest! {
        /// The lane and the tree together answer as one ordered map does.
        #[test]
        fn ready_orders_as_a_btreemap(ops in prop::collection::vec(op(), 1..200)) {
            let mut ready = Ready::default();
            let mut model: BTreeMap<OrderKey, usize> = BTreeMap::new();
            for (seq, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Insert { priority, run_at } => {
                        let key = (priority, 0, Timestamp::from_micros(run_at), seq as u64);
                        ready.insert(key, seq);
                        model.insert(key, seq);
                    }
                    Op::Remove(pick) => {
                        let keys: Vec<OrderKey> = model.keys().copied().collect();
                        if let Some(key) = keys.get(pick % keys.len().max(1)) {
                            prop_assert_eq!(ready.remove(key), model.remove(key));
                            prop_assert_eq!(ready.remove(key), None);
                        }
                    }
                    Op::PopFirst => prop_assert_eq!(ready.pop_first(), model.pop_first()),
                }
                prop_assert_eq!(
                    ready.first_key_value().map(|(k, s)| (*k, *s)),
                    model.first_key_value().map(|(k, s)| (*k, *s))
                );
                let mut all: Vec<(OrderKey, usize)> =
                    ready.iter().map(|(k, s)| (*k, *s)).collect();
                all.sort_unstable();
                let expected: Vec<(OrderKey, usize)> =
                    model.iter().map(|(k, s)| (*k, *s)).collect();
                prop_assert_eq!(all, expected);
            }
        }
    }
}
