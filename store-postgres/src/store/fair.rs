//! Fair shares (G18) at enqueue: the start tags of the items of fair queues.
//!
//! Start-time fair queueing by tenant (see `tenure_core::store::limits`, Fair
//! shares). A queue becomes fair with its first item that names a fairness key
//! (`fair_queues`, migration 10); its unfinished items from before get tag 1. An
//! enqueue into a fair queue locks the queue's row (`fair_lock.sql`), so enqueues
//! into one fair queue tag one after another, and gives each item the tag
//! `max(virtual time, its tenant's finish tag) + 1`, moving the tenant's finish tag
//! on by `TAG_UNIT / weight`. A limited claim of a fair queue takes the least tag
//! first within a priority and moves the queue's virtual time on
//! (`limited_claim.rs`).

use std::collections::HashMap;

use sqlx::{PgConnection, Row};
use tenure_core::{FairnessKey, NewItem, Result, Timestamp};

use crate::error::map;

use super::PgStore;

/// One unit of fair-share work in tag units: an item of weight `w` moves its tenant's
/// finish tag on by `TAG_UNIT / w` (G18).
const TAG_UNIT: i64 = 1 << 24;

impl PgStore {
    /// The start tags plus one of `inserted` (one per item, `None` outside a fair
    /// queue), on `conn` inside the enqueue's transaction. Costs nothing when no item
    /// names a fairness key and this handle trusts that the schema has no limits.
    pub(crate) async fn fair_tags(
        &self,
        conn: &mut PgConnection,
        inserted: &[&NewItem],
        now: Timestamp,
    ) -> Result<Vec<Option<i64>>> {
        let sql = &self.inner.limits_sql;
        let mut out = vec![None; inserted.len()];
        let mut keyed: Vec<&str> = inserted
            .iter()
            .filter(|it| it.fairness_key.is_some())
            .map(|it| it.queue.as_str())
            .collect();
        keyed.sort_unstable();
        keyed.dedup();
        if keyed.is_empty() && !self.schema_has_limits(&mut *conn, now).await? {
            return Ok(out);
        }
        if !keyed.is_empty() {
            let made: Vec<String> = self
                .query(&sql.fair_make)
                .bind(&keyed)
                .fetch_all(&mut *conn)
                .await
                .map_err(map)?
                .iter()
                .map(|r| r.try_get::<String, _>("queue"))
                .collect::<std::result::Result<_, _>>()
                .map_err(map)?;
            if !made.is_empty() {
                self.query(&sql.fair_backfill)
                    .bind(&made)
                    .execute(&mut *conn)
                    .await
                    .map_err(map)?;
                self.forget_no_limits();
            }
        }
        let mut queues: Vec<&str> = inserted.iter().map(|it| it.queue.as_str()).collect();
        queues.sort_unstable();
        queues.dedup();
        let mut vtime: HashMap<String, i64> = HashMap::new();
        for r in self
            .query(&sql.fair_lock)
            .bind(&queues)
            .fetch_all(&mut *conn)
            .await
            .map_err(map)?
        {
            vtime.insert(
                r.try_get("queue").map_err(map)?,
                r.try_get("vtime").map_err(map)?,
            );
        }
        if vtime.is_empty() {
            return Ok(out);
        }
        let (mut tq, mut tt) = (Vec::new(), Vec::new());
        let mut seen = std::collections::HashSet::new();
        for it in inserted
            .iter()
            .filter(|it| vtime.contains_key(it.queue.as_str()))
        {
            let pair = (it.queue.as_str(), tenant_of(it));
            if seen.insert(pair) {
                tq.push(pair.0);
                tt.push(pair.1);
            }
        }
        // Per (queue, tenant): its finish tag and its configured weight.
        let mut tenants: HashMap<(String, String), (i64, Option<i64>)> = HashMap::new();
        for r in self
            .query(&sql.fair_tenants)
            .bind(&tq)
            .bind(&tt)
            .fetch_all(&mut *conn)
            .await
            .map_err(map)?
        {
            let finish: Option<i64> = r.try_get("finish").map_err(map)?;
            let weight: Option<i64> = r.try_get("weight").map_err(map)?;
            tenants.insert(
                (
                    r.try_get("queue").map_err(map)?,
                    r.try_get("tenant").map_err(map)?,
                ),
                (finish.unwrap_or(0), weight),
            );
        }
        for (i, it) in inserted.iter().enumerate() {
            let Some(&vt) = vtime.get(it.queue.as_str()) else {
                continue;
            };
            let key = (it.queue.as_str().to_owned(), tenant_of(it).to_owned());
            let entry = tenants.entry(key).or_insert((0, None));
            let weight = entry.1.unwrap_or(i64::from(it.weight)).max(1);
            let start = entry.0.max(vt);
            entry.0 = start.saturating_add(TAG_UNIT / weight);
            out[i] = Some(start.saturating_add(1));
        }
        let (mut fq, mut ft, mut ff) = (Vec::new(), Vec::new(), Vec::new());
        for ((q, t), (finish, _)) in &tenants {
            fq.push(q.as_str());
            ft.push(t.as_str());
            ff.push(*finish);
        }
        self.query(&sql.fair_finish)
            .bind(&fq)
            .bind(&ft)
            .bind(&ff)
            .execute(&mut *conn)
            .await
            .map_err(map)?;
        Ok(out)
    }
}

/// The tenant of an item: its fairness key, `""` without one.
fn tenant_of(it: &NewItem) -> &str {
    it.fairness_key.as_ref().map_or("", FairnessKey::as_str)
}
