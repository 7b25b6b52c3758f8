//! The attempts a worker holds, from claim until their outcome is written or
//! discarded: the in-flight table every loop reads, the renewal schedule the renewal
//! loop works from, and the pool of spare controls the claims reuse.
//!
//! Written by the claim path (dispatch records each claim's leases), the renewal loop
//! (reschedules, caps), the slots (stop, forget) and the finalizer (forget once the
//! store answered); it reads nothing of theirs.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::time::Instant;

use tenure_core::LeaseToken;

use crate::attempt::{Control, StopReason};

/// Most controls of finished attempts a worker keeps for its next claims.
const SPARE_CONTROLS: usize = 4096;

/// One attempt this worker holds: from its claim until its outcome is written or
/// discarded. Where its handler is (started, done, ended) lives in its
/// [`Control`], which the slot reaches without this map.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The attempt's stop reason, phase and cancellation token, shared with its job.
    pub(crate) control: Arc<Control>,
    /// When the last successful renewal (or the claim) was sent.
    pub(crate) renewed_at: Instant,
    /// The store refused further renewals (G4).
    pub(crate) capped: bool,
    /// A "lease lost" answer has been counted for this attempt.
    pub(crate) lost_counted: bool,
    /// A finalize call for this attempt failed without an answer; it may have
    /// committed (see the finalizer's `settle`).
    pub(crate) unanswered: bool,
    /// The renewal group the lease is scheduled in ([`GroupRef::NONE`] while it is
    /// out for renewal or not scheduled).
    pub(crate) group: GroupRef,
    /// The index of the item's queue among the worker's metric handles.
    pub(crate) queue: u32,
}

/// Which renewal group a lease belongs to: a slot in [`InFlight`]'s group table and
/// the sequence number of the group that held that slot when the lease joined it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupRef {
    slot: u32,
    seq: u64,
}

impl GroupRef {
    /// In no group.
    pub(crate) const NONE: GroupRef = GroupRef { slot: 0, seq: 0 };
}

/// Leases due for renewal at the same instant: those one claim answered (they share
/// the claim's send time), or those one renewal call renewed.
#[derive(Debug)]
struct Group {
    /// 0 while the slot is free.
    seq: u64,
    at: Instant,
    /// The leases that joined; those that left since (finished, or rescheduled) are
    /// skipped when the group comes due.
    tokens: Vec<LeaseToken>,
    /// How many of `tokens` still belong to the group.
    live: usize,
}

/// The attempts this worker holds, and when each lease is to be renewed.
///
/// Leases are scheduled in *groups* that share a due instant: one per claim answer,
/// one per renewal call, so the schedule costs one heap push per claim, not per
/// lease. The schedule is a min-heap of groups with lazy deletion: a group whose
/// leases have all left (finished, or renewed since) is freed at once, and its heap
/// entry dropped when it surfaces; a lease that left a group still live is skipped
/// when the group comes due. So the renewal loop only ever reads the groups that are
/// due, never the whole set of attempts. The heap is rebuilt from the live groups
/// when stale entries outnumber them, which keeps it within twice the live groups.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    pub(crate) entries: HashMap<LeaseToken, Entry, foldhash::fast::RandomState>,
    /// (due instant, group seq, group slot).
    due: BinaryHeap<Reverse<(Instant, u64, u32)>>,
    groups: Vec<Group>,
    free_groups: Vec<u32>,
    last_seq: u64,
    /// The instant the renewal loop sleeps until, as it last told; `None` when it
    /// sleeps with nothing due.
    pub(crate) armed: Option<Instant>,
}

impl InFlight {
    /// Records an attempt that is not yet scheduled for renewal.
    #[cfg(test)]
    pub(crate) fn insert(&mut self, token: LeaseToken, entry: Entry) {
        if let Some(old) = self.entries.insert(token, entry) {
            self.leave_group(old.group);
        }
    }

    /// Forgets `token`'s attempt (and its place in the renewal schedule).
    pub(crate) fn forget(&mut self, token: &LeaseToken) -> Option<Entry> {
        let e = self.entries.remove(token)?;
        self.leave_group(e.group);
        Some(e)
    }

    fn live_group(&mut self, g: GroupRef) -> Option<&mut Group> {
        if g.seq == 0 {
            return None;
        }
        let slot = usize::try_from(g.slot).ok()?;
        self.groups.get_mut(slot).filter(|group| group.seq == g.seq)
    }

    /// One lease left group `g`; the group is freed when none is left.
    fn leave_group(&mut self, g: GroupRef) {
        let Some(group) = self.live_group(g) else {
            return;
        };
        group.live -= 1;
        if group.live == 0 {
            group.seq = 0;
            group.tokens.clear();
            self.free_groups.push(g.slot);
        }
    }

