//! Params of the operator's operations: inspection (listings) and control (cancel,
//! pause, resume, dead items by filter). Built by core constructors, only read by
//! stores, `#[non_exhaustive]`, each with a `validate` every store MUST call first (G15).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::QueueName;
use crate::model::ItemId;
use crate::operate::{Cursor, ListOrder, ListState};

use super::Limits;

/// Most entries in one page of a listing.
pub const MAX_PAGE: u32 = 1_000;
/// Entries in a page when the caller does not say.
pub const DEFAULT_PAGE: u32 = 100;
/// Most dead items one filtered requeue or discard call handles; callers loop until a
/// call handles fewer than its limit.
pub const MAX_DEAD_BATCH: u32 = 10_000;
/// Dead items one filtered requeue or discard call handles when the caller does not say.
pub const DEFAULT_DEAD_BATCH: u32 = 1_000;

const MAX_AGE: Duration = Duration::from_secs(10 * 366 * 24 * 60 * 60);

fn check_page(field: &'static str, n: u32, max: u32) -> Result<()> {
    if n == 0 || n > max {
        return Err(Error::invalid(field, format!("{n} is outside 1..={max}")));
    }
    Ok(())
}

/// Parameters of [`Store::item_list`](super::Store::item_list).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ItemListParams {
    /// The queue to list.
    pub queue: QueueName,
    /// Which of its items.
    pub state: ListState,
    /// Oldest or newest enqueued first.
    pub order: ListOrder,
    /// Most items in the page (1..=[`MAX_PAGE`], default [`DEFAULT_PAGE`]).
    pub limit: u32,
    /// Continue after this position (the previous page's `next`), or from the start.
    pub cursor: Option<Cursor>,
}

impl ItemListParams {
    /// The first page of `queue`'s items in `state`, oldest first, [`DEFAULT_PAGE`] long.
    pub fn new(queue: QueueName, state: ListState) -> Self {
        ItemListParams {
            queue,
            state,
            order: ListOrder::OldestFirst,
            limit: DEFAULT_PAGE,
            cursor: None,
        }
    }

    /// Lists in this order.
    pub fn order(mut self, order: ListOrder) -> Self {
        self.order = order;
        self
    }

    /// Lists newest enqueued first.
    pub fn newest_first(self) -> Self {
        self.order(ListOrder::NewestFirst)
    }

    /// At most `limit` items in the page.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// Continues after `cursor` (a previous page's `next`, with the same queue, state
    /// and order).
    pub fn after(mut self, cursor: Cursor) -> Self {
        self.cursor = Some(cursor);
        self
    }

    /// Checks the page size (G15). The cursor's content is the store's to check.
    pub fn validate(&self, _limits: &Limits) -> Result<()> {
        check_page("limit", self.limit, MAX_PAGE)
    }
}

/// Parameters of [`Store::lease_list`](super::Store::lease_list).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LeaseListParams {
    /// The queue whose leases to list.
    pub queue: QueueName,
    /// Most leases in the page (1..=[`MAX_PAGE`], default [`DEFAULT_PAGE`]).
    pub limit: u32,
    /// Continue after this position (the previous page's `next`), or from the start.
    pub cursor: Option<Cursor>,
}

impl LeaseListParams {
    /// The first page of `queue`'s leases, soonest expiry first.
    pub fn new(queue: QueueName) -> Self {
        LeaseListParams {
            queue,
            limit: DEFAULT_PAGE,
            cursor: None,
        }
    }

    /// At most `limit` leases in the page.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// Continues after `cursor` (a previous page's `next`, with the same queue).
    pub fn after(mut self, cursor: Cursor) -> Self {
        self.cursor = Some(cursor);
        self
    }

    /// Checks the page size (G15).
    pub fn validate(&self, _limits: &Limits) -> Result<()> {
        check_page("limit", self.limit, MAX_PAGE)
    }
}

/// Parameters of [`Store::item_cancel`](super::Store::item_cancel).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CancelParams {
    /// The items to cancel, answered in this order.
    pub ids: Vec<ItemId>,
    /// Also stop running items, on behalf of this operator (1..=[`MAX_CANCEL_BY_BYTES`]
    /// bytes, no control characters): their lease is revoked and they go `dead` with
    /// `last_error` [`machine::cancelled_error`](crate::machine::cancelled_error)
    /// (see [`Store::item_cancel`](super::Store::item_cancel)). `None` (the default)
    /// leaves running items alone.
    pub stop_running: Option<String>,
}

/// Longest operator name a cancel of running items may carry, in bytes.
pub const MAX_CANCEL_BY_BYTES: usize = 128;

impl CancelParams {
    /// Cancel these items (only those ready or scheduled are cancelled).
    pub fn new(ids: Vec<ItemId>) -> Self {
        CancelParams {
            ids,
            stop_running: None,
        }
    }

    /// Stops running items too, on behalf of `by` (who the item's `last_error` names).
    pub fn stop_running(mut self, by: impl Into<String>) -> Self {
        self.stop_running = Some(by.into());
        self
    }

