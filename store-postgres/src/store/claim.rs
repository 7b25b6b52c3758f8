//! Enqueue and claim (the contract's first group): the [`Claims`] impl, and the steps
//! of a claim. The steps of an enqueue, which the `_in_tx` calls share, are in
//! `enqueue.rs`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use tenure_core::async_trait;
use tenure_core::contract::{Claims, Valid};

use sqlx::postgres::PgRow;
use sqlx::Row;
use tenure_core::{
    ClaimParams, EnqueueParams, Enqueued, Error, Item, Lease, LeaseId, NewItem, Result, Timestamp,
};
use uuid::Uuid;

use crate::error::{db_code, map};
use crate::rows;
use crate::sql::SCOPE_INDEX;

use super::enqueue::Notify;
use super::limited_claim::Limited;
use super::PgStore;

/// How many times a claim that lost a scope race (G10) is tried again before it
/// answers with what it has (nothing).
const SCOPE_RACE_RETRIES: usize = 16;
/// How many expired leases a claim recovers before it picks (contract of `claim`).
const CLAIM_RECOVER_LIMIT: i64 = 1_000;

/// How many items a store claims between two moves of its queues' claim cursors.
const CURSOR_EVERY_ITEMS: u64 = 1_000;
/// The longest a store claims without moving its queues' claim cursors.
const CURSOR_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// When a store moves its claim cursors forward (migration 9): before a claim, once
/// [`CURSOR_EVERY_ITEMS`] items were claimed or [`CURSOR_EVERY`] passed since the last
/// move. Between two moves a claim walks at most the index entries of the items
/// claimed meanwhile; each move writes one row version per queue, so under an old
/// snapshot the cursor rows stay small (a few thousand versions in half an hour).
#[derive(Debug, Default)]
pub(crate) struct CursorPace {
    last: Option<std::time::Instant>,
    claimed: u64,
}

impl CursorPace {
    /// Whether a move is due now; if so, the pace restarts from now.
    fn due(&mut self) -> bool {
        let due = self.claimed >= CURSOR_EVERY_ITEMS
            || self.last.is_none_or(|t| t.elapsed() >= CURSOR_EVERY);
        if due {
            self.last = Some(std::time::Instant::now());
            self.claimed = 0;
        }
        due
    }
}

/// The decoded answer of one run of the claim statement.
pub(crate) enum ClaimRun {
    /// Expired leases of these queues exist: recover them, then pick.
    RecoverFirst,
    /// A partitioned claim (G14) whose owner is not a registered instance; nothing
    /// was written.
    NotRegistered,
    /// What the pick claimed, with enqueue sequence numbers.
    Claimed(Vec<(i64, Item)>),
}

#[async_trait]
impl Claims for PgStore {
    /// `Store::enqueue`.
    async fn enqueue(&self, params: Valid<EnqueueParams>) -> Result<Vec<Enqueued>> {
        let now = self.inner.clock.now();
        params.validate_schedule(&self.inner.limits, now)?;
        let simple = params.pin_to.is_none()
            && params
                .items
                .iter()
                .all(|it| {
                    it.dedup_key.is_none()
                        && it.stream.is_none()
                        && it.limit_key.is_none()
                        && it.fairness_key.is_none()
                })
            // A fair queue's items need their tags (G18): only when the schema has no
            // limits and no fair queue is the one-statement enqueue enough.
            && self.trusts_no_limits();
        let out = if simple {
            // One statement; the NOTIFY follows the commit (`crate::notify`).
            let all: Vec<&NewItem> = params.items.iter().collect();
            let heads = vec![true; all.len()];
            let mut s = self.session().await?;
            self.insert_rows(&mut s, &all, &heads, now, Notify::AfterCommit)
                .await?;
            s.finish().await?;
            all.iter()
                .map(|it| Enqueued {
                    id: it.id,
                    duplicate: false,
                })
                .collect()
        } else {
            let mut tx = self.begin().await?;
            self.check_pin(&mut tx, &params).await?;
            let out = self
                .enqueue_steps(&mut tx, &params.items, now, Notify::AfterCommit)
                .await?;
            self.pin_enqueued(&mut tx, &params, &out).await?;
            tx.commit().await.map_err(map)?;
            out
        };
        self.inner.wake.notify();
        self.wake_others();
        Ok(out)
    }

