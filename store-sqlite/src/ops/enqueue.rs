//! Enqueue as SQL (the contract's first group, with [`claim`](super::claim)).

use rusqlite::{params, OptionalExtension};
use tenure_core::machine;
use tenure_core::partition::key_hash;
use tenure_core::{DedupKey, EnqueueParams, Enqueued, Error, ScopeKey, StreamKey};

use super::limits::FairTags;
use super::*;

/// [`Store::enqueue`](tenure_core::Store::enqueue); mirrors [`machine::enqueue`].
/// The caller validated the params.
pub(crate) fn enqueue(cx: &Cx<'_>, params: &EnqueueParams) -> OpResult<Vec<Enqueued>> {
    let conn = cx.conn;
    let now = cx.now;
    let mut find_dup = conn.prepare_cached(
        "SELECT item_id FROM tenure_dedup WHERE queue = ?1 AND key = ?2 AND expires_at > ?3",
    )?;
    let mut stream_busy = conn.prepare_cached(SQL_STREAM_BUSY)?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO tenure_items (id, queue, payload, stream, scope, dedup_key, priority,
             run_at, state, head, attempt, owner, lease_expires_at, renewals, stalls,
             max_attempts, max_stalls, max_renewals, last_error, created_at, updated_at, phash,
             limit_key, ftag, lq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'ready', ?9, 0, NULL, NULL, 0, 0,
             ?10, ?11, ?12, NULL, ?13, ?13, ?14, ?15, ?16, ?17)",
    )?;
    let mut record_key = conn.prepare_cached(
        "INSERT INTO tenure_dedup (queue, key, item_id, recorded_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (queue, key) DO UPDATE SET item_id = excluded.item_id,
             recorded_at = excluded.recorded_at, expires_at = excluded.expires_at",
    )?;
    // G14: pinning at enqueue needs a registered instance; checked before any write.
    let mut pin = match &params.pin_to {
        Some(who) => {
            let registered: i64 = conn
                .prepare_cached(SQL_RANK)?
                .query_row([who.as_str()], |r| r.get(2))?;
            if registered == 0 {
                return Err(Error::not_found("instance", who.to_string()).into());
            }
            Some((conn.prepare_cached(SQL_PIN)?, who.as_str()))
        }
        None => None,
    };
    let mut out = Vec::with_capacity(params.items.len());
    let mut fair = FairTags::default();
    for new in &params.items {
        if let Some(dk) = &new.dedup_key {
            let existing: Option<Vec<u8>> = find_dup
                .query_row(
                    params![new.queue.as_str(), dk.as_str(), now.as_micros()],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(bytes) = existing {
                out.push(Enqueued {
                    id: blob_id(&bytes)?,
                    duplicate: true,
                });
                continue;
            }
        }
        let item = machine::enqueue(new, now);
        let ftag = fair.tag(cx, &new.queue, new.fairness_key.as_ref(), new.weight)?;
        let lq = fair.lq(cx, &new.queue)?;
        let head = match &item.stream {
            None => true,
            Some(s) => !stream_busy.exists([s.as_str()])?,
        };
        let inserted = insert.execute(params![
            &item.id.as_bytes()[..],
            item.queue.as_str(),
            item.payload,
            item.stream.as_ref().map(StreamKey::as_str),
            item.scope.as_ref().map(ScopeKey::as_str),
            item.dedup_key.as_ref().map(DedupKey::as_str),
            item.priority,
            item.run_at.as_micros(),
            head,
            item.max_attempts,
            item.max_stalls,
            item.max_renewals,
            now.as_micros(),
            key_hash(item.stream.as_ref(), item.id),
            new.limit_key.as_ref().map(tenure_core::LimitKey::as_str),
            ftag,
            lq,
        ]);
        match inserted {
            Ok(_) => {}
            Err(e) if crate::error::code(&e) == Some(rusqlite::ErrorCode::ConstraintViolation) => {
                return Err(
                    Error::conflict("item", format!("item {} already exists", item.id)).into(),
                )
            }
            Err(e) => return Err(e.into()),
        }
        if let (Some((pin, who)), Some(stream)) = (pin.as_mut(), &item.stream) {
            // First write wins: a stream pinned already keeps its pin.
            pin.execute([stream.as_str(), *who])?;
        }
        if let Some(dk) = &new.dedup_key {
            record_key.execute(params![
                new.queue.as_str(),
                dk.as_str(),
                &item.id.as_bytes()[..],
                now.as_micros(),
                (now + new.dedup_window).as_micros(),
            ])?;
        }
        out.push(Enqueued {
            id: item.id,
            duplicate: false,
        });
    }
    Ok(out)
}