    /// Checks the batch bounds: 1..=`max_batch` ids, none twice, and the operator's
    /// name when running items are stopped (G15).
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        if let Some(by) = &self.stop_running {
            if by.is_empty() || by.len() > MAX_CANCEL_BY_BYTES {
                return Err(Error::invalid(
                    "by",
                    format!("must be 1..={MAX_CANCEL_BY_BYTES} bytes"),
                ));
            }
            if by.chars().any(char::is_control) {
                return Err(Error::invalid("by", "must not hold control characters"));
            }
        }
        let max = u32::try_from(limits.max_batch).unwrap_or(u32::MAX);
        let n = u32::try_from(self.ids.len()).unwrap_or(u32::MAX);
        check_page("ids", n, max)?;
        let mut ids = self.ids.clone();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::invalid(
                "ids",
                format!("item {} appears more than once", w[0]),
            ));
        }
        Ok(())
    }
}

/// Parameters of [`Store::queue_pause`](super::Store::queue_pause) and
/// [`Store::queue_resume`](super::Store::queue_resume).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PauseParams {
    /// The queue to pause or resume.
    pub queue: QueueName,
}

impl PauseParams {
    /// Pause or resume `queue`.
    pub fn new(queue: QueueName) -> Self {
        PauseParams { queue }
    }

    /// Nothing to check beyond the validated queue name; here for uniformity.
    pub fn validate(&self, _limits: &Limits) -> Result<()> {
        Ok(())
    }
}

/// Which dead items a filtered [`Store::dead_requeue`](super::Store::dead_requeue) or
/// [`Store::dead_discard`](super::Store::dead_discard) handles: those of `queue` (dead
/// for at least `older_than`, when set), at most `limit` per call, the earliest dead
/// first (by when each last died; ties in enqueue order).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadFilter {
    /// The queue.
    pub queue: QueueName,
    /// Only items that went dead at least this long before the store's `now` (by their
    /// `updated_at`); `None` for all.
    pub older_than: Option<Duration>,
    /// Most items handled in one call (1..=[`MAX_DEAD_BATCH`], default
    /// [`DEFAULT_DEAD_BATCH`]). A call that handles fewer has handled every match.
    pub limit: u32,
}

impl DeadFilter {
    /// Every dead item of `queue`, [`DEFAULT_DEAD_BATCH`] per call.
    pub fn new(queue: QueueName) -> Self {
        DeadFilter {
            queue,
            older_than: None,
            limit: DEFAULT_DEAD_BATCH,
        }
    }

    /// Only items dead for at least `age`.
    pub fn older_than(mut self, age: Duration) -> Self {
        self.older_than = Some(age);
        self
    }

    /// At most `limit` items per call.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// The newest `updated_at` a matching item may have, at the store's `now`.
    pub fn dead_before(&self, now: crate::Timestamp) -> crate::Timestamp {
        match self.older_than {
            Some(age) => now.saturating_sub(age),
            None => crate::Timestamp::from_micros(i64::MAX),
        }
    }

    /// Checks the batch limit and the age (G15).
    pub fn validate(&self, _limits: &Limits) -> Result<()> {
        check_page("limit", self.limit, MAX_DEAD_BATCH)?;
        if let Some(age) = self.older_than {
            if age > MAX_AGE {
                return Err(Error::invalid(
                    "older_than",
                    format!("{age:?} is over ten years"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operate::MAX_CURSOR_BYTES;

    fn q() -> QueueName {
        QueueName::new("q").unwrap()
    }

    #[test]
    fn page_sizes_of_zero_and_over_the_maximum_name_limit() {
        let l = Limits::default();
        for bad in [0, MAX_PAGE + 1] {
            let e = ItemListParams::new(q(), ListState::Ready)
                .limit(bad)
                .validate(&l)
                .unwrap_err();
            assert_eq!(e.invalid_field(), Some("limit"));
            let e = LeaseListParams::new(q())
                .limit(bad)
                .validate(&l)
                .unwrap_err();
            assert_eq!(e.invalid_field(), Some("limit"));
        }
        assert!(ItemListParams::new(q(), ListState::Dead)
            .limit(MAX_PAGE)
            .validate(&l)
            .is_ok());
    }

    #[test]
    fn cancel_refuses_no_ids_and_an_id_twice() {
        let l = Limits::default();
        let e = CancelParams::new(vec![]).validate(&l).unwrap_err();
        assert_eq!(e.invalid_field(), Some("ids"));
        let id = ItemId::new();
        let e = CancelParams::new(vec![id, ItemId::new(), id])
            .validate(&l)
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("ids"));
    }

    #[test]
    fn dead_filters_bound_their_limit_and_age() {
        let l = Limits::default();
        for bad in [0, MAX_DEAD_BATCH + 1] {
            let e = DeadFilter::new(q()).limit(bad).validate(&l).unwrap_err();
            assert_eq!(e.invalid_field(), Some("limit"));
        }
        let e = DeadFilter::new(q())
            .older_than(MAX_AGE + Duration::from_secs(1))
            .validate(&l)
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("older_than"));
    }

    #[test]
    fn cursors_are_visible_ascii_of_bounded_length() {
        assert!(Cursor::new("v1.42").is_ok());
        for bad in [
            String::new(),
            "a b".into(),
            "x".repeat(MAX_CURSOR_BYTES + 1),
        ] {
            assert_eq!(
                Cursor::new(bad).unwrap_err().invalid_field(),
                Some("cursor")
            );
        }
    }
}
