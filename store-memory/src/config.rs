//! [`MemoryStore`]'s configuration: its constructors. A memory store has no options
//! type; what configures it is the [`Clock`] it reads, the [`Limits`] it enforces and
//! whether it keeps finished items ([`MemoryStore::keep_done`]).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tenure_core::{Clock, Error, Limits, Result, SystemClock, WakeSignal};
// The docs name it.
#[cfg(doc)]
use tenure_core::Store;

use crate::state::State;
use crate::store::Inner;
use crate::MemoryStore;

/// The URL scheme of a memory store: [`MemoryStore::from_url`] reads it, and
/// `tenure::open` routes it here.
pub const URL_SCHEMES: &[&str] = &["memory"];

impl MemoryStore {
    /// Reads a store URL: `memory://` (or `memory:`, the scheme in any case), which
    /// takes no path and no options, gives an empty store on the system clock.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `url` for another scheme, or a path or options.
    pub fn from_url(url: &str) -> Result<Self> {
        let url = tenure_core::url_in_schemes(url, URL_SCHEMES)?;
        if url != "memory://" && url != "memory:" {
            return Err(Error::invalid(
                "url",
                format!("{url:?}: memory:// takes no path or options"),
            ));
        }
        Ok(MemoryStore::default())
    }

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
                history: Mutex::new(BTreeMap::new()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_urls_take_no_path_or_options() {
        for ok in ["memory://", "memory:", "MEMORY://", "Memory:"] {
            assert!(MemoryStore::from_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "memory://x",
            "memory://?keep_done=true",
            "memory",
            "sqlite://m.db",
        ] {
            let e = MemoryStore::from_url(bad).unwrap_err();
            assert_eq!(e.invalid_field(), Some("url"), "{bad}");
        }
    }
}
