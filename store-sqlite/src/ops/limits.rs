//! Queue limits (G16 concurrency, G17 rate) as SQL: the gate a claim passes each
//! candidate through, and the `limits_*` operations.
//!
//! Every count is read inside the claim's `BEGIN IMMEDIATE` transaction, so no other
//! writer can change it before the claim commits: the running count of a queue or key
//! is `count(*)` of its `running` rows (a slot is a lease; only the rows' own fenced
//! finalize, recovery or eviction changes them), and a rate's room is `starts - count`
//! of its starts in the last period. The claim adds what it takes as it goes.

use std::collections::HashMap;
use std::time::Duration;

use rusqlite::{params, OptionalExtension};
use tenure_core::{
    duration_micros, DeferParams, FairnessKey, LimitKey, QueueLimits, QueueName, Rate, Timestamp,
};

use super::{Cx, OpResult};

/// The key of a queue's own rate and deferral in `tenure_limit_starts` and
/// `tenure_limit_defers` (no limit key is empty).
const QUEUE_KEY: &str = "";

/// What the gate says of a candidate.
pub(crate) enum Admit {
    /// Claim it.
    Open,
    /// The queue is at a bound: claim nothing more from it.
    QueueShut,
    /// Its key is at a bound: pass it over.
    KeyShut,
}

#[derive(Default)]
struct KeyCount {
    running: u64,
    starts: u64,
    limit: Option<u32>,
    deferred: bool,
}

/// One queue's limits for the length of one claim.
pub(crate) struct Gate {
    queue: String,
    now: Timestamp,
    config: QueueLimits,
    deferred: HashMap<String, i64>,
    queue_running: u64,
    queue_starts: u64,
    keys: HashMap<String, KeyCount>,
    configured: bool,
}

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

/// Reads `queue`'s limits, overrides and weights included.
fn read_config(cx: &Cx<'_>, queue: &str) -> OpResult<Option<QueueLimits>> {
    let row = cx
        .conn
        .prepare_cached(
            "SELECT concurrency, key_concurrency, rate_starts, rate_per, key_rate_starts,
                    key_rate_per
             FROM tenure_limits WHERE queue = ?1",
        )?
        .query_row([queue], |r| {
            Ok((
                r.get::<_, Option<i64>>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, Option<i64>>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, Option<i64>>(5)?,
            ))
        })
        .optional()?;
    let Some((c, kc, rs, rp, krs, krp)) = row else {
        return Ok(None);
    };
    let mut limits = QueueLimits::new();
    limits.concurrency = c.map(count_u32);
    limits.key_concurrency = kc.map(count_u32);
    limits.rate = rate_of(rs, rp);
    limits.key_rate = rate_of(krs, krp);
    let mut keys = cx
        .conn
        .prepare_cached("SELECT kind, key, value FROM tenure_limit_keys WHERE queue = ?1")?;
    let mut rows = keys.query([queue])?;
    while let Some(row) = rows.next()? {
        let kind: String = row.get(0)?;
        let key: String = row.get(1)?;
        let value = count_u32(row.get(2)?);
        if kind == "override" {
            limits.key_overrides.insert(LimitKey::new(key)?, value);
        } else {
            limits.weights.insert(FairnessKey::new(key)?, value);
        }
    }
    Ok(Some(limits))
}

