//! Queue limits (G16, G17): the [`Limiting`] impl, which reads and writes a queue's
//! limits, deferrals and the answer of `limits_wait`, and what an enqueue keeps of an
//! item's limit key. The limited claim is in `limited_claim.rs`; every statement is a
//! file under `sql/limits/` (`limits_sql.rs`).
//!
//! # Which claims take the limited path
//!
//! A claim of queues without limits or deferrals runs the ordinary claim statement,
//! unchanged. To know that, a handle asks the schema ([`LIMITS_TTL`]): once an answer
//! says the schema has no limits and no deferral at all, the handle trusts it for
//! [`LIMITS_TTL`] from the instant it sent the question, and then asks again. So that
//! this never lets a claim past a limit, `limits_set` and `limits_defer` return only
//! [`LIMITS_TTL`] after their commit: by then every handle, in every process, asked
//! again since the commit, and a claim that starts after they return sees the new
//! limits (contract of `limits_set`). While the schema has limits, every claim asks,
//! and takes the limited path when one of its queues has them.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use tenure_core::async_trait;
use tenure_core::contract::{Limiting, Valid};
use tenure_core::{
    duration_micros, DeferParams, FairnessKey, LimitKey, LimitsParams, NewItem, QueueLimits,
    QueueName, Rate, Result, Timestamp,
};
use uuid::Uuid;

use crate::error::map;

use super::PgStore;

/// How long a handle trusts an answer that the schema has no limits (see the module
/// docs); `limits_set` and `limits_defer` wait this long after their commit.
pub(crate) const LIMITS_TTL: Duration = Duration::from_millis(50);

/// The key of a queue's own rate and deferral in `limit_starts` and `limit_defers` (no
/// limit key is empty).
pub(crate) const QUEUE_KEY: &str = "";

fn rate_of(starts: Option<i64>, per: Option<i64>) -> Option<Rate> {
    match (starts, per) {
        (Some(s), Some(p)) => Some(Rate::new(
            u32::try_from(s).unwrap_or(u32::MAX),
            Duration::from_micros(u64::try_from(p).unwrap_or(0)),
        )),
        _ => None,
    }
}

