//! Work over time (the contract's `History` group): one additive upsert of every
//! entry, a bounded prune of old minutes, and a read by primary key range. The
//! statements are in `sql/history/`, loaded per call (a call every few seconds per
//! worker, never on the claim or finalize path).

use sqlx::Row;
use tenure_core::async_trait;
use tenure_core::contract::{History, Valid};
use tenure_core::{
    HistoryAddParams, HistoryCounts, HistoryParams, HistoryPoint, Result, Timestamp, HISTORY_KEEP,
};

use super::PgStore;
use crate::error::map;

/// Deletes at most this many old minutes per call.
const PRUNE_BATCH: i64 = 1_000;

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

#[async_trait]
impl History for PgStore {
    /// `Store::history_add`.
    async fn history_add(&self, params: Valid<HistoryAddParams>) -> Result<()> {
        let schema = &self.inner.schema;
        let add = crate::sql::load(include_str!("../../sql/history/add.sql"), schema);
        let prune = crate::sql::load(include_str!("../../sql/history/prune.sql"), schema);
        let e = &params.entries;
        let queues: Vec<&str> = e.iter().map(|e| e.queue.as_str()).collect();
        let minutes: Vec<i64> = e.iter().map(|e| e.minute.as_micros()).collect();
        let finished: Vec<i64> = e.iter().map(|e| to_i64(e.counts.finished)).collect();
        let failed: Vec<i64> = e.iter().map(|e| to_i64(e.counts.failed)).collect();
        let dead: Vec<i64> = e.iter().map(|e| to_i64(e.counts.dead)).collect();
        let newest = e.iter().map(|e| e.minute).max().unwrap_or(Timestamp::EPOCH);
        self.execute(
            self.query(&add)
                .bind(&queues)
                .bind(&minutes)
                .bind(&finished)
                .bind(&failed)
                .bind(&dead),
        )
        .await?;
        self.execute(
            self.query(&prune)
                .bind(newest.saturating_sub(HISTORY_KEEP).as_micros())
                .bind(PRUNE_BATCH),
        )
        .await?;
        Ok(())
    }

    /// `Store::history`.
    async fn history(&self, params: Valid<HistoryParams>) -> Result<Vec<HistoryPoint>> {
        let read = crate::sql::load(
            include_str!("../../sql/history/read.sql"),
            &self.inner.schema,
        );
        let rows = self
            .fetch_all(
                self.query(&read)
                    .bind(params.queue.as_str())
                    .bind(params.since.as_micros())
                    .bind(params.until.as_micros()),
            )
            .await?;
        rows.iter()
            .map(|r| {
                let get = |i: usize| r.try_get::<i64, _>(i).map_err(map);
                Ok(HistoryPoint::new(
                    Timestamp::from_micros(get(0)?),
                    HistoryCounts::new(to_u64(get(1)?), to_u64(get(2)?), to_u64(get(3)?)),
                ))
            })
            .collect()
    }
}
