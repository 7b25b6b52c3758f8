//! The operator's operations: listings, cancel, pause, and dead items by filter.
//!
//! Listings read through `items_list` (queue, state, seq) or, for leases,
//! `items_running` (queue, lease_expires_at), from the cursor's position, without
//! `FOR UPDATE`: under MVCC a reader never blocks a claim and a claim never blocks a
//! reader. A cursor is `p.<seq>` for items and `p.<expiry>.<seq>` for leases.

use sqlx::Row;
use tenure_core::async_trait;
use tenure_core::contract::{Inspect, Valid};
use tenure_core::LimitKey;
use tenure_core::{
    CancelOutcome, CancelParams, Cursor, DeadFilter, DiscardParams, Error, Item, ItemId,
    ItemListParams, ItemPage, ItemState, LeaseInfo, LeaseListParams, LeasePage, LeaseToken,
    ListOrder, ListState, OwnerId, PauseParams, QueueCounts, QueueName, RequeueParams, Result,
    Timestamp,
};
use uuid::Uuid;

use super::{count, PgStore};
use crate::error::map;
use crate::rows::{self, i32_of, u32_of};
use crate::STORE;

/// The statements of the operator's operations, for one schema.
#[derive(Debug)]
pub(crate) struct OpSql {
    item_list_asc: String,
    item_list_desc: String,
    lease_list: String,
    queue_list: String,
    cancel: String,
    cancel_look: String,
    pause: String,
    resume: String,
    dead_matching: String,
}

impl OpSql {
    /// The statements for `s` (already validated), each from `sql/<field>.sql`.
    pub(crate) fn new(s: &str) -> OpSql {
        let load = |file| crate::sql::load(file, s);
        OpSql {
            item_list_asc: load(include_str!("../../sql/item_list_asc.sql")),
            item_list_desc: load(include_str!("../../sql/item_list_desc.sql")),
            lease_list: load(include_str!("../../sql/lease_list.sql")),
            queue_list: load(include_str!("../../sql/queue_list.sql")),
            cancel: load(include_str!("../../sql/cancel.sql")),
            cancel_look: load(include_str!("../../sql/cancel_look.sql")),
            pause: load(include_str!("../../sql/pause.sql")),
            resume: load(include_str!("../../sql/resume.sql")),
            dead_matching: load(include_str!("../../sql/dead_matching.sql")),
        }
    }
}

fn bad_cursor() -> Error {
    Error::invalid("cursor", "was not handed out by a postgres store listing")
}

fn internal(what: impl std::fmt::Display) -> Error {
    Error::internal(STORE, what.to_string())
}

#[async_trait]
impl Inspect for PgStore {
    /// `Store::item_list`.
    async fn item_list(&self, params: Valid<ItemListParams>) -> Result<ItemPage> {
        let now = self.inner.clock.now();
        let after = match &params.cursor {
            Some(c) => c
                .as_str()
                .strip_prefix("p.")
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or_else(bad_cursor)?,
            None if params.order == ListOrder::OldestFirst => i64::MIN,
            None => i64::MAX,
        };
        let due: i32 = match params.state {
            ListState::Ready => 1,
            ListState::Scheduled => 2,
            ListState::Running | ListState::Dead => 0,
        };
        let sql = match params.order {
            ListOrder::OldestFirst => &self.op().item_list_asc,
            ListOrder::NewestFirst => &self.op().item_list_desc,
        };
        let limit = i64::from(params.limit);
        let rows = self
            .fetch_all(
                self.query(sql)
                    .bind(params.queue.as_str())
                    .bind(params.state.item_state().as_str())
                    .bind(due)
                    .bind(now.as_micros())
                    .bind(after)
                    .bind(limit + 1),
            )
            .await?;
        let more = rows.len() as i64 > limit;
        let mut items = Vec::with_capacity(rows.len());
        let mut last = None;
        for row in rows.iter().take(params.limit as usize) {
            last = Some(row.try_get::<i64, _>("seq").map_err(map)?);
            items.push(rows::item(row)?);
        }
        let next = match (more, last) {
            (true, Some(seq)) => Some(Cursor::new(format!("p.{seq}"))?),
            _ => None,
        };
        Ok(ItemPage::new(items, next, now))
    }

