//! The operator's operations: listings, cancel, pause, and dead items by filter, each
//! one library function (`scripts/item_list.lua` and the others).
//!
//! Key layout 2 adds, per queue, `{p}:e:<queue>` (every stored item by enqueue seq,
//! for listings) and `{p}:y:<queue>` (ready items by run_at, for the oldest due
//! item's wait), and `{p}:paused` (paused queues). A store written by an earlier
//! version is upgraded by the first operator call (`ensure_layout` in `lib.lua`),
//! which builds both indexes from the item hashes and records `{p}:layout = 2`.
//! A cursor is `r.<seq>` for items and `r.<expiry>.<id>` for leases.

use redis::{FromRedisValue, Value};
use tenure_core::async_trait;
use tenure_core::contract::{Inspect, Valid};
use tenure_core::LimitKey;
use tenure_core::{
    CancelOutcome, CancelParams, Cursor, DeadFilter, DiscardParams, Error, Item, ItemId,
    ItemListParams, ItemPage, LeaseInfo, LeaseListParams, LeasePage, LeaseToken, ListOrder,
    OwnerId, PauseParams, QueueCounts, QueueName, RequeueParams, Result, Timestamp,
};

use super::{u32_of, u64_of, RedisStore};
use crate::error::bad_reply;
use crate::rows::{self, Flat};
use crate::scripts::SCRIPTS;

fn bad_cursor() -> Error {
    Error::invalid("cursor", "was not handed out by a redis store listing")
}

fn text(v: &Value) -> Result<String> {
    String::from_redis_value(v).map_err(|_| bad_reply("a listing answered a non-text value"))
}

#[async_trait]
impl Inspect for RedisStore {
    /// `Store::item_list`.
    async fn item_list(&self, params: Valid<ItemListParams>) -> Result<ItemPage> {
        let now = self.now();
        let after = match &params.cursor {
            Some(c) => {
                let seq = c
                    .as_str()
                    .strip_prefix("r.")
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or_else(bad_cursor)?;
                seq.to_string()
            }
            None => String::new(),
        };
        let mut inv = self.call(&SCRIPTS.item_list);
        inv.arg(now)
            .arg(params.queue.as_str())
            .arg(params.state.as_str())
            .arg(match params.order {
                ListOrder::OldestFirst => "asc",
                ListOrder::NewestFirst => "desc",
            })
            .arg(params.limit)
            .arg(after);
        let answer: Vec<Value> = self.read(&inv).await?;
        let mut it = answer.into_iter();
        let next = match it.next() {
            Some(v) => text(&v)?,
            None => return Err(bad_reply("item_list answered nothing")),
        };
        let mut items = Vec::new();
        let rest: Vec<Value> = it.collect();
        for pair in rest.chunks(2) {
            let [id, v] = pair else {
                return Err(bad_reply("item_list answered the wrong shape"));
            };
            let id: ItemId = text(id)?.parse()?;
            let flat = Flat::from_redis_value(v)
                .map_err(|_| bad_reply("item_list answered a malformed item"))?;
            items.push(rows::item(id, flat)?);
        }
        let next = if next.is_empty() {
            None
        } else {
            Some(Cursor::new(format!("r.{next}"))?)
        };
        Ok(ItemPage::new(items, next, Timestamp::from_micros(now)))
    }

    /// `Store::lease_list`.
    async fn lease_list(&self, params: Valid<LeaseListParams>) -> Result<LeasePage> {
        let now = self.now();
        let (at, after_id) = match &params.cursor {
            Some(c) => {
                let (at, id) = c
                    .as_str()
                    .strip_prefix("r.")
                    .and_then(|s| s.split_once('.'))
                    .ok_or_else(bad_cursor)?;
                let at: i64 = at.parse().map_err(|_| bad_cursor())?;
                let id: ItemId = id.parse().map_err(|_| bad_cursor())?;
                (at.to_string(), id.to_string())
            }
            None => (String::new(), String::new()),
        };
        let mut inv = self.call(&SCRIPTS.lease_list);
        inv.arg(params.queue.as_str())
            .arg(params.limit)
            .arg(at)
            .arg(after_id);
        let answer: Vec<Value> = self.read(&inv).await?;
        let Some((more, rest)) = answer.split_first() else {
            return Err(bad_reply("lease_list answered nothing"));
        };
        let more = i64::from_redis_value(more).map_err(|_| bad_reply("lease_list flag"))? == 1;
        let mut leases = Vec::new();
        for l in rest.chunks(8) {
            let [id, a, o, le, rn, mr, lid, lk] = l else {
                return Err(bad_reply("lease_list answered the wrong shape"));
            };
            let num = |v: &Value| -> Result<i64> {
                text(v)?
                    .parse::<i64>()
                    .map_err(|_| bad_reply("lease_list answered a non-number"))
            };
            let id: ItemId = text(id)?.parse()?;
            leases.push(LeaseInfo::new(
                LeaseToken::new(id, u32_of(num(a)?)?, text(lid)?.parse()?),
                params.queue.clone(),
                OwnerId::new(text(o)?).map_err(|_| bad_reply("corrupt owner"))?,
                Timestamp::from_micros(num(le)?),
                u32_of(num(rn)?)?,
                u32_of(num(mr)?)?,
            ));
            // The limit key whose slot the lease holds (G16; '' for none).
            let limit_key = match text(lk)? {
                k if k.is_empty() => None,
                k => Some(LimitKey::new(k).map_err(|_| bad_reply("corrupt limit key"))?),
            };
            if let Some(l) = leases.last_mut() {
                l.limit_key = limit_key;
            }
        }
        let next = match (more, leases.last()) {
            (true, Some(l)) => Some(Cursor::new(format!(
                "r.{}.{}",
                l.expires_at.as_micros(),
                l.token.id
            ))?),
            _ => None,
        };
        Ok(LeasePage::new(leases, next, Timestamp::from_micros(now)))
    }