    /// `Store::claim`.
    async fn claim(&self, params: Valid<ClaimParams>) -> Result<Vec<Lease>> {
        let now = self.inner.clock.now();
        let queues: Vec<String> = params
            .queues
            .iter()
            .map(|q| q.as_str().to_owned())
            .collect();
        // A queue named twice would be scanned twice and fill the limit with repeats.
        let queues = {
            let mut q = queues;
            q.sort();
            q.dedup();
            q
        };
        if self.claims_limited(&queues, now).await? {
            return self.claim_with_limits(&queues, now, &params).await;
        }
        self.advance_cursors(now, &queues).await?;
        let mut check_expired = true;
        let mut recovered: Vec<Uuid> = Vec::new();
        let mut races = 0;
        loop {
            let run = {
                let mut s = self.session().await?;
                let run = self
                    .claim_run(&mut *s, &queues, now, &params, check_expired)
                    .await;
                match &run {
                    Ok(_) => s.finish().await?,
                    Err(e) if is_scope_race(e) => s.settle().await,
                    Err(_) => {}
                }
                run
            };
            match run {
                Ok(ClaimRun::NotRegistered) => {
                    return Err(Error::not_found("instance", params.owner.as_str()));
                }
                Ok(ClaimRun::RecoverFirst) => {
                    // Contract: recover the queues' expired leases first, then pick.
                    let (_, ready) = self
                        .recover(now, CLAIM_RECOVER_LIMIT, Some(&queues))
                        .await?;
                    recovered = ready;
                    check_expired = false;
                }
                Ok(ClaimRun::Claimed(mut items)) => {
                    self.count_claimed(items.len());
                    // A row this call recovered may have been locked at the pick by a
                    // stale finalize whose fence then failed: the row is claimable,
                    // so wait for it instead of passing it over. Best effort: the
                    // first pass's claims are committed, so an error here keeps them.
                    let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
                    for id in recovered.drain(..) {
                        if items.len() >= limit {
                            break;
                        }
                        if items.iter().any(|(_, it)| *it.id.as_uuid() == id) {
                            continue;
                        }
                        match self.claim_locked(id, &queues, now, &params).await {
                            Ok(more) => items.extend(more),
                            Err(e) => {
                                if is_scope_race(&e) {
                                    self.inner.scope_races.fetch_add(1, Ordering::Relaxed);
                                }
                                tracing::debug!(error = %e, "tenure-postgres: second claim pass");
                                break;
                            }
                        }
                    }
                    if params.stream_run > 1 && !items.is_empty() {
                        return self.with_runs(items, &queues, now, &params).await;
                    }
                    return leases(items);
                }
                // G10: a racing claimer committed a running item of a scope we picked;
                // the partial unique index refused ours and the statement changed
                // nothing. Pick again: the busy scope is now passed over.
                Err(e) if is_scope_race(&e) => {
                    self.inner.scope_races.fetch_add(1, Ordering::Relaxed);
                    races += 1;
                    if races > SCOPE_RACE_RETRIES {
                        return Ok(Vec::new());
                    }
                }
                Err(e) => return Err(map(e)),
            }
        }
    }
}

