//! Finalize (the contract's second group) as SQL: [`renew`], [`complete`], [`fail`]
//! and [`release`], each fenced on `(id, attempt, lease)`. The store's calls and the
//! in-transaction calls of `tx.rs` run these same functions.

use rusqlite::{params, OptionalExtension};
use tenure_core::machine;
use tenure_core::{
    CompleteParams, FailOutcome, FailParams, ReleaseParams, RenewOutcome, RenewParams, Timestamp,
    TokenOutcome,
};

use super::{
    load_lean_by_id, promote, put_back_after, store_item, to_u32, Cx, OpResult,
    SQL_COMPLETE_DELETE, SQL_COMPLETE_FIND, SQL_COMPLETE_KEEP, SQL_COMPLETE_UNSTREAMED_DELETE,
    SQL_COMPLETE_UNSTREAMED_KEEP, SQL_EARLIER_UNFINISHED,
};

/// [`Store::renew`](tenure_core::Store::renew); mirrors [`machine::renew`]: the fenced
/// row is read, the cap checked, and the new expiry written by seq.
pub(crate) fn renew(cx: &Cx<'_>, params: &RenewParams) -> OpResult<Vec<RenewOutcome>> {
    let conn = cx.conn;
    let now = cx.now.as_micros();
    let expires = (cx.now + params.lease_for).as_micros();
    let mut find = conn.prepare_cached(
        "SELECT seq, renewals, max_renewals FROM tenure_items
         WHERE id = ?1 AND state = 'running' AND attempt = ?2 AND lease = ?3",
    )?;
    let mut extend = conn.prepare_cached(
        "UPDATE tenure_items SET lease_expires_at = ?2, renewals = ?3, updated_at = ?4
         WHERE seq = ?1",
    )?;
    let mut out = Vec::with_capacity(params.tokens.len());
    for (i, t) in params.tokens.iter().enumerate() {
        let row: Option<(i64, i64, i64)> = find
            .query_row(
                params![&t.id.as_bytes()[..], t.attempt, t.lease.to_i64()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        out.push(match row {
            None => RenewOutcome::LeaseLost,
            Some((_, renewals, limit)) if renewals >= limit => RenewOutcome::LimitReached {
                limit: to_u32(limit, "max_renewals")?,
            },
            Some((seq, renewals, _)) => {
                extend.execute(params![seq, expires, renewals + 1, now])?;
                if let Some(p) = params.progress_at(i) {
                    // Fenced by the lookup above, in the renewal's transaction.
                    let mut report = conn
                        .prepare_cached("UPDATE tenure_items SET progress = ?2 WHERE seq = ?1")?;
                    report.execute(params![seq, p.clone().for_attempt(t.attempt).encode()])?;
                }
                RenewOutcome::Renewed {
                    expires_at: Timestamp::from_micros(expires),
                    renewals: to_u32(renewals + 1, "renewals")?,
                }
            }
        });
    }
    Ok(out)
}

/// [`Store::complete`](tenure_core::Store::complete); mirrors [`machine::complete`]
/// (then deletes the row unless finished items are kept) and moves the stream head.
pub(crate) fn complete(cx: &Cx<'_>, params: &CompleteParams) -> OpResult<Vec<TokenOutcome>> {
    let conn = cx.conn;
    // One fenced write by id per token of an unstreamed item; a streamed one (or a
    // token not current) falls to a lookup, then a write by rowid. A `DELETE ..
    // RETURNING stream` would buffer its row in a temporary b-tree on every call,
    // which costs more than the lookup.
    let mut direct = conn.prepare_cached(if cx.keep_done {
        SQL_COMPLETE_UNSTREAMED_KEEP
    } else {
        SQL_COMPLETE_UNSTREAMED_DELETE
    })?;
    let mut find = conn.prepare_cached(SQL_COMPLETE_FIND)?;
    let mut finish = conn.prepare_cached(if cx.keep_done {
        SQL_COMPLETE_KEEP
    } else {
        SQL_COMPLETE_DELETE
    })?;
    let mut out = Vec::with_capacity(params.tokens.len());
    let mut streams = Vec::new();
    for t in &params.tokens {
        let (id, lease) = (&t.id.as_bytes()[..], t.lease.to_i64());
        let done = if cx.keep_done {
            direct.execute(params![id, t.attempt, lease, cx.now.as_micros()])?
        } else {
            direct.execute(params![id, t.attempt, lease])?
        };
        if done == 1 {
            out.push(TokenOutcome::Accepted);
            continue;
        }
        // A streamed item (which moves its stream's head), or a token not current.
        let row: Option<(i64, Option<String>)> = find
            .query_row(params![id, t.attempt, lease], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        let Some((seq, stream)) = row else {
            out.push(TokenOutcome::LeaseLost);
            continue;
        };
        if let Some(st) = &stream {
            // G9: not before the unfinished items ahead of it in its stream (those
            // earlier in this call are finished already).
            let mut earlier = conn.prepare_cached(SQL_EARLIER_UNFINISHED)?;
            if earlier.query_row(params![st, seq], |r| r.get::<_, bool>(0))? {
                out.push(TokenOutcome::OutOfOrder);
                continue;
            }
        }
        if cx.keep_done {
            finish.execute(params![seq, cx.now.as_micros()])?;
        } else {
            finish.execute([seq])?;
        }
        streams.extend(stream);
        out.push(TokenOutcome::Accepted);
    }
    for s in &streams {
        promote(conn, s)?;
    }
    Ok(out)
}

/// [`Store::fail`](tenure_core::Store::fail); applies [`machine::fail`] itself.
pub(crate) fn fail(cx: &Cx<'_>, params: &FailParams) -> OpResult<Vec<FailOutcome>> {
    let mut out = Vec::with_capacity(params.failures.len());
    for f in &params.failures {
        let Some((seq, mut item)) = load_lean_by_id(cx.conn, f.token.id)? else {
            out.push(FailOutcome::LeaseLost);
            continue;
        };
        let outcome = machine::fail(&mut item, f, cx.now);
        if outcome != FailOutcome::LeaseLost {
            store_item(cx.conn, seq, &item)?;
            if let Some(stream) = &item.stream {
                put_back_after(cx, stream.as_str(), seq)?;
            }
        }
        out.push(outcome);
    }
    Ok(out)
}

/// [`Store::release`](tenure_core::Store::release); mirrors [`machine::release`].
pub(crate) fn release(cx: &Cx<'_>, params: &ReleaseParams) -> OpResult<Vec<TokenOutcome>> {
    let mut stmt = cx.conn.prepare_cached(
        "UPDATE tenure_items SET state = 'ready', run_at = ?4, owner = NULL,
             lease_expires_at = NULL, updated_at = ?4, max_attempts = max_attempts + 1
         WHERE id = ?1 AND state = 'running' AND attempt = ?2 AND lease = ?3
         RETURNING seq, stream",
    )?;
    let mut out = Vec::with_capacity(params.tokens.len());
    for t in &params.tokens {
        let row: Option<(i64, Option<String>)> = stmt
            .query_row(
                params![
                    &t.id.as_bytes()[..],
                    t.attempt,
                    t.lease.to_i64(),
                    cx.now.as_micros()
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        out.push(match row {
            Some((seq, stream)) => {
                if let Some(stream) = stream {
                    put_back_after(cx, &stream, seq)?;
                }
                TokenOutcome::Accepted
            }
            None => TokenOutcome::LeaseLost,
        });
    }
    Ok(out)
}
