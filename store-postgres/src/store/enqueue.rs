//! The steps of an enqueue, shared by [`Claims::enqueue`](tenure_core::contract::Claims)
//! (in `claim.rs`) and the `_in_tx` calls: the pin check (G14), the inserts with their
//! dedup keys (G11), their limit keys (G16, G17) and fair-share tags (G18).

use std::collections::{BTreeMap, HashMap, HashSet};

use sqlx::{PgConnection, Row};
use tenure_core::partition::key_hash;
use tenure_core::{EnqueueParams, Enqueued, Error, ItemId, NewItem, Result, Timestamp};
use uuid::Uuid;

use crate::error::map;
use crate::rows::i32_of;
use crate::STORE;

use super::PgStore;

/// Where an enqueue's NOTIFY to other processes is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notify {
    /// In the insert statement, delivered at the transaction's commit: for the
    /// caller's transaction, whose commit this store does not see.
    InStatement,
    /// By the pump, once the store's own transaction has committed.
    AfterCommit,
}

impl PgStore {
    /// G14: a pinned enqueue needs a registered instance; checked before any write.
    pub(crate) async fn check_pin(
        &self,
        conn: &mut PgConnection,
        params: &EnqueueParams,
    ) -> Result<()> {
        let Some(who) = &params.pin_to else {
            return Ok(());
        };
        let registered: bool = self
            .query(&self.inner.sql.instance_registered)
            .bind(who.as_str())
            .fetch_one(&mut *conn)
            .await
            .map_err(map)?
            .try_get(0)
            .map_err(map)?;
        if registered {
            Ok(())
        } else {
            Err(Error::not_found("instance", who.as_str()))
        }
    }

    /// G14: pins the streams of the items the enqueue inserted (`out` tells which) to
    /// the pinned enqueue's instance, where they have no pin (first write wins).
    pub(crate) async fn pin_enqueued(
        &self,
        conn: &mut PgConnection,
        params: &EnqueueParams,
        out: &[Enqueued],
    ) -> Result<()> {
        let Some(who) = &params.pin_to else {
            return Ok(());
        };
        let mut streams: Vec<String> = params
            .items
            .iter()
            .zip(out)
            .filter(|(it, e)| !e.duplicate && e.id == it.id)
            .filter_map(|(it, _)| it.stream.as_ref().map(|s| s.as_str().to_owned()))
            .collect();
        if streams.is_empty() {
            return Ok(());
        }
        streams.sort();
        streams.dedup();
        self.query(&self.inner.sql.pin_enqueued)
            .bind(who.as_str())
            .bind(&streams)
            .execute(&mut *conn)
            .await
            .map_err(map)?;
        Ok(())
    }