    /// `Store::queue_list`.
    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        let inv = self.call(&SCRIPTS.queue_list);
        let names: Vec<String> = self.write(&inv).await?;
        names
            .into_iter()
            .map(|n| QueueName::new(n).map_err(|_| bad_reply("corrupt queue name")))
            .collect()
    }

    /// `Store::item_cancel`.
    async fn item_cancel(&self, params: Valid<CancelParams>) -> Result<Vec<CancelOutcome>> {
        let mut inv = self.call(&SCRIPTS.cancel);
        inv.arg(self.now());
        for id in &params.ids {
            inv.arg(id.to_string());
        }
        let answer: Vec<Vec<String>> = self.write(&inv).await?;
        if answer.len() != params.ids.len() {
            return Err(bad_reply("cancel answered the wrong number of outcomes"));
        }
        let mut out = answer
            .into_iter()
            .map(|a| match a.as_slice() {
                [s] if s == "cancelled" => Ok(CancelOutcome::Cancelled),
                [s] if s == "dead" => Ok(CancelOutcome::Dead),
                [s] if s == "done" => Ok(CancelOutcome::Done),
                [s] if s == "none" => Ok(CancelOutcome::NotFound),
                [s, attempt, owner] if s == "running" => Ok(CancelOutcome::Running {
                    attempt: attempt
                        .parse()
                        .map_err(|_| bad_reply("cancel answered a bad attempt"))?,
                    owner: OwnerId::new(owner.as_str())
                        .map_err(|_| bad_reply("cancel answered a bad owner"))?,
                }),
                _ => Err(bad_reply("cancel answered an unknown outcome")),
            })
            .collect::<Result<Vec<_>>>()?;
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

    async fn queue_pause(&self, params: Valid<PauseParams>) -> Result<bool> {
        self.set_paused(&params, true).await
    }

    async fn queue_resume(&self, params: Valid<PauseParams>) -> Result<bool> {
        self.set_paused(&params, false).await
    }

    /// `Store::dead_requeue`.
    async fn dead_requeue(&self, params: Valid<RequeueParams>) -> Result<u64> {
        let ids = match &params.filter {
            Some(f) => self.op_dead_matching(f).await?,
            None => params.ids.clone(),
        };
        if ids.is_empty() {
            return Ok(0);
        }
        let mut inv = self.call(&SCRIPTS.requeue);
        inv.arg(self.now()).arg(params.additional_attempts);
        for id in &ids {
            inv.arg(id.to_string());
        }
        let n: i64 = self.write(&inv).await?;
        Ok(u64_of(n))
    }

    /// `Store::dead_discard`.
    async fn dead_discard(&self, params: Valid<DiscardParams>) -> Result<u64> {
        let ids = match &params.filter {
            Some(f) => self.op_dead_matching(f).await?,
            None => params.ids.clone(),
        };
        if ids.is_empty() {
            return Ok(0);
        }
        let mut inv = self.call(&SCRIPTS.discard);
        inv.arg(self.now());
        for id in &ids {
            inv.arg(id.to_string());
        }
        let n: i64 = self.write(&inv).await?;
        Ok(u64_of(n))
    }

    /// `Store::item_get`.
    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        let mut inv = self.call(&SCRIPTS.item_get);
        inv.arg(id.to_string());
        let flat: Flat = self.read(&inv).await?;
        if flat.is_empty() {
            return Ok(None);
        }
        rows::item(id, flat).map(Some)
    }

    /// `Store::queue_counts`.
    async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
        let mut inv = self.call(&SCRIPTS.queue_counts);
        inv.arg(self.now()).arg(queue.as_str());
        let now = Timestamp::from_micros(self.now());
        let c: Vec<i64> = self.write(&inv).await?;
        let [ready, scheduled, running, dead, done, paused, has_oldest, oldest] = c.as_slice()
        else {
            return Err(bad_reply("queue_counts answered the wrong shape"));
        };
        let oldest =
            (*has_oldest == 1).then(|| now.duration_since(Timestamp::from_micros(*oldest)));
        Ok(QueueCounts::new(
            u64_of(*ready),
            u64_of(*scheduled),
            u64_of(*running),
            u64_of(*dead),
            u64_of(*done),
        )
        .with_paused(*paused == 1)
        .with_oldest_ready_age(oldest))
    }
}

impl RedisStore {
    /// `Store::queue_pause` (`paused`) and `Store::queue_resume`.
    async fn set_paused(&self, params: &PauseParams, paused: bool) -> Result<bool> {
        let mut inv = self.call(&SCRIPTS.pause);
        inv.arg(self.now())
            .arg(params.queue.as_str())
            .arg(if paused { 1 } else { 0 });
        let n: i64 = self.write(&inv).await?;
        Ok(n == 1)
    }

    /// The dead items a filter matches, earliest death first, at most its limit.
    pub(super) async fn op_dead_matching(&self, f: &DeadFilter) -> Result<Vec<ItemId>> {
        let now = Timestamp::from_micros(self.now());
        let mut inv = self.call(&SCRIPTS.dead_matching);
        inv.arg(f.queue.as_str())
            .arg(f.dead_before(now).as_micros())
            .arg(f.limit);
        let ids: Vec<String> = self.read(&inv).await?;
        ids.iter().map(|s| s.parse::<ItemId>()).collect()
    }
}
