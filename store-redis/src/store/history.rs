//! Work over time (the contract's `History` group), each one library function
//! (`scripts/history_add.lua`, `scripts/history.lua`).
//!
//! Per queue, `{p}:hi:<queue>` (hash: `<minute>:f`, `<minute>:x`, `<minute>:d`, the
//! sums of finished, failed and dead attempts) and `{p}:hm:<queue>` (zset: the
//! minutes it holds), both under the prefix's hash tag like every other key.

use redis::Value;
use tenure_core::async_trait;
use tenure_core::contract::{History, Valid};
use tenure_core::{
    HistoryAddParams, HistoryCounts, HistoryParams, HistoryPoint, Result, Timestamp, HISTORY_KEEP,
};

use super::{u64_of, RedisStore};
use crate::error::bad_reply;
use crate::scripts::SCRIPTS;

fn number(v: &Value) -> Result<i64> {
    redis::FromRedisValue::from_redis_value(v)
        .map_err(|_| bad_reply("history answered a non-number"))
}

#[async_trait]
impl History for RedisStore {
    /// `Store::history_add`.
    async fn history_add(&self, params: Valid<HistoryAddParams>) -> Result<()> {
        let newest = params
            .entries
            .iter()
            .map(|e| e.minute)
            .max()
            .unwrap_or(Timestamp::EPOCH);
        let mut inv = self.call(&SCRIPTS.history_add);
        inv.arg(newest.saturating_sub(HISTORY_KEEP).as_micros());
        for e in &params.entries {
            inv.arg(e.queue.as_str())
                .arg(e.minute.as_micros())
                .arg(e.counts.finished)
                .arg(e.counts.failed)
                .arg(e.counts.dead);
        }
        let _: Value = self.write(&inv).await?;
        Ok(())
    }

    /// `Store::history`.
    async fn history(&self, params: Valid<HistoryParams>) -> Result<Vec<HistoryPoint>> {
        let mut inv = self.call(&SCRIPTS.history);
        inv.arg(params.queue.as_str())
            .arg(params.since.as_micros())
            .arg(params.until.as_micros());
        let answer: Vec<Value> = self.read(&inv).await?;
        answer
            .chunks(4)
            .map(|c| {
                let [m, f, x, d] = c else {
                    return Err(bad_reply("history answered the wrong shape"));
                };
                Ok(HistoryPoint::new(
                    Timestamp::from_micros(number(m)?),
                    HistoryCounts::new(u64_of(number(f)?), u64_of(number(x)?), u64_of(number(d)?)),
                ))
            })
            .collect()
    }
}
