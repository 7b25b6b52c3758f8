//! A `Mutex<VecDeque>` queue on the memory of the process.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tenure_core::{Clock, SystemClock, Timestamp};

use crate::LEASE;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ready,
    Running,
    Done,
}

#[derive(Debug)]
struct Item {
    payload: Vec<u8>,
    state: State,
    attempt: u32,
    owner: Option<Arc<str>>,
    lease_until: Timestamp,
}

#[derive(Debug, Default)]
struct Inner {
    ready: VecDeque<usize>,
    items: Vec<Item>,
}

/// One `std::sync::Mutex` around a `VecDeque` of ready indexes and a vector of
/// items. A claim pops up to `B` indexes and sets state, owner, `attempt + 1` and
/// expiry (one clock read) and copies each payload out; the finalize checks
/// `(state, attempt)` of each token under the lock, as the store's fence does, and
/// marks it done. It keeps no stream, scope, dedup or expiry index.
#[derive(Debug, Default)]
pub struct RawMemory {
    inner: Mutex<Inner>,
}

/// A claimed item: its index, the attempt it was claimed with, and its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawMemoryLease {
    /// The item's index in the order it was pushed.
    pub index: usize,
    /// The attempt this claim started (the fencing token with `index`).
    pub attempt: u32,
    /// The item's payload, copied out.
    pub payload: Vec<u8>,
}

impl RawMemory {
    /// An empty queue.
    pub fn new() -> Self {
        RawMemory::default()
    }

    /// A queue of `n` ready items; item `i` carries `i` as eight little-endian bytes,
    /// as [`crate::seed`] writes them.
    pub fn with_items(n: usize) -> Self {
        let raw = RawMemory::new();
        {
            let mut g = raw.lock();
            g.ready = (0..n).collect();
            g.items = (0..n)
                .map(|i| item((i as u64).to_le_bytes().to_vec()))
                .collect();
        }
        raw
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update under the lock is a field write or a push: a panic cannot
        // leave it inconsistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends one ready item carrying `payload`.
    pub fn push(&self, payload: Vec<u8>) {
        let mut g = self.lock();
        let index = g.items.len();
        g.items.push(item(payload));
        g.ready.push_back(index);
    }

    /// Claims up to `batch` ready items, oldest first, for `owner`.
    pub fn claim(&self, owner: &Arc<str>, batch: usize) -> Vec<RawMemoryLease> {
        let mut g = self.lock();
        let now = SystemClock.now();
        let take = batch.min(g.ready.len());
        let mut out = Vec::with_capacity(take);
        for _ in 0..take {
            let Some(i) = g.ready.pop_front() else { break };
            let it = &mut g.items[i];
            it.state = State::Running;
            it.attempt += 1;
            it.owner = Some(owner.clone());
            it.lease_until = now + LEASE;
            out.push(RawMemoryLease {
                index: i,
                attempt: it.attempt,
                payload: it.payload.clone(),
            });
        }
        out
    }

    /// Marks each claimed item done if it is still running with that attempt;
    /// returns how many were.
    pub fn finalize(&self, leases: &[RawMemoryLease]) -> u64 {
        let mut g = self.lock();
        let mut accepted = 0u64;
        for l in leases {
            let it = &mut g.items[l.index];
            if it.state == State::Running && it.attempt == l.attempt {
                it.state = State::Done;
                it.owner = None;
                accepted += 1;
            }
        }
        accepted
    }
}

fn item(payload: Vec<u8>) -> Item {
    Item {
        payload,
        state: State::Ready,
        attempt: 0,
        owner: None,
        lease_until: Timestamp::EPOCH,
    }
}
