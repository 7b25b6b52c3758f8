//! Finalize (the contract's second group): renew, complete, fail and release, each
//! fenced on the lease token.

use std::time::Duration;

use tenure_core::machine;
use tenure_core::{
    FailOutcome, Failure, LeaseToken, Progress, RenewOutcome, Timestamp, TokenOutcome,
};

use super::running::Claimed;
use super::{unlink_current, Entry, State};

impl State {
    /// `Store::renew`.
    pub(crate) fn renew(
        &mut self,
        tokens: &[LeaseToken],
        progress: &[Option<Progress>],
        lease_for: Duration,
        now: Timestamp,
    ) -> Vec<RenewOutcome> {
        let mut out = Vec::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            let Some(e) = self.items.find_mut(t.id) else {
                out.push(RenewOutcome::LeaseLost);
                continue;
            };
            let answer = machine::renew(&mut e.item, t, now, lease_for);
            if let RenewOutcome::Renewed { expires_at, .. } = answer {
                if let Some(Some(p)) = progress.get(i) {
                    // Kept with the renewal it came with, from the current lease only.
                    machine::report(&mut e.item, t, p);
                }
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
            // G9: an item behind an unfinished item of its stream (the rest of a
            // run) is not completed before it; nothing changes.
            if let Some(e) = self.items.find(t.id) {
                if machine::is_current(&e.item, t) && !self.idx.is_stream_head(e) {
                    out.push(TokenOutcome::OutOfOrder);
                    continue;
                }
            }
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
}
