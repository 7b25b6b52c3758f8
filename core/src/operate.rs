//! What operators see and steer: listings of items and leases, cancel and pause answers.
//!
//! These are the answers of the inspection and control operations of
//! [`Store`](crate::Store) ([`item_list`](crate::Store::item_list),
//! [`lease_list`](crate::Store::lease_list), [`queue_list`](crate::Store::queue_list),
//! [`item_cancel`](crate::Store::item_cancel), [`queue_pause`](crate::Store::queue_pause),
//! [`queue_resume`](crate::Store::queue_resume)). Conformance group `operate`.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::keys::{LimitKey, OwnerId, QueueName};
use crate::model::{Item, ItemState, LeaseToken};
use crate::time::Timestamp;

/// Which of a queue's items a listing shows: the four unfinished states that
/// [`QueueCounts`](crate::QueueCounts) counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ListState {
    /// `ready` and due (`run_at <= now`): the items a claim may take.
    Ready,
    /// `ready` but not due yet (`run_at > now`), including retries waiting out their
    /// backoff.
    Scheduled,
    /// `running`, leased to an owner (including expired leases nobody recovered yet).
    Running,
    /// `dead`, kept with their last error until requeued or discarded.
    Dead,
}

impl ListState {
    /// Every listable state, in the order the CLI shows them.
    pub const ALL: [ListState; 4] = [
        ListState::Ready,
        ListState::Scheduled,
        ListState::Running,
        ListState::Dead,
    ];

    /// The lowercase name (`"ready"`, `"scheduled"`, `"running"`, `"dead"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ListState::Ready => "ready",
            ListState::Scheduled => "scheduled",
            ListState::Running => "running",
            ListState::Dead => "dead",
        }
    }

    /// The stored [`ItemState`] this listing reads (`Scheduled` is `Ready` not yet due).
    pub const fn item_state(self) -> ItemState {
        match self {
            ListState::Ready | ListState::Scheduled => ItemState::Ready,
            ListState::Running => ItemState::Running,
            ListState::Dead => ItemState::Dead,
        }
    }

    /// True when `item`, read at `now`, belongs to this listing.
    pub fn matches(self, item: &Item, now: Timestamp) -> bool {
        match self {
            ListState::Ready => item.state == ItemState::Ready && item.run_at <= now,
            ListState::Scheduled => item.state == ItemState::Ready && item.run_at > now,
            ListState::Running => item.state == ItemState::Running,
            ListState::Dead => item.state == ItemState::Dead,
        }
    }
}

impl fmt::Display for ListState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ListState {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ready" => Ok(ListState::Ready),
            "scheduled" => Ok(ListState::Scheduled),
            "running" => Ok(ListState::Running),
            "dead" => Ok(ListState::Dead),
            other => Err(Error::invalid(
                "state",
                format!("unknown state {other:?}; expected ready, scheduled, running or dead"),
            )),
        }
    }
}

/// The order of a listing, by enqueue order (the order G8 and G9 use as their last key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ListOrder {
    /// Earliest enqueued first (the default).
    #[default]
    OldestFirst,
    /// Latest enqueued first.
    NewestFirst,
}

/// Longest cursor a store may hand out, in bytes.
pub const MAX_CURSOR_BYTES: usize = 256;

/// Where the next page of a listing starts. Opaque: a store encodes its own position in
/// it, hands it out in [`ItemPage::next`] or [`LeasePage::next`], and reads it back from
/// the next call's params; callers only print it and pass it back.
///
/// A cursor stays valid while items change: the next page starts after the position it
/// names, whether or not the item there still exists.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Cursor(String);

impl Cursor {
    /// A cursor from its text, as printed by [`Cursor::as_str`]: 1 to
    /// [`MAX_CURSOR_BYTES`] visible ASCII characters. Whether it names a position is the
    /// store's to decide (a foreign cursor is [`Error::InvalidInput`] naming `cursor`).
    pub fn new(text: impl Into<String>) -> Result<Self> {
        let text = text.into();
        if text.is_empty() || text.len() > MAX_CURSOR_BYTES {
            return Err(Error::invalid(
                "cursor",
                format!("must be 1..={MAX_CURSOR_BYTES} bytes"),
            ));
        }
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::invalid(
                "cursor",
                "must be visible ASCII, as a listing handed it out",
            ));
        }
        Ok(Cursor(text))
    }

    /// The cursor's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Cursor {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Cursor::new(s)
    }
}

