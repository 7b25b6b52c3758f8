//! The lease state machine: every transition, its preconditions and its effects.
//!
//! Pure: no I/O, no async, no clock reads; the caller passes `now`. The memory store
//! runs on these functions directly; the SQL stores encode the same rules in their
//! statements and cite the function they mirror. The property tests at the bottom drive
//! random operation sequences and check that no sequence produces two live leases, a
//! finalize accepted from a superseded attempt, or a decreasing attempt.
//!
//! # Item-level rules (this module)
//!
//! | transition | precondition | effect |
//! |---|---|---|
//! | [`claim`] | `ready`, `run_at <= now` | `running`, `attempt + 1`, the claim's lease id, owner, `renewals = 0`, expiry `now + lease_for` |
//! | [`renew`] | current token; `renewals < max_renewals` | expiry `now + lease_for`, `renewals + 1` |
//! | [`complete`] | current token | `done`, owner and expiry cleared |
//! | [`fail`] | current token | `ready` at `now + delay` if retryable and `attempt < max_attempts`, else `dead`; `last_error` set |
//! | [`release`] | current token | `ready` at `now`; `attempt` and `stalls` kept; `max_attempts + 1` |
//! | [`put_back`] | `running`, an earlier item of its stream left `running` unfinished | `ready`; `attempt`, `stalls`, `run_at` kept; `max_attempts + 1` |
//! | [`recover`] | `running`, `lease_expires_at <= now` | `stalls + 1`; `dead` when `stalls >= max_stalls`, else `ready` at `now` |
//! | [`evict`] | `running` (owner evicted) | as [`recover`], without the expiry check |
//! | [`requeue`] | `dead` | `ready` at `now`, `max_attempts >= attempt + n`, `stalls = 0`; `attempt` kept |
//! | [`discard`] | `dead` | the item is deleted |
//!
//! "Current token" means `state == running && attempt == token.attempt && lease ==
//! token.lease` ([`is_current`]). The attempt alone is not enough: a failover that lost
//! an acknowledged claim hands the same attempt number out again, under a new lease id.
//! An expired lease nobody recovered or re-claimed is still current: the token proves no
//! other attempt started, so its late finalize is accepted (G3).
//!
//! # Collection-level rules (each store enforces these with its own indexes)
//!
//! - **Stream head (G9).** Among the items of one stream that are not `done` (ready,
//!   running or dead), only the first in enqueue order may be claimed. A dead head, a
//!   running head and a head waiting for a retry all block the stream.
//! - **Scope (G10).** An item whose scope has a `running` item is passed over.
//! - **Order (G8).** Claimable items go by `(priority, run_at, enqueue order)`.
//! - **Exclusivity (G1).** A claim is atomic: two claimers never both apply [`claim`] to
//!   one item.

use std::time::Duration;

use crate::keys::OwnerId;
use crate::model::{
    FailOutcome, Item, ItemState, LeaseId, LeaseToken, NewItem, Progress, RenewOutcome,
    TokenOutcome,
};
use crate::store::{Failure, Retry};
use crate::time::Timestamp;

/// The `last_error` prefix of an item that went dead by stalling (G6).
pub const STALLED_ERROR_PREFIX: &str = "stalled";

/// The `last_error` prefix of a running item an operator cancelled
/// ([`CancelParams::stop_running`](crate::CancelParams::stop_running)).
pub const CANCELLED_ERROR_PREFIX: &str = "cancelled by ";

/// The `last_error` of a running item `by` cancelled: `cancelled by <by>`.
pub fn cancelled_error(by: &str) -> String {
    format!("{CANCELLED_ERROR_PREFIX}{by}")
}

/// Who cancelled a dead item while it ran, read from its `last_error`; `None` for an
/// item that is not dead or died otherwise.
pub fn cancelled_by(item: &Item) -> Option<&str> {
    if item.state != ItemState::Dead {
        return None;
    }
    item.last_error
        .as_deref()?
        .strip_prefix(CANCELLED_ERROR_PREFIX)
}

/// The permanent failure that stops the item's current running attempt on behalf of
/// `by` ([`Store::item_cancel`](crate::Store::item_cancel) with
/// [`CancelParams::stop_running`](crate::CancelParams::stop_running)): a store applies
/// it as it applies [`Store::fail`](crate::Store::fail), fenced on the token, so the
/// item goes `dead` with [`cancelled_error`], its lease revoked. `None` when the item
/// is not running.
pub fn cancel_running(item: &Item, by: &str) -> Option<Failure> {
    (item.state == ItemState::Running)
        .then(|| Failure::permanent(item.token(), cancelled_error(by)))
}