/// Forgets the starts of `key` that left the window of `per`, and counts the rest.
fn starts_in_window(cx: &Cx<'_>, queue: &str, key: &str, per: Duration) -> OpResult<u64> {
    let from = cx.now.saturating_sub(per).as_micros();
    cx.conn
        .prepare_cached(
            "DELETE FROM tenure_limit_starts WHERE queue = ?1 AND key = ?2 AND at <= ?3",
        )?
        .execute(params![queue, key, from])?;
    let n: i64 = cx
        .conn
        .prepare_cached("SELECT count(*) FROM tenure_limit_starts WHERE queue = ?1 AND key = ?2")?
        .query_row(params![queue, key], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

impl Gate {
    /// The gate of `queue` for a claim at `cx.now`, or `None` when the queue has no
    /// limits and no deferral (the claim then takes the fast path it always took).
    pub(crate) fn load(cx: &Cx<'_>, queue: &QueueName) -> OpResult<Option<Gate>> {
        let q = queue.as_str();
        let mut deferred = HashMap::new();
        {
            let mut stmt = cx.conn.prepare_cached(
                "SELECT key, until FROM tenure_limit_defers WHERE queue = ?1 AND until > ?2",
            )?;
            let mut rows = stmt.query(params![q, cx.now.as_micros()])?;
            while let Some(row) = rows.next()? {
                deferred.insert(row.get::<_, String>(0)?, row.get::<_, i64>(1)?);
            }
        }
        let config = read_config(cx, q)?;
        if config.is_none() && deferred.is_empty() {
            return Ok(None);
        }
        let configured = config.is_some();
        let config = config.unwrap_or_default();
        let queue_running = if config.concurrency.is_some() {
            let n: i64 = cx
                .conn
                .prepare_cached(
                    "SELECT count(*) FROM tenure_items INDEXED BY tenure_items_running_limit
                     WHERE queue = ?1 AND state = 'running'",
                )?
                .query_row([q], |r| r.get(0))?;
            u64::try_from(n).unwrap_or(0)
        } else {
            0
        };
        let queue_starts = match config.rate {
            Some(rate) => starts_in_window(cx, q, QUEUE_KEY, rate.per)?,
            None => 0,
        };
        Ok(Some(Gate {
            queue: q.to_owned(),
            now: cx.now,
            config,
            deferred,
            queue_running,
            queue_starts,
            keys: HashMap::new(),
            configured,
        }))
    }

    /// Whether the queue has a limits row (not only a deferral): then all its items
    /// are in `tenure_items_ready_key` (schema version 9).
    pub(crate) fn configured(&self) -> bool {
        self.configured
    }

    fn key(&mut self, cx: &Cx<'_>, key: &str) -> OpResult<&mut KeyCount> {
        if !self.keys.contains_key(key) {
            let mut k = KeyCount {
                deferred: self.deferred.contains_key(key),
                ..KeyCount::default()
            };
            k.limit = match LimitKey::new(key) {
                Ok(lk) => self.config.key_limit(&lk),
                Err(_) => self.config.key_concurrency,
            };
            if k.limit.is_some() {
                let n: i64 = cx
                    .conn
                    .prepare_cached(
                        "SELECT count(*) FROM tenure_items INDEXED BY tenure_items_running_limit
                         WHERE queue = ?1 AND limit_key = ?2 AND state = 'running'",
                    )?
                    .query_row(params![self.queue, key], |r| r.get(0))?;
                k.running = u64::try_from(n).unwrap_or(0);
            }
            if let Some(rate) = self.config.key_rate {
                k.starts = starts_in_window(cx, &self.queue, key, rate.per)?;
            }
            self.keys.insert(key.to_owned(), k);
        }
        self.keys
            .get_mut(key)
            .ok_or_else(|| tenure_core::Error::internal(crate::error::STORE, "key count").into())
    }

    /// The gate's answer for a candidate of `key`.
    pub(crate) fn admit(&mut self, cx: &Cx<'_>, key: Option<&str>) -> OpResult<Admit> {
        if self.deferred.contains_key(QUEUE_KEY) {
            return Ok(Admit::QueueShut);
        }
        if self
            .config
            .concurrency
            .is_some_and(|n| self.queue_running >= u64::from(n))
        {
            return Ok(Admit::QueueShut);
        }
        if self
            .config
            .rate
            .is_some_and(|r| self.queue_starts >= u64::from(r.starts))
        {
            return Ok(Admit::QueueShut);
        }
        let Some(key) = key else {
            return Ok(Admit::Open);
        };
        let key_rate = self.config.key_rate;
        let k = self.key(cx, key)?;
        let shut = k.deferred
            || k.limit.is_some_and(|n| k.running >= u64::from(n))
            || key_rate.is_some_and(|r| k.starts >= u64::from(r.starts));
        Ok(if shut { Admit::KeyShut } else { Admit::Open })
    }

    /// Counts a claim of a candidate of `key` the gate admitted: a slot, and a start
    /// recorded for each rate.
    pub(crate) fn taken(&mut self, cx: &Cx<'_>, key: Option<&str>) -> OpResult<()> {
        self.queue_running += 1;
        let at = self.now.as_micros();
        let mut record = cx.conn.prepare_cached(
            "INSERT INTO tenure_limit_starts (queue, key, at) VALUES (?1, ?2, ?3)",
        )?;
        if self.config.rate.is_some() {
            self.queue_starts += 1;
            record.execute(params![self.queue, QUEUE_KEY, at])?;
        }
        if let Some(key) = key {
            let key_rate = self.config.key_rate.is_some();
            let k = self.key(cx, key)?;
            k.running += 1;
            if key_rate {
                k.starts += 1;
                record.execute(params![self.queue, key, at])?;
            }
        }
        Ok(())
    }
}

/// The limit key of the row `seq` (a candidate the gate must judge).
pub(crate) fn limit_key_of(cx: &Cx<'_>, seq: i64) -> OpResult<Option<String>> {
    Ok(cx
        .conn
        .prepare_cached("SELECT limit_key FROM tenure_items WHERE seq = ?1")?
        .query_row([seq], |r| r.get(0))?)
}

fn micros(d: Duration) -> i64 {
    duration_micros(d)
}

/// [`Store::limits_set`](tenure_core::Store::limits_set); the caller validated them.
pub(crate) fn limits_set(
    cx: &Cx<'_>,
    queue: &QueueName,
    limits: &QueueLimits,
) -> OpResult<Option<QueueLimits>> {
    let q = queue.as_str();
    let before = read_config(cx, q)?;
    let (rs, rp) = match limits.rate {
        Some(r) => (Some(i64::from(r.starts)), Some(micros(r.per))),
        None => (None, None),
    };
    let (krs, krp) = match limits.key_rate {
        Some(r) => (Some(i64::from(r.starts)), Some(micros(r.per))),
        None => (None, None),
    };
    cx.conn
        .prepare_cached(
            "INSERT INTO tenure_limits (queue, concurrency, key_concurrency, rate_starts,
                 rate_per, key_rate_starts, key_rate_per)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (queue) DO UPDATE SET concurrency = excluded.concurrency,
                 key_concurrency = excluded.key_concurrency,
                 rate_starts = excluded.rate_starts, rate_per = excluded.rate_per,
                 key_rate_starts = excluded.key_rate_starts,
                 key_rate_per = excluded.key_rate_per",
        )?
        .execute(params![
            q,
            limits.concurrency,
            limits.key_concurrency,
            rs,
            rp,
            krs,
            krp
        ])?;
    cx.conn
        .prepare_cached("DELETE FROM tenure_limit_keys WHERE queue = ?1")?
        .execute([q])?;
    // The queue's waiting items join `tenure_items_ready_key` (schema version 9), so
    // the claim's key walk sees all of them. Once: later enqueues set `lq` themselves.
    if before.is_none() {
        cx.conn
            .prepare_cached(
                "UPDATE tenure_items SET lq = 1 WHERE queue = ?1 AND lq = 0 AND state <> 'done'",
            )?
            .execute([q])?;
    }
    let mut insert = cx.conn.prepare_cached(
        "INSERT INTO tenure_limit_keys (queue, kind, key, value) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (k, n) in &limits.key_overrides {
        insert.execute(params![q, "override", k.as_str(), n])?;
    }
    for (k, w) in &limits.weights {
        insert.execute(params![q, "weight", k.as_str(), w])?;
    }
    Ok(before)
}

/// [`Store::limits_get`](tenure_core::Store::limits_get).
pub(crate) fn limits_get(cx: &Cx<'_>, queue: &QueueName) -> OpResult<Option<QueueLimits>> {
    read_config(cx, queue.as_str())
}

/// [`Store::limits_clear`](tenure_core::Store::limits_clear): the limits, their starts
/// and the queue's deferrals go.
pub(crate) fn limits_clear(cx: &Cx<'_>, queue: &QueueName) -> OpResult<bool> {
    let q = queue.as_str();
    let had = cx
        .conn
        .prepare_cached("DELETE FROM tenure_limits WHERE queue = ?1")?
        .execute([q])?;
    for sql in [
        "DELETE FROM tenure_limit_keys WHERE queue = ?1",
        "DELETE FROM tenure_limit_starts WHERE queue = ?1",
        "DELETE FROM tenure_limit_defers WHERE queue = ?1",
    ] {
        cx.conn.prepare_cached(sql)?.execute([q])?;
    }
    Ok(had > 0)
}

/// [`Store::limits_list`](tenure_core::Store::limits_list), by queue name.
pub(crate) fn limits_list(cx: &Cx<'_>) -> OpResult<Vec<(QueueName, QueueLimits)>> {
    let names: Vec<String> = cx
        .conn
        .prepare_cached("SELECT queue FROM tenure_limits ORDER BY queue")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        if let Some(limits) = read_config(cx, &name)? {
            out.push((QueueName::new(name)?, limits));
        }
    }
    Ok(out)
}