    /// Records the attempts of one claim answer, all due for renewal at `at`, as one
    /// group; true when that is earlier than the renewal loop is armed for.
    pub(crate) fn insert_claimed(
        &mut self,
        claimed: impl IntoIterator<Item = (LeaseToken, Entry)>,
        at: Instant,
    ) -> bool {
        let (me, index) = self.new_group();
        let mut taken = std::mem::take(&mut self.groups[index].tokens);
        for (t, mut e) in claimed {
            e.group = me;
            if let Some(old) = self.entries.insert(t, e) {
                self.leave_group(old.group);
            }
            taken.push(t);
        }
        self.fill_group(me, index, taken, at)
    }

    /// A free group slot, and a new sequence number for the group to go in it.
    fn new_group(&mut self) -> (GroupRef, usize) {
        let slot = match self.free_groups.pop() {
            Some(slot) => slot,
            None => {
                self.groups.push(Group {
                    seq: 0,
                    // Set when the group is filled.
                    at: Instant::now(),
                    tokens: Vec::new(),
                    live: 0,
                });
                u32::try_from(self.groups.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.last_seq += 1;
        let index = usize::try_from(slot).unwrap_or(usize::MAX);
        (
            GroupRef {
                slot,
                seq: self.last_seq,
            },
            index,
        )
    }

    /// Puts `tokens` (each a lease that joined `me`) in the group's slot and
    /// schedules it at `at`; an empty group is freed at once.
    fn fill_group(
        &mut self,
        me: GroupRef,
        index: usize,
        tokens: Vec<LeaseToken>,
        at: Instant,
    ) -> bool {
        let live = tokens.len();
        let group = &mut self.groups[index];
        group.tokens = tokens;
        if live == 0 {
            self.free_groups.push(me.slot);
            return false;
        }
        group.seq = me.seq;
        group.at = at;
        group.live = live;
        self.push_due(at, me.seq, me.slot)
    }

    /// Schedules `token`'s next renewal at `at`, alone; true when that is earlier
    /// than the renewal loop is armed for, so it must be woken to re-arm.
    #[cfg(test)]
    pub(crate) fn schedule(&mut self, token: LeaseToken, at: Instant) -> bool {
        self.schedule_all([token], at)
    }

    /// Schedules the next renewal of every held attempt of `tokens` at `at`, as one
    /// group (each leaves the group it was in); true when that is earlier than the
    /// renewal loop is armed for, so it must be woken to re-arm.
    pub(crate) fn schedule_all(
        &mut self,
        tokens: impl IntoIterator<Item = LeaseToken>,
        at: Instant,
    ) -> bool {
        let (me, index) = self.new_group();
        let mut taken = std::mem::take(&mut self.groups[index].tokens);
        for t in tokens {
            let Some(e) = self.entries.get_mut(&t) else {
                continue;
            };
            if e.group == me {
                continue;
            }
            let old = std::mem::replace(&mut e.group, me);
            self.leave_group(old);
            taken.push(t);
        }
        self.fill_group(me, index, taken, at)
    }

    fn push_due(&mut self, at: Instant, seq: u64, slot: u32) -> bool {
        let live_groups = self.groups.len() - self.free_groups.len();
        if self.due.len() > 2 * live_groups + 1024 {
            self.due = self
                .groups
                .iter()
                .enumerate()
                .filter(|(_, g)| g.seq != 0)
                .map(|(i, g)| Reverse((g.at, g.seq, u32::try_from(i).unwrap_or(u32::MAX))))
                .collect();
        } else {
            self.due.push(Reverse((at, seq, slot)));
        }
        let earlier = self.armed.is_none_or(|armed| at < armed);
        if earlier {
            self.armed = Some(at);
        }
        earlier
    }

    /// The due instant of the earliest live group, dropping stale heap entries on the
    /// way. (A live group whose leases have all stopped being renewable comes due
    /// all the same; [`InFlight::take_due`] then finds nothing in it.)
    pub(crate) fn next_due(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, seq, slot))) = self.due.peek().copied() {
            if self.live_group(GroupRef { slot, seq }).is_some() {
                return Some(at);
            }
            self.due.pop();
        }
        None
    }

