//! [`MemoryStore`]: the type, its test aids, and its [`Base`] impl. Each group of the
//! contract is implemented in the file of that group ([`claim`], [`finalize`],
//! [`recovery`], [`instances`], [`inspect`], [`limits`]), each method one call into
//! [`State`] under the store's lock; [`Store`] comes from core, which validates the
//! params first. The constructors, which are the store's configuration, are in
//! `config.rs`.

mod claim;
mod finalize;
mod history;
mod inspect;
mod instances;
mod limits;
mod recovery;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tenure_core::contract::Base;
use tenure_core::{Capabilities, Limits, Result, SharedClock, Timestamp, WakeSignal};

// The docs name them.
#[cfg(doc)]
use tenure_core::Store;

// The docs name it.
#[cfg(doc)]
use tenure_core::Error;

use crate::error::{poisoned, switched_off, NAME};
use crate::state::State;

/// An in-memory [`Store`]: every guarantee of G1..G13 and G15, no
/// server.
///
/// Cloning gives a second handle onto the same data (the conformance suite's peer
/// handle). Every comparison reads the one [`Clock`](tenure_core::Clock) given at
/// construction.
#[derive(Clone)]
pub struct MemoryStore {
    pub(crate) inner: Arc<Inner>,
}

/// Everything a [`MemoryStore`] held at one instant: see [`MemoryStore::snapshot`].
pub struct MemorySnapshot(Box<State>);

impl std::fmt::Debug for MemorySnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySnapshot").finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) clock: SharedClock,
    pub(crate) limits: Limits,
    pub(crate) available: AtomicBool,
    pub(crate) wake: WakeSignal,
    pub(crate) state: Mutex<State>,
    /// The work history by queue and minute ([`History`](tenure_core::contract::History)).
    pub(crate) history: Mutex<history::HistoryMap>,
}

impl MemoryStore {
    /// **Test aid: fault injection.** While `false`, every [`Store`] call with valid
    /// input answers [`Error::Unavailable`] (store `"memory"`) and changes nothing, as a
    /// store whose database went away does; `true` again restores service with all data
    /// intact, without rebuilding the store. Input is validated first, as every store
    /// does before it reaches its backend. Applies to every handle of this store.
    pub fn set_available(&self, available: bool) {
        self.inner.available.store(available, Ordering::SeqCst);
    }

    /// **Test aid: failover.** A copy of everything the store holds, for
    /// [`MemoryStore::restore`].
    pub fn snapshot(&self) -> Result<MemorySnapshot> {
        let state = self.inner.state.lock().map_err(|_| poisoned())?;
        Ok(MemorySnapshot(Box::new(state.clone())))
    }

    /// **Test aid: failover.** Puts the store's data back as it was when `snapshot`
    /// was taken, on every handle: what a replica promoted after its primary died
    /// holds when it had not yet received the writes since, acknowledged or not. The
    /// conformance suite's forgetful-failover case (G3) restores one to check that a
    /// claim lost this way leaves its token refused.
    pub fn restore(&self, snapshot: &MemorySnapshot) -> Result<()> {
        let mut state = self.inner.state.lock().map_err(|_| poisoned())?;
        *state = (*snapshot.0).clone();
        Ok(())
    }

    /// Runs `f` on the state at the clock's `now`, under the lock, after the
    /// availability check.
    ///
    /// The clock is read under the lock: a `now` read before it could be older than an
    /// enqueue that went ahead of this call, whose item the ready index already holds
    /// but which would not yet be due at that `now`.
    fn with_state<T>(&self, f: impl FnOnce(&mut State, Timestamp) -> T) -> Result<T> {
        if !self.inner.available.load(Ordering::SeqCst) {
            return Err(switched_off());
        }
        let mut state = self.inner.state.lock().map_err(|_| poisoned())?;
        let now = self.inner.clock.now();
        let out = f(&mut state, now);
        // A slot freed under a limit that holds items back (G16): waiting workers
        // claim again at once rather than at their next poll.
        let wake = state.take_slot_wake();
        drop(state);
        if wake {
            self.inner.wake.notify();
        }
        Ok(out)
    }

    #[cfg(test)]
    pub(crate) fn visits(&self) -> u64 {
        self.inner.state.lock().map(|s| s.visits()).unwrap_or(0)
    }

    /// Records in the expiry and owner indexes, and the running items.
    #[cfg(test)]
    pub(crate) fn running_records(&self) -> (usize, usize, usize) {
        self.inner
            .state
            .lock()
            .map(|s| s.running_records())
            .unwrap_or_default()
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("clock", &self.inner.clock)
            .field("limits", &self.inner.limits)
            .field("available", &self.inner.available.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

impl Base for MemoryStore {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
            .with_partitioned_claiming()
            .with_stream_runs()
            .with_limits()
            .with_fair_shares()
    }

    fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Every enqueue through any handle of this store fires it. Its health is always
    /// [`WakeHealth::Local`](tenure_core::WakeHealth::Local): a memory store lives in
    /// one process and nothing can go down, so workers keep their tight poll (which
    /// also finds scheduled items and retries coming due).
    fn wake_signal(&self) -> Option<WakeSignal> {
        Some(self.inner.wake.clone())
    }
}