/// [`Store::limits_defer`](tenure_core::Store::limits_defer): never shortens an
/// earlier deferral.
pub(crate) fn limits_defer(cx: &Cx<'_>, params: &DeferParams) -> OpResult<()> {
    let key = params.key.as_ref().map_or(QUEUE_KEY, LimitKey::as_str);
    let until = (cx.now + params.delay).as_micros();
    cx.conn
        .prepare_cached(
            "INSERT INTO tenure_limit_defers (queue, key, until) VALUES (?1, ?2, ?3)
             ON CONFLICT (queue, key) DO UPDATE SET until = max(until, excluded.until)",
        )?
        .execute(params![params.queue.as_str(), key, until])?;
    Ok(())
}

/// [`Store::limits_wait`](tenure_core::Store::limits_wait): the soonest of the
/// queues' deferral ends, the instants their exhausted rates allow a start again, and,
/// under a concurrency limit, their running leases' expiries; each after `now`. It may
/// answer earlier than a start is allowed (an extra empty poll), never later.
pub(crate) fn limits_wait(cx: &Cx<'_>, queues: &[QueueName]) -> OpResult<Option<Duration>> {
    let now = cx.now.as_micros();
    let mut at: Option<i64> = None;
    let mut soonest = |t: Option<i64>| {
        if let Some(t) = t.filter(|t| *t > now) {
            at = Some(at.map_or(t, |a| a.min(t)));
        }
    };
    for queue in queues {
        let q = queue.as_str();
        soonest(
            cx.conn
                .prepare_cached(
                    "SELECT min(until) FROM tenure_limit_defers WHERE queue = ?1 AND until > ?2",
                )?
                .query_row(params![q, now], |r| r.get(0))?,
        );
        let Some(config) = read_config(cx, q)? else {
            continue;
        };
        for (rate, queue_only) in [(config.rate, true), (config.key_rate, false)] {
            let Some(rate) = rate else { continue };
            let per = micros(rate.per);
            let sql = if queue_only {
                "SELECT min(first) FROM (SELECT min(at) AS first, count(*) AS n
                 FROM tenure_limit_starts WHERE queue = ?1 AND key = '' AND at > ?2
                 GROUP BY key) WHERE n >= ?3"
            } else {
                "SELECT min(first) FROM (SELECT min(at) AS first, count(*) AS n
                 FROM tenure_limit_starts WHERE queue = ?1 AND key <> '' AND at > ?2
                 GROUP BY key) WHERE n >= ?3"
            };
            let first: Option<i64> = cx
                .conn
                .prepare_cached(sql)?
                .query_row(params![q, now - per, rate.starts], |r| r.get(0))?;
            soonest(first.map(|t| t + per));
        }
        if config.concurrency.is_some()
            || config.key_concurrency.is_some()
            || !config.key_overrides.is_empty()
        {
            soonest(
                cx.conn
                    .prepare_cached(
                        "SELECT min(lease_expires_at) FROM tenure_items
                         INDEXED BY tenure_items_running_limit
                         WHERE queue = ?1 AND state = 'running'",
                    )?
                    .query_row([q], |r| r.get(0))?,
            );
        }
    }
    Ok(at.map(|t| Duration::from_micros(u64::try_from(t - now).unwrap_or(0))))
}

