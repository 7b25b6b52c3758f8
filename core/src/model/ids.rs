//! Identifiers: an item's id, the lease id a claim mints, and the fencing token that
//! names one lease of one item (G3).

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

use crate::error::{Error, Result};

/// An item's identifier: a UUID v7, so ids sort roughly by creation time.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemId(Uuid);

impl ItemId {
    /// A fresh UUID v7 id.
    pub fn new() -> Self {
        ItemId(Uuid::now_v7())
    }

    /// Wraps an existing UUID (as read back from a store).
    pub const fn from_uuid(uuid: Uuid) -> Self {
        ItemId(uuid)
    }

    /// The UUID.
    pub const fn as_uuid(&self) -> &Uuid {
        &self.0
    }

    /// The 16 bytes of the UUID, for stores that keep it as a blob.
    pub fn as_bytes(&self) -> &[u8; 16] {
        self.0.as_bytes()
    }
}

impl Default for ItemId {
    fn default() -> Self {
        ItemId::new()
    }
}

impl fmt::Debug for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Display for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for ItemId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Uuid::parse_str(s)
            .map(ItemId)
            .map_err(|e| Error::invalid("id", e.to_string()))
    }
}

/// The id a claim mints for the leases it grants: a random 64-bit value, so that a
/// token names one lease and not only an attempt number (G3).
///
/// The attempt number alone fences only while the store remembers every claim. A
/// replicated database that fails over can lose a claim it acknowledged (asynchronous
/// replication ships it after the answer); the new primary then hands the same attempt
/// number out again, and a token of `(id, attempt)` alone would validate both owners.
/// The lease id is not derived from anything the store keeps, so the second claim's id
/// differs from the lost one's (the chance of two claims of one item drawing the same
/// id is 2⁻⁶⁴), and the superseded owner's writes are refused.
///
/// One claim call may give all the leases it grants the same id: the id only has to
/// differ between the leases of one item. [`LeaseId::NONE`] (zero) is never minted; it
/// marks an item that has not been claimed, and the running items a store upgraded from
/// a layout without lease ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LeaseId(u64);

impl LeaseId {
    /// No lease: an item never claimed, or one claimed before its store kept lease ids.
    pub const NONE: LeaseId = LeaseId(0);

    /// A new random lease id, never [`LeaseId::NONE`].
    ///
    /// Draws from a per-thread generator seeded once from the operating system's random
    /// source (through `uuid`'s v4), then stepped with SplitMix64: one call costs a few
    /// nanoseconds, cheap enough for every claim, and two threads or processes never
    /// share a sequence.
    pub fn mint() -> LeaseId {
        use std::cell::Cell;
        thread_local! {
            static STATE: Cell<u64> = Cell::new(uuid::Uuid::new_v4().as_u64_pair().0);
        }
        STATE.with(|state| loop {
            // SplitMix64 (Steele, Lea and Flood): a bijective mix of a Weyl sequence.
            let s = state.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
            state.set(s);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            if z != 0 {
                return LeaseId(z);
            }
        })
    }

    /// The id from its stored form (a store's column or field).
    pub const fn from_u64(v: u64) -> LeaseId {
        LeaseId(v)
    }

    /// The id from a signed 64-bit column (PostgreSQL's `bigint`, SQLite's `INTEGER`),
    /// the bit pattern of [`LeaseId::to_i64`].
    pub const fn from_i64(v: i64) -> LeaseId {
        LeaseId(v as u64)
    }

    /// The id as stored in a store's field.
    pub const fn to_u64(self) -> u64 {
        self.0
    }

    /// The id as a signed 64-bit value with the same bits, for `bigint` columns.
    pub const fn to_i64(self) -> i64 {
        self.0 as i64
    }
}

impl fmt::Display for LeaseId {
    /// Sixteen lowercase hex digits, the form [`LeaseId::from_str`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl std::str::FromStr for LeaseId {
    type Err = Error;

    /// Reads the hex form [`LeaseId`]'s `Display` writes (1 to 16 hex digits).
    fn from_str(s: &str) -> Result<Self> {
        if s.is_empty() || s.len() > 16 {
            return Err(Error::invalid(
                "lease",
                format!("{s:?} is not 1 to 16 hex digits"),
            ));
        }
        u64::from_str_radix(s, 16)
            .map(LeaseId)
            .map_err(|_| Error::invalid("lease", format!("{s:?} is not 1 to 16 hex digits")))
    }
}

/// The fencing token of one lease: every write on a running item names it (G3).
///
/// A token is current while the item is running on the attempt **and** the lease it
/// names: `attempt` orders the attempts (it never goes down, so an older attempt is
/// always refused), and `lease` tells two leases of one attempt number apart when a
/// failover lost the first claim and the number was handed out again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseToken {
    /// The item.
    pub id: ItemId,
    /// The attempt the lease was granted for.
    pub attempt: u32,
    /// The lease's id, minted by the claim that granted it.
    pub lease: LeaseId,
}

impl LeaseToken {
    /// A token for `id` at `attempt`, on the lease `lease`.
    pub const fn new(id: ItemId, attempt: u32, lease: LeaseId) -> Self {
        LeaseToken { id, attempt, lease }
    }

    /// The same lease at another attempt number: a token no store granted, for tests
    /// of the fence.
    pub const fn with_attempt(self, attempt: u32) -> Self {
        LeaseToken { attempt, ..self }
    }

    /// The item and attempt this token names, whatever its lease: what a caller
    /// can predict of a claim's token (the lease id is random).
    pub const fn item_attempt(&self) -> (ItemId, u32) {
        (self.id, self.attempt)
    }
}

impl fmt::Display for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}/{}", self.id, self.attempt, self.lease)
    }
}
