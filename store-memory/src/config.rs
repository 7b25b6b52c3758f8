//! [`MemoryStore`]'s configuration: its constructors. A memory store has no options
//! type; what configures it is the [`Clock`] it reads, the [`Limits`] it enforces and
//! whether it keeps finished items ([`MemoryStore::keep_done`]).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tenure_core::{Clock, Limits, SystemClock, WakeSignal};
// The docs name it.
#[cfg(doc)]
use tenure_core::Store;

use crate::state::State;
use crate::store::Inner;
use crate::MemoryStore;

impl MemoryStore {
    /// An empty store reading `clock`, with the default [`Limits`].
    pub fn new(clock: impl Clock) -> Self {
        MemoryStore::with_limits(clock, Limits::default())
    }

    /// An empty store reading `clock` and enforcing `limits` (G15).
    pub fn with_limits(clock: impl Clock, limits: Limits) -> Self {
        MemoryStore {
            inner: Arc::new(Inner {
                clock: Arc::new(clock),
                limits,
                available: AtomicBool::new(true),
                wake: WakeSignal::new(),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Keeps finished items as `done` until [`Store::purge`] deletes them (`true`), or
    /// deletes them as soon as they complete (`false`, the default). Applies to every
    /// handle of this store.
    pub fn keep_done(self, keep: bool) -> Self {
        if let Ok(mut state) = self.inner.state.lock() {
            state.keep_done = keep;
        }
        self
    }
}

impl Default for MemoryStore {
    /// An empty store on the [`SystemClock`].
    fn default() -> Self {
        MemoryStore::new(SystemClock)
    }
}