/// One unit of fair-share work in tag units: an item of weight `w` moves its tenant's
/// finish tag on by `TAG_UNIT / w` (G18).
const TAG_UNIT: i64 = 1 << 24;

/// Fair shares of the queues one enqueue call writes to (G18), and whether they have
/// limits (G16).
#[derive(Default)]
pub(crate) struct FairTags {
    /// Per queue, its virtual time once it is fair.
    vtime: HashMap<String, Option<i64>>,
    /// Per queue, whether it has limits (its items go in `tenure_items_ready_key`).
    limited: HashMap<String, bool>,
}

impl FairTags {
    /// The `lq` of a new item of `queue`: 1 when the queue has limits (schema version
    /// 9), read once per queue and enqueue call.
    pub(crate) fn lq(&mut self, cx: &Cx<'_>, queue: &QueueName) -> OpResult<i64> {
        let q = queue.as_str();
        if let Some(l) = self.limited.get(q) {
            return Ok(i64::from(*l));
        }
        let l = cx
            .conn
            .prepare_cached("SELECT 1 FROM tenure_limits WHERE queue = ?1")?
            .exists([q])?;
        self.limited.insert(q.to_owned(), l);
        Ok(i64::from(l))
    }

    /// The `ftag` of a new item: 0 in a queue that never saw a fairness key, else its
    /// start tag plus one, moving its tenant's finish tag on. The first item with a
    /// fairness key makes its queue fair, tagging its unfinished items 1.
    pub(crate) fn tag(
        &mut self,
        cx: &Cx<'_>,
        queue: &QueueName,
        tenant: Option<&FairnessKey>,
        declared: u32,
    ) -> OpResult<i64> {
        let q = queue.as_str();
        if !self.vtime.contains_key(q) {
            let v: Option<i64> = cx
                .conn
                .prepare_cached("SELECT vtime FROM tenure_fair_queues WHERE queue = ?1")?
                .query_row([q], |r| r.get(0))
                .optional()?;
            self.vtime.insert(q.to_owned(), v);
        }
        let vtime = match self.vtime.get(q).copied().flatten() {
            Some(v) => v,
            None if tenant.is_none() => return Ok(0),
            None => {
                cx.conn
                    .prepare_cached("INSERT INTO tenure_fair_queues (queue, vtime) VALUES (?1, 0)")?
                    .execute([q])?;
                cx.conn
                    .prepare_cached(
                        "UPDATE tenure_items SET ftag = 1
                         WHERE queue = ?1 AND ftag = 0 AND state <> 'done'",
                    )?
                    .execute([q])?;
                self.vtime.insert(q.to_owned(), Some(0));
                0
            }
        };
        let name = tenant.map_or("", FairnessKey::as_str);
        let configured: Option<i64> = match tenant {
            Some(t) => cx
                .conn
                .prepare_cached(
                    "SELECT value FROM tenure_limit_keys
                     WHERE queue = ?1 AND kind = 'weight' AND key = ?2",
                )?
                .query_row(params![q, t.as_str()], |r| r.get(0))
                .optional()?,
            None => None,
        };
        let weight = configured.unwrap_or(i64::from(declared)).max(1);
        let finish: i64 = cx
            .conn
            .prepare_cached("SELECT finish FROM tenure_fair WHERE queue = ?1 AND tenant = ?2")?
            .query_row(params![q, name], |r| r.get(0))
            .optional()?
            .unwrap_or(0);
        let start = finish.max(vtime);
        cx.conn
            .prepare_cached(
                "INSERT INTO tenure_fair (queue, tenant, finish) VALUES (?1, ?2, ?3)
                 ON CONFLICT (queue, tenant) DO UPDATE SET finish = excluded.finish",
            )?
            .execute(params![q, name, start.saturating_add(TAG_UNIT / weight)])?;
        Ok(start + 1)
    }
}

/// Whether `queue` keeps fair shares (its claims walk `tenure_items_ready_fair`).
pub(crate) fn is_fair(cx: &Cx<'_>, queue: &str) -> OpResult<bool> {
    Ok(cx
        .conn
        .prepare_cached("SELECT 1 FROM tenure_fair_queues WHERE queue = ?1")?
        .exists([queue])?)
}

/// A claim of a fair queue took items tagged up to `ftag`: its virtual time follows.
pub(crate) fn served(cx: &Cx<'_>, queue: &str, ftag: i64) -> OpResult<()> {
    cx.conn
        .prepare_cached("UPDATE tenure_fair_queues SET vtime = max(vtime, ?2) WHERE queue = ?1")?
        .execute(params![queue, ftag - 1])?;
    Ok(())
}
