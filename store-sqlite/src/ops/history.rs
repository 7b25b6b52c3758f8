//! The work history (the contract's `History` group) as SQL: one additive upsert per
//! entry, old minutes deleted through the minute index, reads by primary key range.

use rusqlite::params;
use tenure_core::{
    HistoryAddParams, HistoryCounts, HistoryParams, HistoryPoint, Timestamp, HISTORY_KEEP,
};

use super::{Cx, OpResult};

const SQL_ADD: &str = "INSERT INTO tenure_history (queue, minute, finished, failed, dead)
     VALUES (?1, ?2, ?3, ?4, ?5)
     ON CONFLICT (queue, minute) DO UPDATE SET
         finished = finished + excluded.finished,
         failed = failed + excluded.failed,
         dead = dead + excluded.dead";

/// Deletes at most this many old minutes per call, so a call's work stays bounded.
const PRUNE_BATCH: i64 = 1_000;

const SQL_PRUNE: &str = "DELETE FROM tenure_history WHERE (queue, minute) IN (
     SELECT queue, minute FROM tenure_history WHERE minute < ?1 ORDER BY minute LIMIT ?2)";

const SQL_READ: &str = "SELECT minute, finished, failed, dead FROM tenure_history
     WHERE queue = ?1 AND minute >= ?2 AND minute < ?3
       AND (finished > 0 OR failed > 0 OR dead > 0)
     ORDER BY minute";

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Adds every entry's counts to its queue and minute; deletes minutes older than
/// [`HISTORY_KEEP`] before the newest one added.
pub(crate) fn history_add(cx: &Cx<'_>, params: &HistoryAddParams) -> OpResult<()> {
    let conn = cx.conn;
    let mut add = conn.prepare_cached(SQL_ADD)?;
    let mut newest = Timestamp::EPOCH;
    for e in &params.entries {
        add.execute(params![
            e.queue.as_str(),
            e.minute.as_micros(),
            to_i64(e.counts.finished),
            to_i64(e.counts.failed),
            to_i64(e.counts.dead),
        ])?;
        newest = newest.max(e.minute);
    }
    let keep_from = newest.saturating_sub(HISTORY_KEEP);
    conn.prepare_cached(SQL_PRUNE)?
        .execute(params![keep_from.as_micros(), PRUNE_BATCH])?;
    Ok(())
}

/// The minutes of one queue in `since..until` with a count, earliest first.
pub(crate) fn history(cx: &Cx<'_>, params: &HistoryParams) -> OpResult<Vec<HistoryPoint>> {
    let mut read = cx.conn.prepare_cached(SQL_READ)?;
    let rows = read.query_map(
        params![
            params.queue.as_str(),
            params.since.as_micros(),
            params.until.as_micros()
        ],
        |r| {
            Ok(HistoryPoint::new(
                Timestamp::from_micros(r.get(0)?),
                HistoryCounts::new(to_u64(r.get(1)?), to_u64(r.get(2)?), to_u64(r.get(3)?)),
            ))
        },
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
