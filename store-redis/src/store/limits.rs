//! Queue limits (G16 concurrency, G17 rate): the `limits_*` operations of
//! [`Store`](tenure_core::Store), each one library function (`scripts/limits_*.lua`).
//! The gate itself is in `scripts/claim.lua`, in the claim's own atomic step.

use std::collections::BTreeMap;
use std::time::Duration;
use tenure_core::async_trait;
use tenure_core::contract::{Limiting, Valid};

use redis::Value;
use tenure_core::{
    duration_micros, DeferParams, Error, FairnessKey, LimitKey, LimitsParams, QueueLimits,
    QueueName, Rate, Result,
};

use crate::error::bad_reply;
use crate::scripts::SCRIPTS;

use super::{micros, RedisStore};

/// A number of the stored limits, or `None` for '' (unset).
fn number(v: &Value, what: &str) -> Result<Option<u64>> {
    let text: String = redis::from_redis_value(v).map_err(|_| bad_reply(what))?;
    if text.is_empty() {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|_| bad_reply(format!("{what} is {text:?}")))
}

fn count(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn rate(starts: Option<u64>, per: Option<u64>) -> Option<Rate> {
    match (starts, per) {
        (Some(s), Some(p)) => Some(Rate::new(count(s), Duration::from_micros(p))),
        _ => None,
    }
}

/// The flat (key, value) pairs of an `HGETALL`.
fn pairs(v: &Value) -> Result<Vec<(String, u32)>> {
    let flat: Vec<String> =
        redis::from_redis_value(v).map_err(|_| bad_reply("limits answered bad pairs"))?;
    flat.chunks(2)
        .map(|c| match c {
            [k, n] => n
                .parse::<u32>()
                .map(|n| (k.clone(), n))
                .map_err(|_| bad_reply(format!("a limit of {n:?}"))),
            _ => Err(bad_reply("limits answered an odd list")),
        })
        .collect()
}

/// Decodes lib.lua's `limits_of`: nil, or {c, kc, rs, rp, krs, krp, overrides, weights}.
fn limits_of(v: &Value) -> Result<Option<QueueLimits>> {
    let items = match v {
        Value::Nil => return Ok(None),
        Value::Array(items) => items,
        other => return Err(bad_reply(format!("limits answered {other:?}"))),
    };
    let [c, kc, rs, rp, krs, krp, overrides, weights] = items.as_slice() else {
        return Err(bad_reply("limits answered a list of another length"));
    };
    let mut limits = QueueLimits::new();
    limits.concurrency = number(c, "concurrency")?.map(count);
    limits.key_concurrency = number(kc, "key_concurrency")?.map(count);
    limits.rate = rate(number(rs, "rate")?, number(rp, "period")?);
    limits.key_rate = rate(number(krs, "key rate")?, number(krp, "key period")?);
    limits.key_overrides = pairs(overrides)?
        .into_iter()
        .map(|(k, n)| Ok((LimitKey::new(k)?, n)))
        .collect::<Result<BTreeMap<_, _>>>()?;
    limits.weights = pairs(weights)?
        .into_iter()
        .map(|(k, w)| Ok((FairnessKey::new(k)?, w)))
        .collect::<Result<BTreeMap<_, _>>>()?;
    Ok(Some(limits))
}

fn opt(n: Option<u32>) -> String {
    n.map_or_else(String::new, |n| n.to_string())
}

fn per(r: Option<Rate>) -> String {
    r.map_or_else(String::new, |r| duration_micros(r.per).to_string())
}

#[async_trait]
impl Limiting for RedisStore {
    /// `Store::limits_set`.
    async fn limits_set(&self, params: Valid<LimitsParams>) -> Result<Option<QueueLimits>> {
        let l = &params.limits;
        let mut inv = self.call(&SCRIPTS.limits_set);
        inv.arg(params.queue.as_str())
            .arg(opt(l.concurrency))
            .arg(opt(l.key_concurrency))
            .arg(opt(l.rate.map(|r| r.starts)))
            .arg(per(l.rate))
            .arg(opt(l.key_rate.map(|r| r.starts)))
            .arg(per(l.key_rate))
            .arg(l.key_overrides.len());
        for (k, n) in &l.key_overrides {
            inv.arg(k.as_str()).arg(*n);
        }
        inv.arg(l.weights.len());
        for (k, w) in &l.weights {
            inv.arg(k.as_str()).arg(*w);
        }
        let before: Value = self.write(&inv).await?;
        self.mark_limited();
        // Raised limits may free slots: a waiting worker claims again.
        self.inner.wake.notify();
        limits_of(&before)
    }

    /// `Store::limits_get`.
    async fn limits_get(&self, queue: &QueueName) -> Result<Option<QueueLimits>> {
        let mut inv = self.call(&SCRIPTS.limits_get);
        inv.arg(queue.as_str());
        let got = limits_of(&self.read::<Value>(&inv).await?)?;
        if got.is_some() {
            self.mark_limited();
        }
        Ok(got)
    }

    /// `Store::limits_clear`.
    async fn limits_clear(&self, queue: &QueueName) -> Result<bool> {
        let mut inv = self.call(&SCRIPTS.limits_clear);
        inv.arg(queue.as_str());
        let had: i64 = self.write(&inv).await?;
        self.inner.wake.notify();
        Ok(had == 1)
    }

    /// `Store::limits_list`.
    async fn limits_list(&self) -> Result<Vec<(QueueName, QueueLimits)>> {
        let inv = self.call(&SCRIPTS.limits_list);
        let answer: Vec<Value> = self.read(&inv).await?;
        let mut out = Vec::with_capacity(answer.len() / 2);
        for pair in answer.chunks(2) {
            let [q, l] = pair else {
                return Err(bad_reply("limits_list answered an odd list"));
            };
            let name: String = redis::from_redis_value(q).map_err(|_| bad_reply("a queue name"))?;
            if let Some(limits) = limits_of(l)? {
                out.push((QueueName::new(name)?, limits));
            }
        }
        Ok(out)
    }

    /// `Store::limits_defer`.
    async fn limits_defer(&self, params: Valid<DeferParams>) -> Result<()> {
        let until = self.inner.clock.now() + params.delay;
        let mut inv = self.call(&SCRIPTS.limits_defer);
        inv.arg(params.queue.as_str())
            .arg(params.key.as_ref().map_or("", LimitKey::as_str))
            .arg(micros(until));
        let _: i64 = self.write(&inv).await?;
        self.mark_limited();
        Ok(())
    }

    /// `Store::limits_wait`.
    async fn limits_wait(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        let now = self.inner.clock.now();
        let mut inv = self.call(&SCRIPTS.limits_wait);
        inv.arg(micros(now)).arg(queues.len());
        for q in queues {
            inv.arg(q.as_str());
        }
        let at: Option<i64> = self.read(&inv).await?;
        let Some(at) = at else { return Ok(None) };
        self.mark_limited();
        let wait = u64::try_from(at - micros(now))
            .map_err(|_| Error::internal(crate::STORE, "limits_wait answered the past"))?;
        Ok(Some(Duration::from_micros(wait)))
    }
}

impl RedisStore {
    /// Limits were set, read or waited on through this handle (G16): a finish may free
    /// a slot a worker waits for, so finishes fire the wake signal.
    fn mark_limited(&self) {
        self.inner
            .limited
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// After a finish: with limits in use through this handle, fires the wake signal,
    /// so a worker waiting for the slot claims at once (G16).
    pub(super) fn slot_freed(&self) {
        if self
            .inner
            .limited
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            self.inner.wake.notify();
        }
    }
}