fn count_u32(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn split(rate: Option<Rate>) -> (Option<i64>, Option<i64>) {
    match rate {
        Some(r) => (Some(i64::from(r.starts)), Some(duration_micros(r.per))),
        None => (None, None),
    }
}

/// The most ids [`PgStore::holding`] keeps.
const MAX_HELD: usize = 100_000;

impl PgStore {
    /// Whether a claim of `queues` at `now` takes the limited path (module docs).
    pub(super) async fn claims_limited(&self, queues: &[String], now: Timestamp) -> Result<bool> {
        if self.trusts_no_limits() {
            return Ok(false);
        }
        let sent = Instant::now();
        let row = self
            .fetch_one(
                self.query(&self.inner.limits_sql.gate)
                    .bind(queues)
                    .bind(now.as_micros()),
            )
            .await?;
        let any: bool = row.try_get("any_limits").map_err(map)?;
        let limited: bool = row.try_get("limited").map_err(map)?;
        if let Ok(mut since) = self.inner.no_limits_since.lock() {
            *since = (!any).then_some(sent);
        }
        self.inner.limits_seen.store(any, Ordering::Relaxed);
        Ok(limited)
    }

    /// Whether the schema has limits, a deferral or a fair queue, asked on `conn`
    /// (an enqueue's transaction) unless this handle trusts that it has none.
    pub(super) async fn schema_has_limits(
        &self,
        conn: &mut PgConnection,
        now: Timestamp,
    ) -> Result<bool> {
        if self.trusts_no_limits() {
            return Ok(false);
        }
        let sent = Instant::now();
        let none: [&str; 0] = [];
        let row = self
            .query(&self.inner.limits_sql.gate)
            .bind(&none[..])
            .bind(now.as_micros())
            .fetch_one(conn)
            .await
            .map_err(map)?;
        let any: bool = row.try_get("any_limits").map_err(map)?;
        if let Ok(mut since) = self.inner.no_limits_since.lock() {
            *since = (!any).then_some(sent);
        }
        self.inner.limits_seen.store(any, Ordering::Relaxed);
        Ok(any)
    }

    /// Whether this handle heard, less than [`LIMITS_TTL`] ago, that the schema has no
    /// limits and no deferral.
    pub(super) fn trusts_no_limits(&self) -> bool {
        match self.inner.no_limits_since.lock() {
            Ok(since) => since.is_some_and(|t| t.elapsed() < LIMITS_TTL),
            Err(_) => false,
        }
    }

    /// After a finish of `ids` committed: when this handle last heard that the
    /// schema has limits, its own workers claim again at once, as the finish may have
    /// freed a slot. When one of `ids` held a slot of a concurrency limit (this handle
    /// claimed it under one), workers of other processes are woken too, through the
    /// pump's NOTIFY after this commit: a worker waiting because every key was
    /// saturated claims again at once, not at its poll interval. Finishes of items of
    /// queues without limits send nothing. A slot freed by a finish through another
    /// handle, or by an expiry, is found at the next lease expiry (`limits_wait`).
    pub(super) fn slots_freed<'a>(&self, ids: impl Iterator<Item = &'a Uuid>) {
        if !self.inner.limits_seen.load(Ordering::Relaxed) {
            return;
        }
        self.notify_local();
        let freed = match self.inner.holding_slots.lock() {
            Ok(mut held) if !held.is_empty() => {
                let mut freed = false;
                for id in ids {
                    freed |= held.remove(id);
                }
                freed
            }
            _ => false,
        };
        if freed {
            self.wake_others();
        }
    }

    /// Remembers that this handle claimed `ids` under a concurrency limit (see
    /// [`PgStore::slots_freed`]). Leases that end otherwise than by this handle's
    /// finish leave their id behind; past [`MAX_HELD`] ids the set starts over
    /// (losing only wake-ups, never a slot).
    pub(super) fn holding(&self, ids: impl Iterator<Item = Uuid>) {
        if let Ok(mut held) = self.inner.holding_slots.lock() {
            if held.len() >= MAX_HELD {
                held.clear();
            }
            held.extend(ids);
        }
    }

    /// Forgets this handle's answer that the schema has no limits.
    pub(super) fn forget_no_limits(&self) {
        if let Ok(mut since) = self.inner.no_limits_since.lock() {
            *since = None;
        }
        self.inner.limits_seen.store(true, Ordering::Relaxed);
    }

    /// After a commit that adds limits or a deferral: forgets this handle's answer,
    /// and waits until every other handle's has expired (module docs).
    async fn limits_changed(&self) {
        if let Ok(mut since) = self.inner.no_limits_since.lock() {
            *since = None;
        }
        self.inner.limits_seen.store(true, Ordering::Relaxed);
        tokio::time::sleep(LIMITS_TTL).await;
    }

    /// Keeps the limit keys, fairness keys, weights and start tags (`ftags`, one per
    /// item) of `inserted`, in the enqueue's transaction on `conn`, before anything
    /// can claim them. Writes nothing when none has any.
    pub(crate) async fn keep_limit_keys(
        &self,
        conn: &mut PgConnection,
        inserted: &[&NewItem],
        ftags: &[Option<i64>],
    ) -> Result<()> {
        // Unkeyed items of limited queues join `items_claim_key` (migration 13). The
        // enqueue asked whether the schema has limits (`fair_tags`) just before.
        if !self.trusts_no_limits() {
            let unkeyed: Vec<Uuid> = inserted
                .iter()
                .filter(|it| it.limit_key.is_none())
                .map(|it| *it.id.as_uuid())
                .collect();
            if !unkeyed.is_empty() {
                self.query(&self.inner.limits_sql.mark)
                    .bind(&unkeyed)
                    .execute(&mut *conn)
                    .await
                    .map_err(map)?;
            }
        }
        let keyed: Vec<(&&NewItem, Option<i64>)> = inserted
            .iter()
            .zip(ftags.iter().copied())
            .filter(|(it, tag)| {
                it.limit_key.is_some() || it.fairness_key.is_some() || tag.is_some()
            })
            .collect();
        if keyed.is_empty() {
            return Ok(());
        }
        let ids: Vec<Uuid> = keyed.iter().map(|(it, _)| *it.id.as_uuid()).collect();
        let limit_keys: Vec<Option<&str>> = keyed
            .iter()
            .map(|(it, _)| it.limit_key.as_ref().map(LimitKey::as_str))
            .collect();
        let fairness_keys: Vec<Option<&str>> = keyed
            .iter()
            .map(|(it, _)| it.fairness_key.as_ref().map(FairnessKey::as_str))
            .collect();
        let weights: Vec<i32> = keyed
            .iter()
            .map(|(it, _)| i32::try_from(it.weight).unwrap_or(i32::MAX))
            .collect();
        let tags: Vec<Option<i64>> = keyed.iter().map(|(_, t)| *t).collect();
        self.query(&self.inner.limits_sql.keys)
            .bind(&ids)
            .bind(&limit_keys)
            .bind(&fairness_keys)
            .bind(&weights)
            .bind(&tags)
            .execute(conn)
            .await
            .map_err(map)?;
        Ok(())
    }

    /// Reads `queue`'s limits on `conn`, overrides and weights included.
    async fn read_limits(
        &self,
        conn: &mut PgConnection,
        queue: &str,
    ) -> Result<Option<QueueLimits>> {
        let sql = &self.inner.limits_sql;
        let row: Option<PgRow> = self
            .query(&sql.get)
            .bind(queue)
            .fetch_optional(&mut *conn)
            .await
            .map_err(map)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let get = |c: &str| row.try_get::<Option<i64>, _>(c).map_err(map);
        let mut limits = QueueLimits::new();
        limits.concurrency = get("concurrency")?.map(count_u32);
        limits.key_concurrency = get("key_concurrency")?.map(count_u32);
        limits.rate = rate_of(get("rate_starts")?, get("rate_per")?);
        limits.key_rate = rate_of(get("key_rate_starts")?, get("key_rate_per")?);
        let keys = self
            .query(&sql.get_keys)
            .bind(queue)
            .fetch_all(&mut *conn)
            .await
            .map_err(map)?;
        for r in keys {
            let kind: String = r.try_get("kind").map_err(map)?;
            let key: String = r.try_get("key").map_err(map)?;
            let value = count_u32(r.try_get("value").map_err(map)?);
            if kind == "override" {
                limits.key_overrides.insert(LimitKey::new(key)?, value);
            } else {
                limits.weights.insert(FairnessKey::new(key)?, value);
            }
        }
        Ok(Some(limits))
    }
}