/// One page of [`Store::item_list`](crate::Store::item_list).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ItemPage {
    /// The items, in the order asked for; each carries its `attempt`, `owner`,
    /// `lease_expires_at` and `last_error`.
    pub items: Vec<Item>,
    /// Where the next page starts, or `None` when this page reached the end.
    pub next: Option<Cursor>,
    /// The store's `now` when the page was read (what `Ready` and `Scheduled` were
    /// decided against), so ages and expiries can be shown relative to it.
    pub as_of: Timestamp,
}

impl ItemPage {
    /// A page of `items` read at `as_of`, followed by `next`.
    pub fn new(items: Vec<Item>, next: Option<Cursor>, as_of: Timestamp) -> Self {
        ItemPage { items, next, as_of }
    }
}

/// A live lease, as [`Store::lease_list`](crate::Store::lease_list) shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseInfo {
    /// The fencing token of the attempt that holds it.
    pub token: LeaseToken,
    /// The item's queue.
    pub queue: QueueName,
    /// Who holds it.
    pub owner: OwnerId,
    /// When it ends unless renewed. At or before the page's `as_of` it has expired and
    /// waits for recovery (G2).
    pub expires_at: Timestamp,
    /// Renewals used in this attempt (G4).
    pub renewals: u32,
    /// Renewals allowed in one attempt (G4).
    pub max_renewals: u32,
    /// The limit key the item counts under (G16, G17), `None` when it names none: the
    /// key whose slot this lease holds.
    pub limit_key: Option<LimitKey>,
}

impl LeaseInfo {
    /// A lease as a store read it.
    pub fn new(
        token: LeaseToken,
        queue: QueueName,
        owner: OwnerId,
        expires_at: Timestamp,
        renewals: u32,
        max_renewals: u32,
    ) -> Self {
        LeaseInfo {
            token,
            queue,
            owner,
            expires_at,
            renewals,
            max_renewals,
            limit_key: None,
        }
    }

    /// The same lease, naming the limit key its item counts under (G16).
    pub fn with_limit_key(mut self, key: Option<LimitKey>) -> Self {
        self.limit_key = key;
        self
    }

    /// The lease of a running item, or `None` when the item is not running with an
    /// owner and an expiry.
    pub fn from_item(item: &Item) -> Option<Self> {
        match (&item.owner, item.lease_expires_at, item.state) {
            (Some(owner), Some(expires_at), ItemState::Running) => Some(LeaseInfo {
                token: item.token(),
                queue: item.queue.clone(),
                owner: owner.clone(),
                expires_at,
                renewals: item.renewals,
                max_renewals: item.max_renewals,
                limit_key: None,
            }),
            _ => None,
        }
    }
}

/// One page of [`Store::lease_list`](crate::Store::lease_list).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeasePage {
    /// The leases, soonest expiry first.
    pub leases: Vec<LeaseInfo>,
    /// Where the next page starts, or `None` when this page reached the end.
    pub next: Option<Cursor>,
    /// The store's `now` when the page was read.
    pub as_of: Timestamp,
}

impl LeasePage {
    /// A page of `leases` read at `as_of`, followed by `next`.
    pub fn new(leases: Vec<LeaseInfo>, next: Option<Cursor>, as_of: Timestamp) -> Self {
        LeasePage {
            leases,
            next,
            as_of,
        }
    }
}

/// The per-id answer of [`Store::item_cancel`](crate::Store::item_cancel).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CancelOutcome {
    /// The item was ready or scheduled and is gone; its dedup key is kept.
    Cancelled,
    /// The item is running and was left alone: cancel does not stop a running attempt.
    /// Its holder finishes it, or it fails or expires as usual.
    Running {
        /// The attempt that holds it.
        attempt: u32,
        /// Who holds it.
        owner: OwnerId,
    },
    /// The item was running and is stopped (only with
    /// [`CancelParams::stop_running`](crate::CancelParams::stop_running)): the lease of
    /// this attempt is revoked, so its holder's next renew and every finish with its
    /// token answer lease lost, and the item is `dead`, its `last_error` naming who
    /// cancelled it ([`machine::cancelled_error`](crate::machine::cancelled_error)) and
    /// its `updated_at` when.
    Stopped {
        /// The attempt whose lease was revoked.
        attempt: u32,
        /// Who held it.
        owner: OwnerId,
    },
    /// The item is dead and was left alone; discard it with
    /// [`Store::dead_discard`](crate::Store::dead_discard).
    Dead,
    /// The item finished and is kept as `done`; nothing to cancel.
    Done,
    /// No such item (never enqueued, or finished and deleted, or already cancelled).
    NotFound,
}

impl CancelOutcome {
    /// True for [`CancelOutcome::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, CancelOutcome::Cancelled)
    }

    /// True for [`CancelOutcome::Stopped`].
    pub fn is_stopped(&self) -> bool {
        matches!(self, CancelOutcome::Stopped { .. })
    }
}