    /// Takes the held leases due by `by` whose attempt passes `keep`, earliest group
    /// first, at most `max`. They leave the schedule until the caller schedules them
    /// again; so do the due ones `keep` refuses.
    pub(crate) fn take_due(
        &mut self,
        by: Instant,
        max: usize,
        keep: impl Fn(&Entry) -> bool,
    ) -> Vec<LeaseToken> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(at) = self.next_due() else {
                break;
            };
            if at > by {
                break;
            }
            let Some(Reverse((_, seq, slot))) = self.due.peek().copied() else {
                break;
            };
            let me = GroupRef { slot, seq };
            let index = usize::try_from(slot).unwrap_or(usize::MAX);
            while out.len() < max {
                let Some(t) = self.groups[index].tokens.pop() else {
                    break;
                };
                let Some(e) = self.entries.get_mut(&t) else {
                    continue;
                };
                if e.group != me {
                    continue;
                }
                e.group = GroupRef::NONE;
                let wanted = keep(e);
                let group = &mut self.groups[index];
                group.live -= 1;
                if wanted {
                    out.push(t);
                }
                if group.live == 0 {
                    break;
                }
            }
            let group = &mut self.groups[index];
            if group.live == 0 || group.tokens.is_empty() {
                group.seq = 0;
                group.live = 0;
                group.tokens.clear();
                self.free_groups.push(slot);
                self.due.pop();
            }
        }
        out
    }

    /// How many heap entries the schedule keeps (for tests of its bound).
    #[cfg(test)]
    fn schedule_len(&self) -> usize {
        self.due.len()
    }
}

/// The in-flight table under its lock, what wakes the renewal loop to re-arm, and the
/// spare controls.
#[derive(Debug, Default)]
pub(crate) struct Attempts {
    table: Mutex<InFlight>,
    /// Notified when a lease is scheduled earlier than the renewal loop is armed for.
    pub(crate) renew_wake: Notify,
    /// Controls of finished attempts, reset, for the next claims (at most
    /// [`SPARE_CONTROLS`]): a busy worker allocates none per attempt.
    spare_controls: Mutex<Vec<Arc<Control>>>,
}

impl Attempts {
    /// The in-flight table and renewal schedule, locked.
    pub(crate) fn lock(&self) -> MutexGuard<'_, InFlight> {
        // A panic while the lock is held cannot leave the map inconsistent (every
        // update is a single insert, remove or field write), so poisoning is ignored.
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Tells the attempt to stop for `reason`, unless its handler already returned or
    /// it was told before. True when this call stopped it.
    pub(crate) fn stop_attempt(&self, token: &LeaseToken, reason: StopReason) -> bool {
        let map = self.lock();
        match map.entries.get(token) {
            Some(e) => e.control.stop_unless_done(reason),
            None => false,
        }
    }

    /// True while `token`'s attempt is in flight and its outcome has not been sent to
    /// the finalizer (its handler runs, or it waits for a slot).
    pub(crate) fn outcome_pending(&self, token: &LeaseToken) -> bool {
        self.lock()
            .entries
            .get(token)
            .is_some_and(|e| !e.control.phase().handler_done)
    }

    /// Marks a "lease lost" answer for `token` counted; the index of its queue when
    /// this is the first for its attempt (or it is no longer held), None when it was
    /// counted before.
    pub(crate) fn first_lost(&self, token: &LeaseToken) -> Option<u32> {
        match self.lock().entries.get_mut(token) {
            Some(e) if !e.lost_counted => {
                e.lost_counted = true;
                Some(e.queue)
            }
            Some(_) => None,
            None => Some(0),
        }
    }

    /// The index of `token`'s queue among the worker's metric handles (0 when it is
    /// no longer held).
    pub(crate) fn queue(&self, token: &LeaseToken) -> u32 {
        self.lock().entries.get(token).map_or(0, |e| e.queue)
    }

    /// Marks `tokens` as sent in a finalize call that got no answer.
    pub(crate) fn mark_unanswered(&self, tokens: &[LeaseToken]) {
        let mut map = self.lock();
        for t in tokens {
            if let Some(e) = map.entries.get_mut(t) {
                e.unanswered = true;
            }
        }
    }

    /// True when an earlier finalize call for `token` got no answer.
    pub(crate) fn was_unanswered(&self, token: &LeaseToken) -> bool {
        self.lock().entries.get(token).is_some_and(|e| e.unanswered)
    }

    pub(crate) fn remove(&self, token: &LeaseToken) {
        self.lock().forget(token);
    }

