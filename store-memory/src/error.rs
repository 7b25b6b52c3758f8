//! The memory store's errors. It has no backend, so there is nothing to map: every
//! error it answers is one of [`tenure_core::Error`]'s own, made where it arises (bad
//! input in the params' `validate`, a bad cursor in `state/inspect.rs`). This file
//! holds the store's name in errors and the two errors of the store's own conditions.

use tenure_core::Error;

/// The backend name in errors and reports.
pub(crate) const NAME: &str = "memory";

/// The error of a call that found the state poisoned by a panic under its lock.
pub(crate) fn poisoned() -> Error {
    Error::internal(NAME, "the store's state was poisoned by a panic")
}

/// The error of every call while the store is switched off
/// ([`MemoryStore::set_available`](crate::MemoryStore::set_available)).
pub(crate) fn switched_off() -> Error {
    Error::unavailable(NAME, "the store is switched off (set_available(false))")
}
