//! G14 partitioned claiming: which registered instance takes which unpinned work.
//!
//! An optional claim mode ([`ClaimParams::partitioned`](crate::ClaimParams::partitioned))
//! for stores that declare
//! [`Capabilities::partitioned_claiming`](crate::Capabilities::partitioned_claiming).
//! It gives each instance its own share of the work, and keeps every stream on one
//! instance, so a stream's items are handled where its earlier items were:
//!
//! - Every item has a **partition**: [`key_hash`] of its stream key, or of its id when
//!   it has no stream, modulo [`Partitioning::partitions`] (default 10 000). The hash
//!   is fixed here (FNV-1a, 64 bits, kept to 63), so every store and every process
//!   agrees on it.
//! - The **registered instances** ([`Store::instance_heartbeat`](crate::Store::instance_heartbeat))
//!   are ranked by id in byte order: rank 0 is the smallest id. With `live` of them,
//!   the instance of rank `r` takes the unpinned work of the partitions `p` with
//!   `p % live == r` ([`takes`]).
//! - A stream is **pinned** to the instance that first claims one of its items in this
//!   mode. Only that instance then claims the stream's items, whatever their
//!   partition, until it leaves the registry (evicted as stale or deregistered); then
//!   the stream is unpinned and goes by partition again. A store may also forget the
//!   pin of a stream that has no unfinished items left.
//!
//! Every other rule of a claim holds unchanged (G1..G10). Claims without
//! [`Partitioning`] ignore partitions and pins, so the two modes should not be mixed on
//! one queue.

use crate::error::{Error, Result};
use crate::keys::StreamKey;
use crate::model::ItemId;

/// The default number of partitions.
pub const DEFAULT_PARTITIONS: u32 = 10_000;

/// The largest number of partitions a claim may ask for.
pub const MAX_PARTITIONS: u32 = 1_000_000;

/// The settings of one partitioned claim (G14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Partitioning {
    /// How many partitions the work is cut into (default [`DEFAULT_PARTITIONS`]).
    /// Every instance serving a queue must use the same number.
    pub partitions: u32,
}

impl Default for Partitioning {
    fn default() -> Self {
        Partitioning {
            partitions: DEFAULT_PARTITIONS,
        }
    }
}

impl Partitioning {
    /// `partitions` partitions; checked by [`Partitioning::validate`].
    pub fn new(partitions: u32) -> Self {
        Partitioning { partitions }
    }

    /// Refuses 0 partitions and more than [`MAX_PARTITIONS`] (G15), naming the field
    /// `partitions`.
    pub fn validate(&self) -> Result<()> {
        if self.partitions == 0 || self.partitions > MAX_PARTITIONS {
            return Err(Error::invalid(
                "partitions",
                format!("is {}; it must be 1..={MAX_PARTITIONS}", self.partitions),
            ));
        }
        Ok(())
    }

    /// The partition of an item whose [`key_hash`] is `hash`.
    pub fn partition_of(&self, hash: i64) -> u32 {
        // A hash is never negative and `partitions` is at least 1 once validated.
        let p = u64::from(self.partitions.max(1));
        (hash.unsigned_abs() % p) as u32
    }
}

/// The hash an item is partitioned by: FNV-1a over the UTF-8 bytes of its stream key,
/// or over the 16 bytes of its id when it has no stream, with the top bit cleared so
/// SQL stores keep it in a signed 64-bit column.
pub fn key_hash(stream: Option<&StreamKey>, id: ItemId) -> i64 {
    let bytes: &[u8] = match stream {
        Some(s) => s.as_str().as_bytes(),
        None => id.as_bytes(),
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h & (u64::MAX >> 1)) as i64
}

/// Whether the instance of rank `rank` among `live` registered instances takes the
/// unpinned work of `partition`: `partition % live == rank`.
pub fn takes(partition: u32, rank: u32, live: u32) -> bool {
    live > 0 && partition % live == rank
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv_1a_with_the_top_bit_cleared() {
        // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c; of "" the offset basis.
        let a = StreamKey::new("a").unwrap();
        assert_eq!(key_hash(Some(&a), ItemId::new()), 0x2f63_dc4c_8601_ec8c);
        let id = ItemId::from_uuid(uuid::Uuid::nil());
        // Sixteen zero bytes.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for _ in 0..16 {
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        assert_eq!(key_hash(None, id), (h & (u64::MAX >> 1)) as i64);
    }

    #[test]
    fn a_stream_key_decides_the_partition_whatever_the_id() {
        let s = StreamKey::new("orders:42").unwrap();
        let p = Partitioning::default();
        let first = p.partition_of(key_hash(Some(&s), ItemId::new()));
        for _ in 0..100 {
            assert_eq!(p.partition_of(key_hash(Some(&s), ItemId::new())), first);
        }
        assert!(first < DEFAULT_PARTITIONS);
    }

    #[test]
    fn every_partition_has_exactly_one_taker() {
        for live in 1..=7 {
            for partition in 0..50 {
                let takers = (0..live).filter(|r| takes(partition, *r, live)).count();
                assert_eq!(takers, 1, "partition {partition} with {live} instances");
            }
        }
        assert!(!takes(0, 0, 0));
    }

    #[test]
    fn zero_or_too_many_partitions_name_the_field() {
        for bad in [0, MAX_PARTITIONS + 1] {
            let e = Partitioning::new(bad).validate().unwrap_err();
            assert_eq!(e.invalid_field(), Some("partitions"), "{e}");
        }
        assert!(Partitioning::new(1).validate().is_ok());
        assert!(Partitioning::new(MAX_PARTITIONS).validate().is_ok());
    }
}
