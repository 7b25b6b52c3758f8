//! Time and recovery (the contract's third group) as SQL: expired leases recovered
//! (by a claim for its own queues, or by [`recover_expired`] across queues), and
//! [`purge`].

use rusqlite::params;
use tenure_core::machine::{self, Recovery};
use tenure_core::{PurgeParams, Purged, RecoverParams, Recovered};

use super::{load_lean_by_seq, put_back_after, store_item, Cx, OpResult, SQL_EXPIRED};

/// Recovers expired leases of `queue` (or of every queue), at most `limit`; mirrors
/// [`machine::recover`].
pub(super) fn recover_where(
    cx: &Cx<'_>,
    queue: Option<&str>,
    limit: u32,
    counts: &mut Recovered,
) -> OpResult<()> {
    let conn = cx.conn;
    let mut seqs: Vec<i64> = {
        let mut stmt = conn.prepare_cached(SQL_EXPIRED)?;
        let rows = stmt.query_map(params![cx.now.as_micros(), queue, limit], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    // In enqueue order, so the head of an expired stream run is recovered first and the
    // items behind it are put back untouched, not recovered (G9).
    seqs.sort_unstable();
    for seq in seqs {
        let Some(mut item) = load_lean_by_seq(conn, seq)? else {
            continue;
        };
        match machine::recover(&mut item, cx.now) {
            Some(Recovery::Requeued) => counts.requeued += 1,
            Some(Recovery::Dead) => counts.dead += 1,
            None => continue,
        }
        store_item(conn, seq, &item)?;
        if let Some(stream) = &item.stream {
            put_back_after(cx, stream.as_str(), seq)?;
        }
    }
    Ok(())
}

/// [`Store::recover_expired`](tenure_core::Store::recover_expired).
pub(crate) fn recover_expired(cx: &Cx<'_>, params: &RecoverParams) -> OpResult<Recovered> {
    let mut counts = Recovered::default();
    recover_where(cx, None, params.limit, &mut counts)?;
    Ok(counts)
}

/// [`Store::purge`](tenure_core::Store::purge).
pub(crate) fn purge(cx: &Cx<'_>, params: &PurgeParams) -> OpResult<Purged> {
    let conn = cx.conn;
    let cutoff = (cx.now - params.keep_done_for).as_micros();
    let items = conn
        .prepare_cached(
            "DELETE FROM tenure_items WHERE seq IN (
             SELECT seq FROM tenure_items WHERE state = 'done' AND updated_at <= ?1 LIMIT ?2)",
        )?
        .execute(params![cutoff, params.limit])?;
    let keys = conn
        .prepare_cached(
            "DELETE FROM tenure_dedup WHERE (queue, key) IN (
             SELECT queue, key FROM tenure_dedup WHERE expires_at <= ?1 LIMIT ?2)",
        )?
        .execute(params![cx.now.as_micros(), params.limit])?;
    // G14: forget pins of streams with no unfinished item left (a later item of the
    // stream goes by its partition again), and any pin whose instance is no longer
    // registered (eviction drops those already; this only guards the table).
    conn.prepare_cached(
        "DELETE FROM tenure_stream_pins WHERE stream IN (
         SELECT p.stream FROM tenure_stream_pins p
         WHERE NOT EXISTS (SELECT 1 FROM tenure_items INDEXED BY tenure_items_stream
                           WHERE tenure_items.stream = p.stream AND state <> 'done')
            OR NOT EXISTS (SELECT 1 FROM tenure_instances i WHERE i.id = p.instance)
         LIMIT ?1)",
    )?
    .execute([params.limit])?;
    Ok(Purged {
        items: items as u64,
        dedup_keys: keys as u64,
    })
}