    /// `Store::lease_list`.
    async fn lease_list(&self, params: Valid<LeaseListParams>) -> Result<LeasePage> {
        let now = self.inner.clock.now();
        let (at, seq) = match &params.cursor {
            Some(c) => c
                .as_str()
                .strip_prefix("p.")
                .and_then(|s| s.split_once('.'))
                .and_then(|(a, b)| Some((a.parse::<i64>().ok()?, b.parse::<i64>().ok()?)))
                .ok_or_else(bad_cursor)?,
            None => (i64::MIN, i64::MIN),
        };
        let limit = i64::from(params.limit);
        let rows = self
            .fetch_all(
                self.query(&self.op().lease_list)
                    .bind(params.queue.as_str())
                    .bind(at)
                    .bind(seq)
                    .bind(limit + 1),
            )
            .await?;
        let more = rows.len() as i64 > limit;
        let mut leases = Vec::with_capacity(rows.len());
        let mut last = None;
        for row in rows.iter().take(params.limit as usize) {
            let id: Uuid = row.try_get(0).map_err(map)?;
            let owner: Option<String> = row.try_get(2).map_err(map)?;
            let owner = owner
                .map(OwnerId::new)
                .transpose()
                .map_err(internal)?
                .ok_or_else(|| internal(format!("running item {id} has no owner")))?;
            let expires: i64 = row.try_get(3).map_err(map)?;
            let seq: i64 = row.try_get(6).map_err(map)?;
            last = Some((expires, seq));
            leases.push(LeaseInfo::new(
                LeaseToken::new(
                    ItemId::from_uuid(id),
                    u32_of("attempt", row.try_get(1).map_err(map)?)?,
                    tenure_core::LeaseId::from_i64(row.try_get(7).map_err(map)?),
                ),
                params.queue.clone(),
                owner,
                Timestamp::from_micros(expires),
                u32_of("renewals", row.try_get(4).map_err(map)?)?,
                u32_of("max_renewals", row.try_get(5).map_err(map)?)?,
            ));
            // The limit key whose slot the lease holds (G16).
            let limit_key: Option<String> = row.try_get(8).map_err(map)?;
            if let Some(l) = leases.last_mut() {
                l.limit_key = limit_key.map(LimitKey::new).transpose().map_err(internal)?;
            }
        }
        let next = match (more, last) {
            (true, Some((at, seq))) => Some(Cursor::new(format!("p.{at}.{seq}"))?),
            _ => None,
        };
        Ok(LeasePage::new(leases, next, now))
    }