#[async_trait]
impl Limiting for PgStore {
    async fn limits_set(&self, params: Valid<LimitsParams>) -> Result<Option<QueueLimits>> {
        let sql = &self.inner.limits_sql;
        let (q, limits) = (params.queue.as_str(), &params.limits);
        let mut tx = self.begin().await?;
        let before = self.read_limits(&mut tx, q).await?;
        let (rs, rp) = split(limits.rate);
        let (krs, krp) = split(limits.key_rate);
        self.query(&sql.set)
            .bind(q)
            .bind(limits.concurrency.map(i64::from))
            .bind(limits.key_concurrency.map(i64::from))
            .bind(rs)
            .bind(rp)
            .bind(krs)
            .bind(krp)
            .execute(&mut *tx)
            .await
            .map_err(map)?;
        self.query(&sql.delete_keys)
            .bind(q)
            .execute(&mut *tx)
            .await
            .map_err(map)?;
        let (mut kinds, mut keys, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for (k, n) in &limits.key_overrides {
            kinds.push("override");
            keys.push(k.as_str());
            values.push(i64::from(*n));
        }
        for (k, w) in &limits.weights {
            kinds.push("weight");
            keys.push(k.as_str());
            values.push(i64::from(*w));
        }
        if !kinds.is_empty() {
            self.query(&sql.insert_keys)
                .bind(q)
                .bind(&kinds)
                .bind(&keys)
                .bind(&values)
                .execute(&mut *tx)
                .await
                .map_err(map)?;
        }
        self.query(&sql.mark_queue)
            .bind(q)
            .execute(&mut *tx)
            .await
            .map_err(map)?;
        tx.commit().await.map_err(map)?;
        self.limits_changed().await;
        // Again once every handle has seen the limits: an enqueue that trusted the
        // schema to have none, or did not see them yet, marked nothing.
        self.execute(self.query(&sql.mark_queue).bind(q)).await?;
        // Raised limits may free slots: a waiting worker claims again.
        self.notify_local();
        self.wake_others();
        Ok(before)
    }

    async fn limits_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        let mut tx = self.begin().await?;
        let got = self.read_limits(&mut tx, queue.as_str()).await?;
        tx.commit().await.map_err(map)?;
        Ok(got)
    }

    async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
        let had = self
            .execute(
                self.query(&self.inner.limits_sql.clear)
                    .bind(queue.as_str()),
            )
            .await?;
        self.notify_local();
        self.wake_others();
        Ok(had > 0)
    }

    async fn limits_list(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        let mut tx = self.begin().await?;
        let names: Vec<String> = self
            .query(&self.inner.limits_sql.list)
            .fetch_all(&mut *tx)
            .await
            .map_err(map)?
            .iter()
            .map(|r| r.try_get::<String, _>("queue"))
            .collect::<std::result::Result<_, _>>()
            .map_err(map)?;
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            if let Some(limits) = self.read_limits(&mut tx, &name).await? {
                out.push((QueueName::new(name)?, limits));
            }
        }
        tx.commit().await.map_err(map)?;
        Ok(out)
    }

    async fn limits_defer(&self, params: Valid<DeferParams>) -> Result<()> {
        let key = params.key.as_ref().map_or(QUEUE_KEY, LimitKey::as_str);
        let until = self.now() + params.delay;
        self.execute(
            self.query(&self.inner.limits_sql.defer)
                .bind(params.queue.as_str())
                .bind(key)
                .bind(until.as_micros()),
        )
        .await?;
        self.limits_changed().await;
        Ok(())
    }

    async fn limits_wait(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        // A worker asks after every empty claim: with no limits in the schema, nothing
        // waits on time, and it costs no round trip.
        if self.trusts_no_limits() {
            return Ok(None);
        }
        let now = self.now();
        let names: Vec<&str> = queues.iter().map(QueueName::as_str).collect();
        let row = self
            .fetch_one(
                self.query(&self.inner.limits_sql.wait)
                    .bind(&names)
                    .bind(now.as_micros()),
            )
            .await?;
        let at: Option<i64> = row.try_get("at").map_err(map)?;
        Ok(at.map(|t| {
            Duration::from_micros(u64::try_from(t.saturating_sub(now.as_micros())).unwrap_or(0))
        }))
    }
}
