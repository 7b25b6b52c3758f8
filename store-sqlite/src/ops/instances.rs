//! Instances and leader (the contract's fourth group) as SQL: heartbeats, the
//! instance list, eviction and deregistration (which release an owner's leases and
//! drop its stream pins), and the leader leases.

use rusqlite::{params, Connection, OptionalExtension};
use tenure_core::machine;
use tenure_core::{
    DeregisterParams, EvictParams, Evicted, HeartbeatParams, Instance, LeaderInfo, LeaderName,
    LeaderParams, LeaderStatus, OwnerId, Timestamp,
};

use super::{
    corrupt, load_lean_by_seq, put_back_after, store_item, Cx, OpResult, SQL_UNPIN_INSTANCE,
};

/// [`Store::instance_heartbeat`](tenure_core::Store::instance_heartbeat).
pub(crate) fn instance_heartbeat(cx: &Cx<'_>, params: &HeartbeatParams) -> OpResult<()> {
    cx.conn
        .prepare_cached(
            "INSERT INTO tenure_instances (id, started_at, last_seen) VALUES (?1, ?2, ?2)
             ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen",
        )?
        .execute(params![params.instance.as_str(), cx.now.as_micros()])?;
    Ok(())
}

/// [`Store::instance_list`](tenure_core::Store::instance_list).
pub(crate) fn instance_list(cx: &Cx<'_>) -> OpResult<Vec<Instance>> {
    let mut stmt = cx.conn.prepare_cached(
        "SELECT id, started_at, last_seen FROM tenure_instances ORDER BY started_at, rowid",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, started, seen) = row?;
        out.push(Instance {
            id: OwnerId::new(id).map_err(corrupt)?,
            started_at: Timestamp::from_micros(started),
            last_seen: Timestamp::from_micros(seen),
        });
    }
    Ok(out)
}

/// [`Store::instance_evict_stale`](tenure_core::Store::instance_evict_stale); each
/// lease of an evicted instance goes through [`machine::evict`].
pub(crate) fn instance_evict_stale(cx: &Cx<'_>, params: &EvictParams) -> OpResult<Evicted> {
    let conn = cx.conn;
    let cutoff = (cx.now - params.stale_after).as_micros();
    let stale: Vec<String> = {
        let mut stmt = conn.prepare_cached(
            "SELECT id FROM tenure_instances WHERE last_seen <= ?1 ORDER BY started_at, rowid",
        )?;
        let rows = stmt.query_map([cutoff], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut evicted = Evicted::default();
    for id in stale {
        conn.prepare_cached("DELETE FROM tenure_instances WHERE id = ?1")?
            .execute([&id])?;
        evicted.released += release_owner(cx, &id)?;
        unpin_instance(conn, &id)?;
        evicted.instances.push(OwnerId::new(id).map_err(corrupt)?);
    }
    Ok(evicted)
}

/// [`Store::instance_deregister`](tenure_core::Store::instance_deregister).
pub(crate) fn instance_deregister(cx: &Cx<'_>, params: &DeregisterParams) -> OpResult<Evicted> {
    let id = params.instance.as_str();
    let removed = cx
        .conn
        .prepare_cached("DELETE FROM tenure_instances WHERE id = ?1")?
        .execute([id])?;
    let released = release_owner(cx, id)?;
    unpin_instance(cx.conn, id)?;
    Ok(Evicted {
        released,
        instances: if removed == 1 {
            vec![params.instance.clone()]
        } else {
            Vec::new()
        },
    })
}

/// Drops every stream pin of an instance that left the registry (G14), so its streams
/// go by partition again.
fn unpin_instance(conn: &Connection, instance: &str) -> OpResult<()> {
    conn.prepare_cached(SQL_UNPIN_INSTANCE)?
        .execute([instance])?;
    Ok(())
}

/// Applies [`machine::evict`] to every running item of `owner`; returns how many.
fn release_owner(cx: &Cx<'_>, owner: &str) -> OpResult<u64> {
    let conn = cx.conn;
    let mut seqs: Vec<i64> = {
        let mut stmt = conn.prepare_cached(
            "SELECT seq FROM tenure_items INDEXED BY tenure_items_expiry
             WHERE state = 'running' AND owner = ?1",
        )?;
        let rows = stmt.query_map([owner], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    // In enqueue order: the head of a stream run is evicted, the items behind it are
    // put back untouched (G9).
    seqs.sort_unstable();
    let mut released = 0;
    for seq in seqs {
        let Some(mut item) = load_lean_by_seq(conn, seq)? else {
            continue;
        };
        if machine::evict(&mut item, cx.now).is_some() {
            store_item(conn, seq, &item)?;
            released += 1;
            if let Some(stream) = &item.stream {
                put_back_after(cx, stream.as_str(), seq)?;
            }
        }
    }
    Ok(released)
}

/// [`Store::leader_acquire`](tenure_core::Store::leader_acquire).
pub(crate) fn leader_acquire(cx: &Cx<'_>, params: &LeaderParams) -> OpResult<LeaderStatus> {
    let conn = cx.conn;
    let now = cx.now.as_micros();
    let expires = (cx.now + params.lease_for).as_micros();
    let current: Option<(Option<String>, i64, i64)> = conn
        .prepare_cached("SELECT holder, term, expires_at FROM tenure_leaders WHERE name = ?1")?
        .query_row([params.name.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    let me = params.holder.as_str();
    let term = match current {
        Some((Some(holder), term, until)) if until > now => {
            if holder == me {
                term
            } else {
                return Ok(LeaderStatus::Follower {
                    holder: OwnerId::new(holder).map_err(corrupt)?,
                    term: u64::try_from(term).map_err(corrupt)?,
                    expires_at: Timestamp::from_micros(until),
                });
            }
        }
        Some((_, term, _)) => term + 1,
        None => 1,
    };
    conn.prepare_cached(
        "INSERT INTO tenure_leaders (name, holder, term, expires_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, term = excluded.term,
             expires_at = excluded.expires_at",
    )?
    .execute(params![params.name.as_str(), me, term, expires])?;
    Ok(LeaderStatus::Leader {
        term: u64::try_from(term).map_err(corrupt)?,
        expires_at: Timestamp::from_micros(expires),
    })
}

/// [`Store::leader_get`](tenure_core::Store::leader_get): the live holder, read only.
pub(crate) fn leader_get(cx: &Cx<'_>, name: &LeaderName) -> OpResult<Option<LeaderInfo>> {
    let row: Option<(String, i64, i64)> = cx
        .conn
        .prepare_cached(
            "SELECT holder, term, expires_at FROM tenure_leaders
             WHERE name = ?1 AND holder IS NOT NULL AND expires_at > ?2",
        )?
        .query_row(params![name.as_str(), cx.now.as_micros()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    row.map(|(holder, term, until)| {
        Ok(LeaderInfo::new(
            OwnerId::new(holder).map_err(corrupt)?,
            u64::try_from(term).map_err(corrupt)?,
            Timestamp::from_micros(until),
        ))
    })
    .transpose()
}

/// [`Store::leader_resign`](tenure_core::Store::leader_resign): the term stays.
pub(crate) fn leader_resign(cx: &Cx<'_>, params: &LeaderParams) -> OpResult<bool> {
    let n = cx
        .conn
        .prepare_cached(
            "UPDATE tenure_leaders SET holder = NULL, expires_at = ?3
             WHERE name = ?1 AND holder = ?2 AND expires_at > ?3",
        )?
        .execute(params![
            params.name.as_str(),
            params.holder.as_str(),
            cx.now.as_micros()
        ])?;
    Ok(n == 1)
}
