//! Memory store fixtures: a fresh store on a manual clock, a runner for its calls, and
//! short constructors of the names tests use.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tenure_core::{ManualClock, NewItem, OwnerId, QueueName, ScopeKey, StreamKey, Timestamp};
use tenure_memory::MemoryStore;

/// The lease every test uses unless it says otherwise.
pub const LEASE: Duration = Duration::from_secs(30);

/// Runs a memory store future to completion. The store never waits inside a call, so
/// the future is ready at its first poll; anything else is a bug.
pub fn run<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a memory store call waited"),
    }
}

/// The instant every store of [`store`] starts at.
pub fn start() -> Timestamp {
    Timestamp::from_micros(1_700_000_000_000_000)
}

/// A fresh store on a manual clock standing at [`start`].
pub fn store() -> (MemoryStore, ManualClock) {
    let clock = ManualClock::new(start());
    (MemoryStore::new(clock.clone()), clock)
}

/// A queue name; panics when `name` is not a valid one.
pub fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("a valid name")
}

/// An owner id; panics when `name` is not a valid one.
pub fn owner(name: &str) -> OwnerId {
    OwnerId::new(name).expect("a valid name")
}

/// A stream key; panics when `name` is not a valid one.
pub fn stream(name: &str) -> StreamKey {
    StreamKey::new(name).expect("a valid name")
}

/// A scope key; panics when `name` is not a valid one.
pub fn scope(name: &str) -> ScopeKey {
    ScopeKey::new(name).expect("a valid name")
}

/// A new item of `queue` with the payload `x`.
pub fn item(queue: &str) -> NewItem {
    NewItem::new(q(queue), b"x".to_vec())
}