    /// `Store::queue_list`.
    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        let rows = self.fetch_all(self.query(&self.op().queue_list)).await?;
        rows.iter()
            .map(|r| {
                let name: String = r.try_get(0).map_err(map)?;
                QueueName::new(name).map_err(internal)
            })
            .collect()
    }

    /// `Store::item_cancel`.
    async fn item_cancel(&self, params: Valid<CancelParams>) -> Result<Vec<CancelOutcome>> {
        let now = self.inner.clock.now();
        let ids: Vec<Uuid> = params.ids.iter().map(|i| *i.as_uuid()).collect();
        let gone = self
            .finish_with_streams(&self.op().cancel, now, &ids, None)
            .await?;
        let rest: Vec<Uuid> = ids.iter().filter(|i| !gone.contains(i)).copied().collect();
        let mut seen = std::collections::HashMap::new();
        if !rest.is_empty() {
            let rows = self
                .fetch_all(self.query(&self.op().cancel_look).bind(&rest))
                .await?;
            for row in &rows {
                let id: Uuid = row.try_get(0).map_err(map)?;
                let state: String = row.try_get(1).map_err(map)?;
                let outcome = match state.parse::<ItemState>().map_err(internal)? {
                    ItemState::Running => {
                        let owner: Option<String> = row.try_get(3).map_err(map)?;
                        CancelOutcome::Running {
                            attempt: u32_of("attempt", row.try_get(2).map_err(map)?)?,
                            owner: owner
                                .map(OwnerId::new)
                                .transpose()
                                .map_err(internal)?
                                .ok_or_else(|| {
                                    internal(format!("running item {id} has no owner"))
                                })?,
                        }
                    }
                    ItemState::Dead => CancelOutcome::Dead,
                    ItemState::Done => CancelOutcome::Done,
                    // Enqueued under the same id after the delete: not this cancel's item.
                    ItemState::Ready => CancelOutcome::NotFound,
                };
                seen.insert(id, outcome);
            }
        }
        let mut out: Vec<CancelOutcome> = ids
            .iter()
            .map(|id| {
                if gone.contains(id) {
                    CancelOutcome::Cancelled
                } else {
                    seen.remove(id).unwrap_or(CancelOutcome::NotFound)
                }
            })
            .collect();
        if let Some(by) = &params.stop_running {
            // Each running item is failed on the token read, fenced as any fail is.
            for (id, o) in params.ids.iter().zip(out.iter_mut()) {
                if matches!(o, CancelOutcome::Running { .. }) {
                    *o = tenure_core::contract::stop_running(self, *id, by).await?;
                }
            }
        }
        Ok(out)
    }

    /// `Store::queue_pause`.
    async fn queue_pause(&self, params: Valid<PauseParams>) -> Result<bool> {
        self.set_paused(&params, true).await
    }

    /// `Store::queue_resume`.
    async fn queue_resume(&self, params: Valid<PauseParams>) -> Result<bool> {
        self.set_paused(&params, false).await
    }

    /// `Store::dead_requeue`.
    async fn dead_requeue(&self, params: Valid<RequeueParams>) -> Result<u64> {
        let now = self.inner.clock.now();
        let ids: Vec<Uuid> = match &params.filter {
            Some(f) => self.op_dead_matching(f, now).await?,
            None => params.ids.iter().map(|i| *i.as_uuid()).collect(),
        };
        if ids.is_empty() {
            return Ok(0);
        }
        let n = self
            .execute(
                self.query(&self.inner.sql.requeue)
                    .bind(now.as_micros())
                    .bind(&ids)
                    .bind(i32_of("additional_attempts", params.additional_attempts)?),
            )
            .await?;
        Ok(n)
    }

    /// `Store::dead_discard`.
    async fn dead_discard(&self, params: Valid<DiscardParams>) -> Result<u64> {
        let now = self.inner.clock.now();
        let ids: Vec<Uuid> = match &params.filter {
            Some(f) => self.op_dead_matching(f, now).await?,
            None => params.ids.iter().map(|i| *i.as_uuid()).collect(),
        };
        if ids.is_empty() {
            return Ok(0);
        }
        let done = self
            .finish_with_streams(&self.inner.sql.discard, now, &ids, None)
            .await?;
        Ok(done.len() as u64)
    }

    /// `Store::item_get`.
    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        let row = self
            .fetch_optional(self.query(&self.inner.sql.item_get).bind(id.as_uuid()))
            .await?;
        row.as_ref().map(rows::item).transpose()
    }

    /// `Store::queue_counts`.
    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
        let now = self.inner.clock.now();
        let row = self
            .fetch_one(
                self.query(&self.inner.sql.queue_counts)
                    .bind(queue.as_str())
                    .bind(now.as_micros()),
            )
            .await?;
        let oldest: Option<i64> = row.try_get(5).map_err(map)?;
        let paused: bool = row.try_get(6).map_err(map)?;
        Ok(QueueCounts::new(
            count(&row, 0)?,
            count(&row, 1)?,
            count(&row, 2)?,
            count(&row, 3)?,
            count(&row, 4)?,
        )
        .with_paused(paused)
        .with_oldest_ready_age(oldest.map(|at| now.duration_since(Timestamp::from_micros(at)))))
    }
}

impl PgStore {
    /// `Store::queue_pause` (`paused`) and `Store::queue_resume`.
    async fn set_paused(&self, params: &PauseParams, paused: bool) -> Result<bool> {
        let now = self.inner.clock.now();
        let n = if paused {
            self.execute(
                self.query(&self.op().pause)
                    .bind(params.queue.as_str())
                    .bind(now.as_micros()),
            )
            .await?
        } else {
            self.execute(self.query(&self.op().resume).bind(params.queue.as_str()))
                .await?
        };
        Ok(n > 0)
    }

    fn op(&self) -> &OpSql {
        &self.inner.sql.op
    }

    /// The dead items a filter matches, earliest death first, at most its limit.
    pub(super) async fn op_dead_matching(
        &self,
        f: &DeadFilter,
        now: Timestamp,
    ) -> Result<Vec<Uuid>> {
        let rows = self
            .fetch_all(
                self.query(&self.op().dead_matching)
                    .bind(f.queue.as_str())
                    .bind(f.dead_before(now).as_micros())
                    .bind(i64::from(f.limit)),
            )
            .await?;
        rows.iter()
            .map(|r| r.try_get::<Uuid, _>(0).map_err(map))
            .collect()
    }
}
