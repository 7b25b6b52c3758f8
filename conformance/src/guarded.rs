//! A store that keeps something alive as long as it lives.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use tenure_core::Store;

/// A store bundled with a guard that must outlive it: the temporary directory its file
/// lives in, a permit that bounds how many cases hold a database connection at once, a
/// schema to drop when the last handle goes.
///
/// Harnesses return it as their `Store` type so they need not write a delegating store
/// of their own. Every call goes straight to the inner store. Clones share the guard;
/// it is dropped with the last clone.
#[derive(Clone)]
pub struct Guarded<S> {
    store: S,
    guard: Arc<dyn Any + Send + Sync>,
}

impl<S: Store> Guarded<S> {
    /// Wraps `store`, keeping `guard` alive as long as any clone of the result.
    pub fn new(store: S, guard: impl Any + Send + Sync) -> Self {
        Guarded {
            store,
            guard: Arc::new(guard),
        }
    }

    /// Wraps `store` sharing the guard of `other`, for peer handles onto the same data.
    pub fn sharing<T>(store: S, other: &Guarded<T>) -> Self {
        Guarded {
            store,
            guard: Arc::clone(&other.guard),
        }
    }

    /// The inner store.
    pub fn inner(&self) -> &S {
        &self.store
    }
}

impl<S: fmt::Debug> fmt::Debug for Guarded<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Guarded").field(&self.store).finish()
    }
}

tenure_core::forward_store! {
    impl<S: Store> Store for Guarded<S> {
        forward self => self.store;
    }
}
