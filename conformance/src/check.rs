//! Assertion helpers. Each returns `Result<_, Failure>` instead of panicking, so a case
//! stops at its first broken expectation and the run goes on to the next case.

use std::fmt::Debug;

use tenure_core::{Error, ErrorKind, Item, ItemId, ItemState, QueueCounts, QueueName, Store};

use crate::case::{CaseResult, Failure, Verdict};

/// The end of every passing case.
pub(crate) fn pass() -> CaseResult {
    Ok(Verdict::Passed)
}

/// Turns a store error into a failure of the case: the call was expected to succeed.
pub(crate) trait OrFail<T> {
    /// `Ok` through; `Err` becomes "expected `call` to succeed".
    fn or_fail(self, call: &str) -> Result<T, Failure>;
}

impl<T> OrFail<T> for Result<T, Error> {
    fn or_fail(self, call: &str) -> Result<T, Failure> {
        self.map_err(|e| Failure::new(format!("`{call}` to succeed"), format!("Err({e})")))
    }
}

/// `cond` must hold; `observed` says what was seen instead.
pub(crate) fn ensure(
    cond: bool,
    expectation: impl Into<String>,
    observed: impl Debug,
) -> Result<(), Failure> {
    if cond {
        Ok(())
    } else {
        Err(Failure::new(expectation, format!("{observed:?}")))
    }
}

/// `observed` must equal `expected`; `what` names the value. Takes both by value so
/// call sites read as plain expressions.
#[allow(clippy::needless_pass_by_value)]
pub(crate) fn ensure_eq<T: PartialEq + Debug>(
    observed: T,
    expected: T,
    what: &str,
) -> Result<(), Failure> {
    if observed == expected {
        Ok(())
    } else {
        Err(Failure::new(
            format!("{what} to be {expected:?}"),
            format!("{observed:?}"),
        ))
    }
}

/// The call must have been refused as invalid input naming `field` (G15).
pub(crate) fn expect_invalid<T: Debug>(
    result: Result<T, Error>,
    field: &str,
    call: &str,
) -> Result<(), Failure> {
    match result {
        Err(Error::InvalidInput { field: f, .. }) if f == field => Ok(()),
        Err(e) => Err(Failure::new(
            format!("`{call}` to be refused as invalid input naming `{field}`"),
            format!(
                "Err({e}) (kind {:?}, field {:?})",
                e.kind(),
                e.invalid_field()
            ),
        )),
        Ok(v) => Err(Failure::new(
            format!("`{call}` to be refused as invalid input naming `{field}`"),
            format!("Ok({v:?})"),
        )),
    }
}

/// The call must have failed as [`Error::Unavailable`], the one retryable kind.
pub(crate) fn expect_unavailable<T: Debug>(
    result: Result<T, Error>,
    call: &str,
) -> Result<(), Failure> {
    match result {
        Err(e) if e.kind() == ErrorKind::Unavailable && e.is_retryable() => Ok(()),
        other => Err(Failure::new(
            format!("`{call}` on an unreachable store to answer Err(Unavailable)"),
            format!("{other:?}"),
        )),
    }
}

/// Reads an item that must exist.
pub(crate) async fn get<S: Store + ?Sized>(store: &S, id: ItemId) -> Result<Item, Failure> {
    match store.item_get(id).await.or_fail("item_get")? {
        Some(item) => Ok(item),
        None => Err(Failure::new(format!("item {id} to exist"), "None")),
    }
}

/// The item must be in `state`; returns it.
pub(crate) async fn expect_state<S: Store + ?Sized>(
    store: &S,
    id: ItemId,
    state: ItemState,
    when: &str,
) -> Result<Item, Failure> {
    let item = get(store, id).await?;
    if item.state != state {
        return Err(Failure::new(
            format!("item {id} to be {state} {when}"),
            format!("{} (attempt {})", item.state, item.attempt),
        ));
    }
    Ok(item)
}

/// The item must be finished: kept as `done`, or deleted (both are allowed by the
/// contract of `complete`).
pub(crate) async fn expect_finished<S: Store + ?Sized>(
    store: &S,
    id: ItemId,
    when: &str,
) -> Result<(), Failure> {
    match store.item_get(id).await.or_fail("item_get")? {
        None => Ok(()),
        Some(item) if item.state == ItemState::Done => Ok(()),
        Some(item) => Err(Failure::new(
            format!("item {id} to be done or deleted {when}"),
            format!("{} (attempt {})", item.state, item.attempt),
        )),
    }
}

/// The item must read exactly as `before` did: nothing changed.
pub(crate) async fn expect_unchanged<S: Store + ?Sized>(
    store: &S,
    before: &Item,
    after: &str,
) -> Result<(), Failure> {
    let now = store.item_get(before.id).await.or_fail("item_get")?;
    if now.as_ref() != Some(before) {
        return Err(Failure::new(
            format!(
                "item {} to be unchanged after {after}: {before:?}",
                before.id
            ),
            format!("{now:?}"),
        ));
    }
    Ok(())
}

/// The item must not exist: nothing was written for it.
pub(crate) async fn expect_absent<S: Store + ?Sized>(
    store: &S,
    id: ItemId,
    after: &str,
) -> Result<(), Failure> {
    let found = store.item_get(id).await.or_fail("item_get")?;
    ensure(
        found.is_none(),
        format!("item {id} not to exist after {after}"),
        found,
    )
}

/// The queue's counts must equal `expected`, apart from `done`, which a store that
/// deletes finished items reports as 0.
pub(crate) async fn expect_counts<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
    expected: QueueCounts,
    when: &str,
) -> Result<QueueCounts, Failure> {
    let counts = store.queue_counts(queue).await.or_fail("queue_counts")?;
    let done_ok = counts.done == expected.done || counts.done == 0;
    let rest = (counts.ready, counts.scheduled, counts.running, counts.dead);
    let want = (
        expected.ready,
        expected.scheduled,
        expected.running,
        expected.dead,
    );
    if rest != want || !done_ok {
        return Err(Failure::new(
            format!("queue {queue} counts {when} to be {expected:?} (done may be 0)"),
            format!("{counts:?}"),
        ));
    }
    Ok(counts)
}