/// The item a [`NewItem`] becomes when enqueued at `now`: `ready`, `attempt = 0`.
pub fn enqueue(new: &NewItem, now: Timestamp) -> Item {
    Item {
        id: new.id,
        queue: new.queue.clone(),
        payload: new.payload.clone(),
        stream: new.stream.clone(),
        scope: new.scope.clone(),
        dedup_key: new.dedup_key.clone(),
        priority: new.priority,
        run_at: new.schedule.run_at(now),
        state: ItemState::Ready,
        attempt: 0,
        lease: LeaseId::NONE,
        owner: None,
        lease_expires_at: None,
        renewals: 0,
        stalls: 0,
        max_attempts: new.max_attempts,
        max_stalls: new.max_stalls,
        max_renewals: new.max_renewals,
        last_error: None,
        created_at: now,
        updated_at: now,
        progress: None,
    }
}

/// True when the item itself may be claimed at `now` (G7); stream and scope rules are
/// the store's to check.
pub fn is_due(item: &Item, now: Timestamp) -> bool {
    item.state == ItemState::Ready && item.run_at <= now
}

/// True when `token` names the item's current running lease: its attempt and its lease
/// id (G3).
pub fn is_current(item: &Item, token: &LeaseToken) -> bool {
    item.id == token.id
        && item.state == ItemState::Running
        && item.attempt == token.attempt
        && item.lease == token.lease
}

/// True when the item is running on a lease that ended at or before `now` (G2).
pub fn is_expired(item: &Item, now: Timestamp) -> bool {
    item.state == ItemState::Running && item.lease_expires_at.is_some_and(|at| at <= now)
}

/// Claims a due item for `owner` on the lease `lease` (minted by the claim:
/// [`LeaseId::mint`]). Returns false, changing nothing, if it is not due.
pub fn claim(
    item: &mut Item,
    owner: &OwnerId,
    lease: LeaseId,
    now: Timestamp,
    lease_for: Duration,
) -> bool {
    if !is_due(item, now) {
        return false;
    }
    item.state = ItemState::Running;
    item.attempt = item.attempt.saturating_add(1);
    item.lease = lease;
    item.owner = Some(owner.clone());
    item.lease_expires_at = Some(now + lease_for);
    item.renewals = 0;
    item.updated_at = now;
    true
}

/// Extends the lease of the current attempt, up to the renewal cap (G3, G4).
pub fn renew(
    item: &mut Item,
    token: &LeaseToken,
    now: Timestamp,
    lease_for: Duration,
) -> RenewOutcome {
    if !is_current(item, token) {
        return RenewOutcome::LeaseLost;
    }
    if item.renewals >= item.max_renewals {
        return RenewOutcome::LimitReached {
            limit: item.max_renewals,
        };
    }
    item.renewals += 1;
    let expires_at = now + lease_for;
    item.lease_expires_at = Some(expires_at);
    item.updated_at = now;
    RenewOutcome::Renewed {
        expires_at,
        renewals: item.renewals,
    }
}

/// Keeps `progress` on the item as reported by the token's attempt, after a renewal
/// of that token was accepted ([`RenewParams::progress`](crate::RenewParams::progress)).
/// Returns false, changing nothing, when the token is not the current lease (G3).
pub fn report(item: &mut Item, token: &LeaseToken, progress: &Progress) -> bool {
    if !is_current(item, token) {
        return false;
    }
    item.progress = Some(progress.clone().for_attempt(token.attempt));
    true
}

/// Finishes the current attempt successfully (G3).
pub fn complete(item: &mut Item, token: &LeaseToken, now: Timestamp) -> TokenOutcome {
    if !is_current(item, token) {
        return TokenOutcome::LeaseLost;
    }
    item.state = ItemState::Done;
    item.owner = None;
    item.lease_expires_at = None;
    item.updated_at = now;
    TokenOutcome::Accepted
}

/// Records a failure of the current attempt (G3, G5).
pub fn fail(item: &mut Item, failure: &Failure, now: Timestamp) -> FailOutcome {
    if !is_current(item, &failure.token) {
        return FailOutcome::LeaseLost;
    }
    item.owner = None;
    item.lease_expires_at = None;
    item.updated_at = now;
    item.last_error = Some(failure.error.clone());
    match failure.retry {
        Retry::After(delay) if item.attempt < item.max_attempts => {
            item.state = ItemState::Ready;
            item.run_at = now + delay;
            FailOutcome::Retrying {
                run_at: item.run_at,
            }
        }
        _ => {
            item.state = ItemState::Dead;
            FailOutcome::Dead
        }
    }
}