    /// Forgets every attempt of `tokens` under one lock; their controls that no job
    /// shares any more are kept for the next claims.
    pub(crate) fn remove_all<'a>(&self, tokens: impl IntoIterator<Item = &'a LeaseToken>) {
        let mut spare = Vec::new();
        {
            let mut map = self.lock();
            for t in tokens {
                if let Some(e) = map.forget(t) {
                    spare.push(e.control);
                }
            }
        }
        self.recycle_controls(spare);
    }

    /// Keeps the controls of `spare` that nothing else holds (up to
    /// [`SPARE_CONTROLS`]), reset, for [`Attempts::controls`] to hand out again.
    fn recycle_controls(&self, spare: Vec<Arc<Control>>) {
        let mut reset: Vec<Arc<Control>> = spare
            .into_iter()
            .filter_map(|mut c| {
                let unshared = Arc::get_mut(&mut c)?;
                unshared.reset();
                Some(c)
            })
            .collect();
        if reset.is_empty() {
            return;
        }
        let mut pool = self
            .spare_controls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let room = SPARE_CONTROLS.saturating_sub(pool.len());
        reset.truncate(room);
        pool.append(&mut reset);
    }

    /// `n` fresh controls for newly claimed attempts: kept ones first, under one lock,
    /// then new ones.
    pub(crate) fn controls(&self, n: usize) -> Vec<Arc<Control>> {
        let mut controls = {
            let mut pool = self
                .spare_controls
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let keep = pool.len().saturating_sub(n);
            pool.split_off(keep)
        };
        controls.reserve(n - controls.len());
        while controls.len() < n {
            controls.push(Arc::new(Control::default()));
        }
        controls
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use tenure_core::ItemId;

    fn entry(due: Instant) -> Entry {
        let control = Arc::new(Control::default());
        control.start();
        Entry {
            control,
            renewed_at: due,
            capped: false,
            lost_counted: false,
            unanswered: false,
            group: GroupRef::NONE,
            queue: 0,
        }
    }

    fn token() -> LeaseToken {
        LeaseToken::new(ItemId::new(), 1, tenure_core::LeaseId::mint())
    }

    #[test]
    fn the_schedule_hands_out_due_leases_earliest_first_and_skips_finished_and_renewed_ones() {
        let base = Instant::now();
        let at = |ms: u64| base + Duration::from_millis(ms);
        let mut map = InFlight::default();
        let tokens: Vec<LeaseToken> = (0..5).map(|_| token()).collect();
        for (i, t) in tokens.iter().enumerate() {
            let due = at(100 * (5 - i as u64));
            map.insert(*t, entry(due));
            map.schedule(*t, due);
        }
        // tokens[4] is due first (100 ms), tokens[0] last (500 ms).
        map.forget(&tokens[4]); // finished
        map.schedule(tokens[3], at(1_000)); // renewed: its 200 ms entry is stale
        assert_eq!(map.next_due(), Some(at(300)));
        let due = map.take_due(at(450), 10, |_| true);
        assert_eq!(due, vec![tokens[2], tokens[1]]);
        assert_eq!(map.take_due(at(2_000), 1, |_| true), vec![tokens[0]]);
        assert_eq!(map.take_due(at(2_000), 10, |_| true), vec![tokens[3]]);
        assert_eq!(map.next_due(), None);
    }

    #[test]
    fn the_schedule_stays_within_twice_the_leases_held_however_many_come_and_go() {
        let base = Instant::now();
        let mut map = InFlight::default();
        let held: Vec<LeaseToken> = (0..10).map(|_| token()).collect();
        for t in &held {
            map.insert(*t, entry(base));
            map.schedule(*t, base);
        }
        for i in 0..100_000u64 {
            let t = token();
            let due = base + Duration::from_micros(i);
            map.insert(t, entry(due));
            map.schedule(t, due);
            assert!(map.schedule_len() <= 2 * map.entries.len() + 1025);
            map.forget(&t);
        }
        let mut due = map.take_due(base + Duration::from_secs(1), 100, |_| true);
        due.sort();
        let mut expected = held;
        expected.sort();
        assert_eq!(due, expected, "only the leases still held come out");
    }

    #[test]
    fn the_leases_of_one_claim_share_one_schedule_entry_and_come_due_in_calls_of_the_limit() {
        let base = Instant::now();
        let mut map = InFlight::default();
        let tokens: Vec<LeaseToken> = (0..10).map(|_| token()).collect();
        for t in &tokens {
            map.insert(*t, entry(base));
        }
        map.schedule_all(tokens.iter().copied(), base);
        assert_eq!(map.schedule_len(), 1, "one entry for the whole claim");
        map.forget(&tokens[0]); // finished before its renewal
        let mut due = map.take_due(base, 4, |_| true);
        assert_eq!(due.len(), 4, "no more than the limit in one call");
        due.extend(map.take_due(base, 100, |_| true));
        due.sort();
        let mut expected = tokens[1..].to_vec();
        expected.sort();
        assert_eq!(
            due, expected,
            "each held lease once, the finished one skipped"
        );
        assert_eq!(map.next_due(), None);
    }

    #[test]
    fn a_lease_scheduled_earlier_than_the_loop_is_armed_for_asks_for_a_wake() {
        let base = Instant::now();
        let mut map = InFlight::default();
        let (a, b, c) = (token(), token(), token());
        for t in [a, b, c] {
            map.insert(t, entry(base));
        }
        assert!(
            map.schedule(a, base + Duration::from_secs(10)),
            "nothing armed yet"
        );
        assert!(
            !map.schedule(b, base + Duration::from_secs(20)),
            "later than armed"
        );
        assert!(
            map.schedule(c, base + Duration::from_secs(5)),
            "earlier than armed"
        );
    }
}
