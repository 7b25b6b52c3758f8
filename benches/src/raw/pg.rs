//! The PostgreSQL store's own `items` table, through sqlx.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::{PgConnection, Row};
use tenure_core::{Clock, SystemClock};

use super::raw_err;
use crate::{BenchError, LEASE, QUEUE};

/// The raw claim and finalize on the `items` table of a `PgStore` schema: the claim
/// is one `UPDATE ... WHERE id = ANY(ARRAY(SELECT ... FOR UPDATE SKIP LOCKED))` over
/// the store's partial index of ready heads, the finalize one `DELETE` fenced on
/// `(id, attempt)` over `unnest`.
#[derive(Clone, Debug)]
pub struct PgRaw {
    claim: String,
    finalize: String,
}

/// A claimed row: its id, the attempt the claim started, and its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgRawLease {
    /// The item id.
    pub id: uuid::Uuid,
    /// The attempt this claim started (the fencing token with `id`).
    pub attempt: i32,
    /// The item's payload.
    pub payload: Vec<u8>,
}

impl PgRaw {
    /// The statements for the tables of `schema` (a `PgStore` schema, already
    /// migrated).
    pub fn new(schema: &str) -> Self {
        PgRaw {
            claim: format!(
                "UPDATE {schema}.items SET state = 'running', attempt = attempt + 1, \
                     owner = $1, lease_expires_at = $2, renewals = 0, updated_at = $3 \
                 WHERE id = ANY(ARRAY( \
                     SELECT id FROM {schema}.items \
                     WHERE queue = $4 AND state = 'ready' AND head AND run_at <= $3 \
                     ORDER BY priority, run_at, seq LIMIT $5 \
                     FOR UPDATE SKIP LOCKED)) \
                 RETURNING id, attempt, payload"
            ),
            finalize: format!(
                "DELETE FROM {schema}.items i \
                 USING unnest($1::uuid[], $2::int4[]) AS t(id, attempt) \
                 WHERE i.id = t.id AND i.attempt = t.attempt AND i.state = 'running' \
                 RETURNING i.id"
            ),
        }
    }

    /// The same claim, with a finalize that keeps the stream head flag in its write
    /// path (G9): the `DELETE` returns each row's stream and, in the same
    /// statement, the next waiting item of each of those streams becomes its head.
    /// No stream rows, no counts: the least a strict per-stream FIFO can write.
    /// The `streams` table of the schema is left as it was (stale counts): empty it
    /// before the store enqueues into the same schema again.
    pub fn with_stream_heads(schema: &str) -> Self {
        PgRaw {
            finalize: format!(
                "WITH d AS ( \
                     DELETE FROM {schema}.items i \
                     USING unnest($1::uuid[], $2::int4[]) AS t(id, attempt) \
                     WHERE i.id = t.id AND i.attempt = t.attempt AND i.state = 'running' \
                     RETURNING i.id, i.stream \
                 ), promoted AS ( \
                     UPDATE {schema}.items b SET head = true \
                     WHERE b.id IN (SELECT (SELECT n.id FROM {schema}.items n \
                             WHERE n.stream = d.stream AND NOT n.head \
                             ORDER BY n.seq LIMIT 1) \
                         FROM d WHERE d.stream IS NOT NULL) \
                 ) \
                 SELECT id FROM d"
            ),
            ..PgRaw::new(schema)
        }
    }

    /// Claims up to `batch` ready items of [`QUEUE`] for `owner`, with a lease of
    /// [`LEASE`].
    pub async fn claim(
        &self,
        conn: &mut PgConnection,
        owner: &str,
        batch: usize,
    ) -> Result<Vec<PgRawLease>, BenchError> {
        let now = SystemClock.now();
        let rows = sqlx::query(&self.claim)
            .bind(owner)
            .bind((now + LEASE).as_micros())
            .bind(now.as_micros())
            .bind(QUEUE)
            .bind(i64::try_from(batch).unwrap_or(i64::MAX))
            .fetch_all(conn)
            .await
            .map_err(raw_err("claim"))?;
        rows.iter()
            .map(|r| {
                Ok(PgRawLease {
                    id: r.try_get(0)?,
                    attempt: r.try_get(1)?,
                    payload: r.try_get(2)?,
                })
            })
            .collect::<sqlx::Result<_>>()
            .map_err(raw_err("claim"))
    }

    /// Deletes each claimed row if it is still running with that attempt, in one
    /// statement; returns how many were.
    pub async fn finalize(
        &self,
        conn: &mut PgConnection,
        leases: &[PgRawLease],
    ) -> Result<usize, BenchError> {
        let ids: Vec<uuid::Uuid> = leases.iter().map(|l| l.id).collect();
        let attempts: Vec<i32> = leases.iter().map(|l| l.attempt).collect();
        let rows = sqlx::query(&self.finalize)
            .bind(&ids)
            .bind(&attempts)
            .fetch_all(conn)
            .await
            .map_err(raw_err("finalize"))?;
        Ok(rows.len())
    }
}

/// The burn-down drain of `n` seeded items on `conns` (one task per connection,
/// owner `w{index}`): each task loops [`PgRaw::claim`] of `batch` then one
/// [`PgRaw::finalize`] of the whole batch, and returns at its first empty claim once
/// all `n` have finished (an empty claim before that, while another task holds the
/// last heads of some streams, is retried after 1 ms, at most 1,000 times in a row).
/// Every finalize must delete every row it names and exactly `n` rows must go, else
/// the drain fails. Returns the time from the first claim to the last task's return,
/// and the connections, for the caller to read or close.
pub async fn drain(
    raw: &PgRaw,
    conns: Vec<PgConnection>,
    n: usize,
    batch: usize,
) -> Result<(Duration, Vec<PgConnection>), BenchError> {
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(w, mut conn)| {
            let (done, raw) = (done.clone(), raw.clone());
            tokio::spawn(async move {
                let owner = format!("w{w}");
                let mut empty = 0u32;
                loop {
                    let leases = match raw.claim(&mut conn, &owner, batch).await {
                        Ok(l) => l,
                        Err(e) => return (conn, Err(e)),
                    };
                    if leases.is_empty() {
                        // Another task may hold the last heads of some streams:
                        // the drain is over once every item has finished.
                        if done.load(Ordering::Relaxed) >= n as u64 || empty >= 1_000 {
                            return (conn, Ok(()));
                        }
                        empty += 1;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                    empty = 0;
                    match raw.finalize(&mut conn, &leases).await {
                        Ok(f) if f == leases.len() => {
                            done.fetch_add(f as u64, Ordering::Relaxed);
                        }
                        Ok(f) => {
                            let e = BenchError::Check(format!(
                                "a raw finalize deleted {f} of {} rows just claimed",
                                leases.len()
                            ));
                            return (conn, Err(e));
                        }
                        Err(e) => return (conn, Err(e)),
                    }
                }
            })
        })
        .collect();
    let mut conns = Vec::with_capacity(tasks.len());
    let mut first_err = None;
    for t in tasks {
        let (conn, outcome) = t.await?;
        conns.push(conn);
        if let Err(e) = outcome {
            first_err.get_or_insert(e);
        }
    }
    let elapsed = start.elapsed();
    if let Some(e) = first_err {
        return Err(e);
    }
    let finished = done.load(Ordering::Relaxed);
    if finished != n as u64 {
        return Err(BenchError::Unfinished {
            finished,
            expected: n,
        });
    }
    Ok((elapsed, conns))
}