/// Gives the current attempt's lease back unfinished: not a failure, not a stall.
///
/// The next claim is a new attempt (the fence needs a new number), so `max_attempts`
/// goes up by one with it: a release, such as a graceful shutdown's, never uses up the
/// item's budget of failures. As with [`requeue`], the limit moves, never the attempt.
pub fn release(item: &mut Item, token: &LeaseToken, now: Timestamp) -> TokenOutcome {
    if !is_current(item, token) {
        return TokenOutcome::LeaseLost;
    }
    item.max_attempts = item.max_attempts.saturating_add(1);
    item.state = ItemState::Ready;
    item.run_at = now;
    item.owner = None;
    item.lease_expires_at = None;
    item.updated_at = now;
    TokenOutcome::Accepted
}

/// Puts a running item of a stream run back to `ready` untouched, because an earlier
/// item of its stream left `running` other than by completing (the put-back rule of
/// [`Store::claim`](crate::Store::claim), G9). Owner and expiry are cleared; `attempt`,
/// `stalls`, `renewals` and `run_at` are kept, and `max_attempts` goes up by one as with
/// [`release`], so the put-back spends no attempt and counts no stall. Returns false,
/// changing nothing, if the item is not running.
pub fn put_back(item: &mut Item, now: Timestamp) -> bool {
    if item.state != ItemState::Running {
        return false;
    }
    item.max_attempts = item.max_attempts.saturating_add(1);
    item.state = ItemState::Ready;
    item.owner = None;
    item.lease_expires_at = None;
    item.updated_at = now;
    true
}

/// What recovery or eviction did to an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Back to ready.
    Requeued,
    /// Out of stalls: dead.
    Dead,
}

/// Recovers an expired lease (G2, G6). `None`, changing nothing, if it is not expired.
pub fn recover(item: &mut Item, now: Timestamp) -> Option<Recovery> {
    if !is_expired(item, now) {
        return None;
    }
    Some(stall(item, now))
}

/// Releases the lease of an evicted owner at once, counting a stall (G12). `None`,
/// changing nothing, if the item is not running.
pub fn evict(item: &mut Item, now: Timestamp) -> Option<Recovery> {
    if item.state != ItemState::Running {
        return None;
    }
    Some(stall(item, now))
}

fn stall(item: &mut Item, now: Timestamp) -> Recovery {
    item.stalls = item.stalls.saturating_add(1);
    item.owner = None;
    item.lease_expires_at = None;
    item.updated_at = now;
    if item.stalls >= item.max_stalls {
        item.state = ItemState::Dead;
        item.last_error = Some(stalled_error(item.stalls));
        Recovery::Dead
    } else {
        item.state = ItemState::Ready;
        item.run_at = now;
        Recovery::Requeued
    }
}

/// The `last_error` of an item that went dead after `stalls` expired leases.
pub fn stalled_error(stalls: u32) -> String {
    format!("{STALLED_ERROR_PREFIX}: lease expired {stalls} times")
}

/// Puts a dead item back to ready (G5). Returns false, changing nothing, if not dead.
pub fn requeue(item: &mut Item, now: Timestamp, additional_attempts: u32) -> bool {
    if item.state != ItemState::Dead {
        return false;
    }
    item.state = ItemState::Ready;
    item.run_at = now;
    item.stalls = 0;
    item.max_attempts = item
        .max_attempts
        .max(item.attempt.saturating_add(additional_attempts));
    item.updated_at = now;
    true
}

/// True when the item may be discarded (it is dead).
pub fn discard(item: &Item) -> bool {
    item.state == ItemState::Dead
}

