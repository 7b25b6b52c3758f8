//! The shares and pins every G14 case reads: the partitioning, an instance's rank and
//! share, a stream in a chosen share, a partitioned claim.

use std::collections::BTreeSet;

use tenure_core::partition::{key_hash, takes, Partitioning};
use tenure_core::{
    ClaimParams, HeartbeatParams, ItemId, Lease, NewItem, OwnerId, QueueName, Store, StreamKey,
};

use crate::case::Failure;
use crate::check::OrFail;
use crate::fixtures::{check_leases, item, owner, stream, LEASE};

/// The partitioning every case uses: the default number of partitions.
pub(super) fn partitioning() -> Partitioning {
    Partitioning::default()
}

/// The rank rule, computed here from the instance ids: `(rank, live)` of `who`.
pub(super) fn rank_of(who: &OwnerId, instances: &[&OwnerId]) -> (u32, u32) {
    let rank = instances.iter().filter(|i| ***i < *who).count();
    (rank as u32, instances.len() as u32)
}

/// True when the instance `who` among `instances` takes the unpinned item with this
/// stream and id.
pub(super) fn in_share(
    stream: Option<&StreamKey>,
    id: ItemId,
    who: &OwnerId,
    instances: &[&OwnerId],
) -> bool {
    let (rank, live) = rank_of(who, instances);
    takes(
        partitioning().partition_of(key_hash(stream, id)),
        rank,
        live,
    )
}

/// The ids `instance-a`, `instance-b` and `instance-c`, in rank order.
pub(super) fn three_instances() -> Result<(OwnerId, OwnerId, OwnerId), Failure> {
    Ok((
        owner("instance-a")?,
        owner("instance-b")?,
        owner("instance-c")?,
    ))
}

/// A fresh item id whose partition falls in `who`'s share.
pub(super) fn id_in_share(who: &OwnerId, instances: &[&OwnerId]) -> ItemId {
    loop {
        let id = ItemId::new();
        if in_share(None, id, who, instances) {
            return id;
        }
    }
}

/// The first stream key `prefix-N` for which `pick` holds.
pub(super) fn stream_where(
    prefix: &str,
    pick: impl Fn(&StreamKey) -> bool,
) -> Result<StreamKey, Failure> {
    for n in 0..100_000 {
        let s = stream(&format!("{prefix}-{n}"))?;
        if pick(&s) {
            return Ok(s);
        }
    }
    Err(Failure::new(
        "a stream key with the wanted partition among 100000 candidates",
        "none",
    ))
}

pub(super) async fn beat<S: Store + ?Sized>(store: &S, who: &OwnerId) -> Result<(), Failure> {
    store
        .instance_heartbeat(HeartbeatParams::new(who.clone()))
        .await
        .or_fail("instance_heartbeat")
}

/// A partitioned claim of up to `limit` items of `queue` for `who`.
pub(super) async fn pclaim<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
    who: &OwnerId,
    limit: u32,
) -> Result<Vec<Lease>, Failure> {
    let leases = store
        .claim(
            ClaimParams::new(queue.clone(), who.clone(), limit, LEASE).partitioned(partitioning()),
        )
        .await
        .or_fail("claim (partitioned)")?;
    check_leases(&leases, who, limit)?;
    Ok(leases)
}

pub(super) fn id_set(leases: &[Lease]) -> BTreeSet<ItemId> {
    leases.iter().map(|l| l.token.id).collect()
}

pub(super) fn with_stream(queue: &QueueName, s: &StreamKey) -> NewItem {
    item(queue).stream(s.clone())
}