    /// Enqueue steps on one connection that is inside a transaction: dedup keys, then
    /// stream counts, then the rows.
    pub(crate) async fn enqueue_steps(
        &self,
        conn: &mut PgConnection,
        items: &[NewItem],
        now: Timestamp,
        notify: Notify,
    ) -> Result<Vec<Enqueued>> {
        let sql = &self.inner.sql;
        // G11: the first occurrence of each (queue, key) in the call decides.
        let mut first: HashMap<(&str, &str), usize> = HashMap::new();
        for (i, it) in items.iter().enumerate() {
            if let Some(k) = &it.dedup_key {
                first.entry((it.queue.as_str(), k.as_str())).or_insert(i);
            }
        }
        let mut fresh: HashSet<(String, String)> = HashSet::new();
        let mut existing: HashMap<(String, String), Uuid> = HashMap::new();
        if !first.is_empty() {
            let mut keys: Vec<(&(&str, &str), &usize)> = first.iter().collect();
            keys.sort();
            let (mut q, mut k, mut ids, mut exp) = (vec![], vec![], vec![], vec![]);
            for ((queue, key), idx) in &keys {
                let it = &items[**idx];
                q.push(queue.to_string());
                k.push(key.to_string());
                ids.push(*it.id.as_uuid());
                exp.push((now + it.dedup_window).as_micros());
            }
            let rows = self
                .query(&sql.dedup_claim_keys)
                .bind(now.as_micros())
                .bind(&q)
                .bind(&k)
                .bind(&ids)
                .bind(&exp)
                .fetch_all(&mut *conn)
                .await
                .map_err(map)?;
            for r in rows {
                fresh.insert((r.try_get(0).map_err(map)?, r.try_get(1).map_err(map)?));
            }
            let (mut dq, mut dk) = (vec![], vec![]);
            for (qq, kk) in q.iter().zip(&k) {
                if !fresh.contains(&(qq.clone(), kk.clone())) {
                    dq.push(qq.clone());
                    dk.push(kk.clone());
                }
            }
            if !dq.is_empty() {
                let rows = self
                    .query(&sql.dedup_existing)
                    .bind(&dq)
                    .bind(&dk)
                    .fetch_all(&mut *conn)
                    .await
                    .map_err(map)?;
                for r in rows {
                    existing.insert(
                        (r.try_get(0).map_err(map)?, r.try_get(1).map_err(map)?),
                        r.try_get(2).map_err(map)?,
                    );
                }
            }
        }
        // Which items are inserted, and the answer for each.
        let mut answers = Vec::with_capacity(items.len());
        let mut insert: Vec<&NewItem> = Vec::with_capacity(items.len());
        for (i, it) in items.iter().enumerate() {
            let Some(k) = &it.dedup_key else {
                answers.push(Enqueued {
                    id: it.id,
                    duplicate: false,
                });
                insert.push(it);
                continue;
            };
            let key = (it.queue.as_str(), k.as_str());
            let owned = (key.0.to_owned(), key.1.to_owned());
            let first_idx = first.get(&key).copied().unwrap_or(i);
            if fresh.contains(&owned) {
                if first_idx == i {
                    answers.push(Enqueued {
                        id: it.id,
                        duplicate: false,
                    });
                    insert.push(it);
                } else {
                    answers.push(Enqueued {
                        id: items[first_idx].id,
                        duplicate: true,
                    });
                }
            } else {
                let id = existing.get(&owned).copied().ok_or_else(|| {
                    Error::internal(STORE, format!("dedup key {:?} vanished", key.1))
                })?;
                answers.push(Enqueued {
                    id: ItemId::from_uuid(id),
                    duplicate: true,
                });
            }
        }
        if insert.is_empty() {
            return Ok(answers);
        }
        // G9: lock and count each stream; a stream with no unfinished item before this
        // call gets its first new item as head.
        let mut per_stream: BTreeMap<&str, i64> = BTreeMap::new();
        for it in &insert {
            if let Some(s) = &it.stream {
                *per_stream.entry(s.as_str()).or_default() += 1;
            }
        }
        let mut heads_free: HashSet<String> = HashSet::new();
        if !per_stream.is_empty() {
            let names: Vec<String> = per_stream.keys().map(|s| s.to_string()).collect();
            let added: Vec<i64> = per_stream.values().copied().collect();
            let rows = self
                .query(&sql.stream_reserve)
                .bind(&names)
                .bind(&added)
                .fetch_all(&mut *conn)
                .await
                .map_err(map)?;
            for r in rows {
                let name: String = r.try_get(0).map_err(map)?;
                let pending: i64 = r.try_get(1).map_err(map)?;
                if pending == per_stream.get(name.as_str()).copied().unwrap_or(-1) {
                    heads_free.insert(name);
                }
            }
        }
        let heads: Vec<bool> = insert
            .iter()
            .map(|it| match &it.stream {
                None => true,
                Some(s) => heads_free.remove(s.as_str()),
            })
            .collect();
        self.insert_rows(&mut *conn, &insert, &heads, now, notify)
            .await?;
        let ftags = self.fair_tags(&mut *conn, &insert, now).await?;
        self.keep_limit_keys(&mut *conn, &insert, &ftags).await?;
        Ok(answers)
    }

    /// Inserts rows with their head flags; when listening, with the NOTIFY in the
    /// statement if `notify` says so.
    pub(super) async fn insert_rows(
        &self,
        conn: &mut PgConnection,
        insert: &[&NewItem],
        heads: &[bool],
        now: Timestamp,
        notify: Notify,
    ) -> Result<()> {
        let in_statement = self.inner.listening && notify == Notify::InStatement;
        let n = insert.len();
        let mut ids = Vec::with_capacity(n);
        let mut queues = Vec::with_capacity(n);
        let mut payloads: Vec<&[u8]> = Vec::with_capacity(n);
        let mut streams = Vec::with_capacity(n);
        let mut scopes = Vec::with_capacity(n);
        let mut dedups = Vec::with_capacity(n);
        let mut prios = Vec::with_capacity(n);
        let mut run_ats = Vec::with_capacity(n);
        let mut max_attempts = Vec::with_capacity(n);
        let mut max_stalls = Vec::with_capacity(n);
        let mut max_renewals = Vec::with_capacity(n);
        let mut phashes = Vec::with_capacity(n);
        for it in insert {
            ids.push(*it.id.as_uuid());
            queues.push(it.queue.as_str());
            payloads.push(&it.payload);
            streams.push(it.stream.as_ref().map(|s| s.as_str()));
            scopes.push(it.scope.as_ref().map(|s| s.as_str()));
            dedups.push(it.dedup_key.as_ref().map(|s| s.as_str()));
            prios.push(it.priority);
            run_ats.push(it.schedule.run_at(now).as_micros());
            max_attempts.push(i32_of("max_attempts", it.max_attempts)?);
            max_stalls.push(i32_of("max_stalls", it.max_stalls)?);
            max_renewals.push(i32_of("max_renewals", it.max_renewals)?);
            phashes.push(key_hash(it.stream.as_ref(), it.id));
        }
        let sql = if in_statement {
            &self.inner.sql.enqueue_notify
        } else {
            &self.inner.sql.enqueue
        };
        let mut q = self
            .query(sql)
            .bind(now.as_micros())
            .bind(&ids)
            .bind(&queues)
            .bind(&payloads)
            .bind(&streams)
            .bind(&scopes)
            .bind(&dedups)
            .bind(&prios)
            .bind(&run_ats)
            .bind(heads)
            .bind(&max_attempts)
            .bind(&max_stalls)
            .bind(&max_renewals)
            .bind(&phashes);
        if in_statement {
            q = q.bind(&self.inner.channel);
        }
        q.execute(conn).await.map_err(map)?;
        Ok(())
    }
}