/// True while the item holds its stream's head position (G9): it is not finished.
pub fn holds_stream(item: &Item) -> bool {
    item.state != ItemState::Done
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::QueueName;
    use proptest::prelude::*;

    const LEASE: Duration = Duration::from_secs(30);

    fn owner(n: u8) -> OwnerId {
        OwnerId::new(format!("w{n}")).unwrap()
    }

    fn item(now: Timestamp) -> Item {
        enqueue(
            &NewItem::new(QueueName::new("q").unwrap(), b"x".to_vec()),
            now,
        )
    }

    #[test]
    fn claim_raises_the_attempt_and_sets_the_lease() {
        let now = Timestamp::from_micros(1_000);
        let mut it = item(now);
        assert!(claim(&mut it, &owner(1), LeaseId::mint(), now, LEASE));
        assert_eq!(it.state, ItemState::Running);
        assert_eq!(it.attempt, 1);
        assert_eq!(it.lease_expires_at, Some(now + LEASE));
        assert!(
            !claim(&mut it, &owner(2), LeaseId::mint(), now, LEASE),
            "running is not claimable"
        );
    }

    #[test]
    fn a_superseded_token_changes_nothing() {
        let now = Timestamp::from_micros(0);
        let mut it = item(now);
        claim(&mut it, &owner(1), LeaseId::mint(), now, LEASE);
        let old = it.token();
        let later = now + LEASE;
        assert_eq!(recover(&mut it, later), Some(Recovery::Requeued));
        claim(&mut it, &owner(2), LeaseId::mint(), later, LEASE);
        let before = it.clone();
        assert_eq!(complete(&mut it, &old, later), TokenOutcome::LeaseLost);
        assert_eq!(release(&mut it, &old, later), TokenOutcome::LeaseLost);
        assert_eq!(renew(&mut it, &old, later, LEASE), RenewOutcome::LeaseLost);
        assert_eq!(
            fail(&mut it, &Failure::permanent(old, "x"), later),
            FailOutcome::LeaseLost
        );
        assert_eq!(it, before);
    }

    #[test]
    fn a_claim_lost_in_a_failover_leaves_its_token_refused() {
        let now = Timestamp::from_micros(0);
        let mut it = item(now);
        // The primary acknowledged this claim, then failed over before shipping it.
        let replica = it.clone();
        claim(&mut it, &owner(1), LeaseId::mint(), now, LEASE);
        let lost = it.token();
        // The new primary never saw it and hands the same attempt number out again.
        it = replica;
        claim(&mut it, &owner(2), LeaseId::mint(), now, LEASE);
        let new = it.token();
        assert_eq!((new.id, new.attempt), (lost.id, lost.attempt));
        assert_ne!(new, lost);
        let before = it.clone();
        assert_eq!(complete(&mut it, &lost, now), TokenOutcome::LeaseLost);
        assert_eq!(release(&mut it, &lost, now), TokenOutcome::LeaseLost);
        assert_eq!(renew(&mut it, &lost, now, LEASE), RenewOutcome::LeaseLost);
        assert_eq!(
            fail(&mut it, &Failure::permanent(lost, "x"), now),
            FailOutcome::LeaseLost
        );
        assert_eq!(it, before);
        assert_eq!(complete(&mut it, &new, now), TokenOutcome::Accepted);
    }

    #[test]
    fn minted_lease_ids_are_never_none_and_differ() {
        let ids: std::collections::HashSet<LeaseId> =
            (0..10_000).map(|_| LeaseId::mint()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(!ids.contains(&LeaseId::NONE));
        let other = std::thread::spawn(LeaseId::mint).join().unwrap();
        assert!(
            !ids.contains(&other),
            "another thread draws another sequence"
        );
    }

    #[test]
    fn retry_keeps_the_attempt_and_dies_when_attempts_run_out() {
        let now = Timestamp::from_micros(0);
        let mut it = item(now);
        it.max_attempts = 2;
        claim(&mut it, &owner(1), LeaseId::mint(), now, LEASE);
        let d = Duration::from_secs(5);
        let f1 = Failure::retry_after(it.token(), d, "e1");
        assert_eq!(
            fail(&mut it, &f1, now),
            FailOutcome::Retrying { run_at: now + d }
        );
        assert_eq!(it.attempt, 1);
        assert!(!is_due(&it, now));
        claim(&mut it, &owner(1), LeaseId::mint(), now + d, LEASE);
        let f2 = Failure::retry_after(it.token(), d, "e2");
        assert_eq!(fail(&mut it, &f2, now + d), FailOutcome::Dead);
        assert_eq!(it.last_error.as_deref(), Some("e2"));
    }

    #[test]
    fn requeue_never_lowers_the_attempt() {
        let now = Timestamp::from_micros(0);
        let mut it = item(now);
        it.max_attempts = 1;
        claim(&mut it, &owner(1), LeaseId::mint(), now, LEASE);
        let t = it.token();
        fail(&mut it, &Failure::retry_after(t, LEASE, "boom"), now);
        assert!(requeue(&mut it, now, 3));
        assert_eq!((it.attempt, it.max_attempts), (1, 4));
        assert_eq!(complete(&mut it, &t, now), TokenOutcome::LeaseLost);
    }

    #[test]
    fn the_renewal_cap_refuses_and_keeps_the_expiry() {
        let now = Timestamp::from_micros(0);
        let mut it = item(now);
        it.max_renewals = 1;
        claim(&mut it, &owner(1), LeaseId::mint(), now, LEASE);
        let t = it.token();
        assert!(matches!(
            renew(&mut it, &t, now, LEASE),
            RenewOutcome::Renewed { renewals: 1, .. }
        ));
        let expiry = it.lease_expires_at;
        assert_eq!(
            renew(&mut it, &t, now, LEASE),
            RenewOutcome::LimitReached { limit: 1 }
        );
        assert_eq!(it.lease_expires_at, expiry);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Claim(u8),
        Renew(u8),
        Complete(u8),
        Fail(u8, bool),
        Release(u8),
        Advance(u64),
        Recover,
        Evict,
        Requeue,
        /// The store fails over to a copy of the item as it was `n` steps ago: the
        /// writes since then, acknowledged or not, are forgotten.
        Failover(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..4).prop_map(Op::Claim),
            (0u8..4).prop_map(Op::Renew),
            (0u8..4).prop_map(Op::Complete),
            ((0u8..4), any::<bool>()).prop_map(|(t, p)| Op::Fail(t, p)),
            (0u8..4).prop_map(Op::Release),
            (0u64..60).prop_map(Op::Advance),
            Just(Op::Recover),
            Just(Op::Evict),
            Just(Op::Requeue),
            (1u8..8).prop_map(Op::Failover),
        ]
    }

    proptest! {
        /// Random sequences over one item with tokens held by several workers, and
        /// failovers that forget the latest writes: at most one token is ever current,
        /// every write accepted came from the current lease, and between failovers the
        /// attempt never decreases.
        #[test]
        fn no_sequence_breaks_the_fence(ops in prop::collection::vec(op(), 1..200)) {
            let mut now = Timestamp::from_micros(0);
            let mut it = item(now);
            it.max_attempts = 5;
            it.max_renewals = 3;
            // The token each of four workers last received from a claim.
            let mut held: [Option<LeaseToken>; 4] = [None; 4];
            // The item after each step, for failovers to go back to.
            let mut history: Vec<Item> = Vec::new();
            for op in ops {
                let before = it.clone();
                history.push(before.clone());
                let worker_token = |w: u8| held[usize::from(w)];
                match op.clone() {
                    Op::Claim(w) => {
                        if claim(&mut it, &owner(w), LeaseId::mint(), now, LEASE) {
                            held[usize::from(w)] = Some(it.token());
                        }
                    }
                    Op::Renew(w) => if let Some(t) = worker_token(w) {
                        let out = renew(&mut it, &t, now, LEASE);
                        prop_assert_eq!(out != RenewOutcome::LeaseLost, is_current(&before, &t));
                    },
                    Op::Complete(w) => if let Some(t) = worker_token(w) {
                        let out = complete(&mut it, &t, now);
                        prop_assert_eq!(out == TokenOutcome::Accepted, is_current(&before, &t));
                    },
                    Op::Fail(w, permanent) => if let Some(t) = worker_token(w) {
                        let f = if permanent { Failure::permanent(t, "p") } else { Failure::retry_after(t, Duration::from_secs(1), "r") };
                        let out = fail(&mut it, &f, now);
                        prop_assert_eq!(out != FailOutcome::LeaseLost, is_current(&before, &t));
                    },
                    Op::Release(w) => if let Some(t) = worker_token(w) {
                        let out = release(&mut it, &t, now);
                        prop_assert_eq!(out == TokenOutcome::Accepted, is_current(&before, &t));
                    },
                    Op::Advance(s) => now = now + Duration::from_secs(s),
                    Op::Recover => { recover(&mut it, now); }
                    Op::Evict => { evict(&mut it, now); }
                    Op::Requeue => { requeue(&mut it, now, 2); }
                    Op::Failover(n) => {
                        let back = history.len().saturating_sub(usize::from(n));
                        it = history[back].clone();
                        history.truncate(back);
                    }
                }
                if !matches!(op, Op::Failover(_)) {
                    prop_assert!(it.attempt >= before.attempt, "attempt decreased");
                }
                let live = held.iter().flatten().filter(|t| is_current(&it, t)).count();
                prop_assert!(live <= 1, "two tokens current at once");
                if it.state == ItemState::Running {
                    prop_assert!(it.owner.is_some() && it.lease_expires_at.is_some());
                } else {
                    prop_assert!(it.owner.is_none() && it.lease_expires_at.is_none());
                }
                let moved = it.state != before.state || it.attempt != before.attempt;
                if moved && !matches!(op, Op::Failover(_)) {
                    prop_assert!(it.updated_at == now);
                }
            }
        }
    }
}