impl PgStore {
    /// A claim of queues among which one has limits, a deferral or fair shares (G16,
    /// G17, G18;
    /// `limited_claim.rs`): expired leases recovered first, then the limited claim,
    /// tried again after a scope race. A partitioned claim (G14) of such queues is
    /// not served; stream runs (G9) are not taken behind its heads, as their items
    /// would start without passing the limits (each head is a run of one).
    async fn claim_with_limits(
        &self,
        queues: &[String],
        now: Timestamp,
        params: &ClaimParams,
    ) -> Result<Vec<Lease>> {
        if params.partitioning.is_some() {
            return Err(Error::unsupported(
                "a partitioned claim of a queue with limits",
                crate::STORE,
            ));
        }
        self.recover(now, CLAIM_RECOVER_LIMIT, Some(queues)).await?;
        for _ in 0..=SCOPE_RACE_RETRIES {
            match self.claim_limited(queues, now, params).await? {
                Limited::Claimed(items) => {
                    self.count_claimed(items.len());
                    return leases(items);
                }
                Limited::ScopeRace => {
                    self.inner.scope_races.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(Vec::new())
    }

    /// Moves the claim cursors of `queues` forward when [`CursorPace`] says it is due,
    /// in a transaction of its own. A connection that cannot be had is the claim's
    /// error too, so it is answered at once; a failed statement is only logged (the
    /// claim that follows reports what is wrong, a schema not migrated included).
    async fn advance_cursors(&self, now: Timestamp, queues: &[String]) -> Result<()> {
        let due = match self.inner.cursor_pace.lock() {
            Ok(mut pace) => pace.due(),
            Err(_) => false,
        };
        if !due {
            return Ok(());
        }
        let mut s = self.session().await?;
        let run = self
            .query(&self.inner.sql.cursor_advance)
            .bind(now.as_micros())
            .bind(queues)
            .execute(&mut *s)
            .await;
        match run {
            Ok(_) => s.finish().await?,
            Err(e) => {
                tracing::debug!(error = %e, "tenure-postgres: moving the claim cursors");
                s.settle().await;
            }
        }
        Ok(())
    }

    /// Counts `n` claimed items towards the next move of the claim cursors.
    fn count_claimed(&self, n: usize) {
        if let Ok(mut pace) = self.inner.cursor_pace.lock() {
            pace.claimed += n as u64;
        }
    }

    /// One run of the claim statement on `exec` (the pool, or a test's transaction).
    pub(crate) async fn claim_run<'e>(
        &self,
        exec: impl sqlx::PgExecutor<'e>,
        queues: &[String],
        now: Timestamp,
        params: &ClaimParams,
        check_expired: bool,
    ) -> std::result::Result<ClaimRun, sqlx::Error> {
        let expires = now + params.lease_for;
        let sql = &self.inner.sql;
        let stmt = match params.partitioning {
            None => &sql.claim,
            Some(_) => &sql.claim_partitioned,
        };
        let mut q = self
            .query(stmt)
            .bind(queues)
            .bind(now.as_micros())
            .bind(i64::from(params.limit))
            .bind(params.owner.as_str())
            .bind(expires.as_micros())
            .bind(check_expired);
        if let Some(p) = params.partitioning {
            q = q.bind(i64::from(p.partitions));
        }
        // One lease id for the leases of this statement: it only has to differ between
        // the leases of one item (`LeaseId`).
        q = q.bind(LeaseId::mint().to_i64());
        let rows = q.fetch_all(exec).await?;
        let mut items = Vec::with_capacity(rows.len());
        for row in &rows {
            if params.partitioning.is_some() && !row.try_get::<bool, _>("registered")? {
                return Ok(ClaimRun::NotRegistered);
            }
            let expired: bool = row.try_get("expired")?;
            if expired {
                return Ok(ClaimRun::RecoverFirst);
            }
            let id: Option<Uuid> = row.try_get("id")?;
            if id.is_some() {
                items.push(seq_item(row)?);
            }
        }
        Ok(ClaimRun::Claimed(items))
    }

    /// The second pass of a claim: claims one row this call recovered but its pick
    /// found locked, waiting for that lock.
    async fn claim_locked(
        &self,
        id: Uuid,
        queues: &[String],
        now: Timestamp,
        params: &ClaimParams,
    ) -> std::result::Result<Vec<(i64, Item)>, sqlx::Error> {
        let expires = now + params.lease_for;
        let sql = &self.inner.sql;
        let stmt = match params.partitioning {
            None => &sql.claim_locked,
            Some(_) => &sql.claim_locked_partitioned,
        };
        let mut q = self
            .query(stmt)
            .bind([id])
            .bind(now.as_micros())
            .bind(queues)
            .bind(params.owner.as_str())
            .bind(expires.as_micros());
        if let Some(p) = params.partitioning {
            q = q.bind(i64::from(p.partitions));
        }
        q = q.bind(LeaseId::mint().to_i64());
        let mut s = self.raw_session().await?;
        let rows = q.fetch_all(&mut *s).await?;
        s.commit().await?;
        rows.iter().map(seq_item).collect()
    }

    /// G9: claims the runs behind the stream heads among `heads` (claimed already) and
    /// answers every lease in claim order, each run right behind its head in stream
    /// order. Best effort: a scope race or an error here leaves the heads claimed and
    /// answered alone (a run of one), as the tails' claim changed nothing.
    async fn with_runs(
        &self,
        mut heads: Vec<(i64, Item)>,
        queues: &[String],
        now: Timestamp,
        params: &ClaimParams,
    ) -> Result<Vec<Lease>> {
        heads.sort_by_key(|(seq, it)| (it.priority, it.run_at, *seq));
        let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
        let run = usize::try_from(params.stream_run).unwrap_or(1);
        let mut free = limit.saturating_sub(heads.len());
        let (mut streams, mut seqs, mut rooms) = (Vec::new(), Vec::new(), Vec::new());
        for (seq, it) in &heads {
            let Some(stream) = &it.stream else { continue };
            let room = (run - 1).min(free);
            if room == 0 {
                break;
            }
            free -= room;
            streams.push(stream.as_str().to_owned());
            seqs.push(*seq);
            rooms.push(i64::try_from(room).unwrap_or(i64::MAX));
        }
        let mut tails: HashMap<String, Vec<(i64, Item)>> = HashMap::new();
        if !streams.is_empty() {
            let expires = now + params.lease_for;
            let answer = self
                .fetch_all(
                    self.query(&self.inner.sql.claim_run_tails)
                        .bind(&streams)
                        .bind(&seqs)
                        .bind(&rooms)
                        .bind(now.as_micros())
                        .bind(queues)
                        .bind(params.owner.as_str())
                        .bind(expires.as_micros())
                        .bind(LeaseId::mint().to_i64()),
                )
                .await;
            match answer {
                Ok(rows) => {
                    for row in &rows {
                        let (seq, it) = seq_item(row).map_err(map)?;
                        let key = it.stream.as_ref().map(|s| s.as_str().to_owned());
                        tails
                            .entry(key.unwrap_or_default())
                            .or_default()
                            .push((seq, it));
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "tenure-postgres: the runs behind claimed heads");
                }
            }
        }
        let mut out = Vec::with_capacity(heads.len() + tails.values().map(Vec::len).sum::<usize>());
        for (_, head) in heads {
            let behind = head.stream.as_ref().and_then(|s| tails.remove(s.as_str()));
            out.push(Lease::from_item(head)?);
            if let Some(mut behind) = behind {
                behind.sort_by_key(|(seq, _)| *seq);
                for (_, it) in behind {
                    out.push(Lease::from_item(it)?);
                }
            }
        }
        Ok(out)
    }
}

/// An item row with its enqueue sequence (the last claim-order key).
pub(super) fn seq_item(row: &PgRow) -> std::result::Result<(i64, Item), sqlx::Error> {
    let seq: i64 = row.try_get("seq")?;
    let item = rows::item(row).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    Ok((seq, item))
}

/// Leases in claim order (G8): priority, run_at, enqueue order.
fn leases(mut items: Vec<(i64, Item)>) -> Result<Vec<Lease>> {
    items.sort_by_key(|(seq, it)| (it.priority, it.run_at, *seq));
    items
        .into_iter()
        .map(|(_, it)| Lease::from_item(it))
        .collect()
}

pub(super) fn is_scope_race(e: &sqlx::Error) -> bool {
    matches!(db_code(e), Some((code, Some(c))) if code == "23505" && c == SCOPE_INDEX)
}
