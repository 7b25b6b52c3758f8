//! The claim of queues with limits or fair shares (G16, G17, G18): one transaction that takes the claimed
//! queues' claim locks, reads their counts, and admits candidates in claim order.
//!
//! # The steps
//!
//! 1. Expired leases of the queues are recovered first (contract of `claim`), so a
//!    dead holder's slot comes back exactly when its lease expires.
//! 2. In one transaction: the claim lock of each queue, a transaction-scoped advisory
//!    lock taken in the order of the queue names (`lock.sql`). Every limited claim of
//!    a queue holds it, so no two of them count the same slots; it is released by
//!    the commit, and no session state is used, so it works behind PgBouncer in
//!    transaction mode.
//! 3. Under the lock, each statement sees every claim committed before (read
//!    committed): the queues' running counts and rate starts (`queue_state.sql`),
//!    then, for the keys of the candidates, their running counts from the `running`
//!    rows (`key_state.sql`, index `items_running_limit`). A slot is a lease: no
//!    counter is kept, so no stale writer can skew one.
//! 4. Candidates in claim order, locked with `FOR UPDATE SKIP LOCKED`, passing over
//!    the keys found shut (`candidates.sql`); each is admitted while its queue and key
//!    have room, and the admitted ones are claimed (`take.sql`). A key that filled up
//!    is passed over by the next round, so a saturated key's backlog never holds up
//!    another key's items; the rounds end when the claim is full, nothing is left, or
//!    after [`MAX_ROUNDS`].
//!
//!    The first round walks `items_claim` in claim order, which is the cheapest read
//!    while few of the heads it meets belong to saturated keys. Passing a key over in
//!    that walk still reads its rows: a saturated key with 100,000 ready heads in
//!    front of the others would cost every claim 100,000 rows. So a round that
//!    follows one which passed over more than half of what it read takes the key
//!    walk (`candidates_keys.sql`): a loose index scan of `items_claim_key` steps
//!    from key to key with one seek each, skipping the shut keys, and reads each open
//!    key's first heads (at most its limit) and the unkeyed heads of the queue
//!    (marked `lq`), merged in claim order. Its cost is a seek per key with ready
//!    heads, whatever the shut keys hold. Fair queues keep the walk in fair order.
//! 5. The starts of the rates it consumed are recorded (`record_starts.sql`) in the
//!    same transaction, and the claim commits.

use std::collections::{HashMap, HashSet};

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use tenure_core::{ClaimParams, Item, LeaseId, Result, Timestamp};
use uuid::Uuid;

use crate::error::map;

use super::limits::QUEUE_KEY;
use super::PgStore;

/// Most rounds of candidates one limited claim reads (each passes over the keys the
/// ones before found shut); a claim that used them all answers what it has.
const MAX_ROUNDS: usize = 32;
/// How many candidates a round reads beyond what the claim still wants, so one
/// round can pass over a few items of a key that just filled up.
const SLACK: i64 = 16;

/// One claimed queue's limits and counts, under its claim lock.
#[derive(Debug, Default)]
struct QueueGate {
    concurrency: Option<i64>,
    key_concurrency: Option<i64>,
    rate_starts: Option<i64>,
    key_rate: bool,
    key_rate_starts: Option<i64>,
    running: i64,
    starts: i64,
    shut: bool,
    fair: bool,
    /// It has a `queue_limits` row, so all its ready heads are in `items_claim_key`.
    has_limits: bool,
}

impl QueueGate {
    fn open(&self) -> bool {
        !self.shut
            && self.concurrency.is_none_or(|n| self.running < n)
            && self.rate_starts.is_none_or(|n| self.starts < n)
    }
}

/// One limit key's counts, under its queue's claim lock.
#[derive(Debug, Default)]
struct KeyGate {
    limit: Option<i64>,
    running: i64,
    starts: i64,
    deferred: bool,
}

/// What one try of a limited claim did.
pub(super) enum Limited {
    /// What it claimed, with enqueue sequence numbers (committed).
    Claimed(Vec<(i64, Item)>),
    /// A racing claimer took a scope it picked (G10); nothing was written.
    ScopeRace,
}

fn get_i64(row: &PgRow, c: &str) -> Result<Option<i64>> {
    row.try_get::<Option<i64>, _>(c).map_err(map)
}

impl PgStore {
    /// One try of a limited claim of `queues` (see the module docs).
    pub(super) async fn claim_limited(
        &self,
        queues: &[String],
        now: Timestamp,
        params: &ClaimParams,
    ) -> Result<Limited> {
        let sql = &self.inner.limits_sql;
        let mut tx = self.begin().await?;
        self.query(&sql.lock)
            .bind(queues)
            .execute(&mut *tx)
            .await
            .map_err(map)?;
        let mut gates: HashMap<String, QueueGate> = HashMap::new();
        for row in self
            .query(&sql.queue_state)
            .bind(queues)
            .bind(now.as_micros())
            .fetch_all(&mut *tx)
            .await
            .map_err(map)?
        {
            let queue: String = row.try_get("queue").map_err(map)?;
            let deferred: bool = row.try_get("deferred").map_err(map)?;
            let paused: bool = row.try_get("paused").map_err(map)?;
            let gate = QueueGate {
                concurrency: get_i64(&row, "concurrency")?,
                key_concurrency: get_i64(&row, "key_concurrency")?,
                rate_starts: get_i64(&row, "rate_starts")?,
                key_rate: get_i64(&row, "key_rate_starts")?.is_some(),
                key_rate_starts: get_i64(&row, "key_rate_starts")?,
                running: get_i64(&row, "running")?.unwrap_or(0),
                starts: get_i64(&row, "starts")?.unwrap_or(0),
                shut: deferred || paused,
                fair: row.try_get("fair").map_err(map)?,
                has_limits: row.try_get("has_limits").map_err(map)?,
            };
            gates.insert(queue, gate);
        }
        let want = usize::try_from(params.limit).unwrap_or(usize::MAX);
        let expires = now + params.lease_for;
        let lease = LeaseId::mint().to_i64();
        let mut keys: HashMap<(String, String), KeyGate> = HashMap::new();
        let (mut shut_q, mut shut_k): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
        let (mut start_q, mut start_k): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
        let mut claimed: Vec<(i64, Item)> = Vec::new();
        // G18: claims of fair queues take the least start tag first, and each fair
        // queue's virtual time follows the greatest tag served.
        let fair = gates.values().any(|g| g.fair);
        // The key walk sees every ready head only of queues with a limits row (the
        // others' unkeyed heads are not in `items_claim_key`).
        let keyable = gates.values().all(|g| g.has_limits);
        let mut by_key = false;
        let mut served: HashMap<String, i64> = HashMap::new();
        let mut slotted: Vec<Uuid> = Vec::new();
        for _ in 0..MAX_ROUNDS {
            let candidates = match (fair, by_key) {
                (true, _) => &sql.candidates_fair,
                (false, true) => &sql.candidates_keys,
                (false, false) => &sql.candidates,
            };
            let open: Vec<&str> = queues
                .iter()
                .filter(|q| gates.get(*q).is_some_and(QueueGate::open))
                .map(String::as_str)
                .collect();
            if open.is_empty() || claimed.len() >= want {
                break;
            }
            let fetch = i64::try_from(want - claimed.len()).unwrap_or(i64::MAX) + SLACK;
            let mut query = self
                .query(candidates)
                .bind(&open)
                .bind(now.as_micros())
                .bind(fetch)
                .bind(&shut_q)
                .bind(&shut_k);
            if fair {
                let fair_queues: Vec<&str> = open
                    .iter()
                    .copied()
                    .filter(|q| gates.get(*q).is_some_and(|g| g.fair))
                    .collect();
                query = query.bind(fair_queues);
            }
            let rows = query.fetch_all(&mut *tx).await.map_err(map)?;
            if rows.is_empty() {
                break;
            }
            let mut cands: Vec<(Uuid, String, Option<String>)> = Vec::with_capacity(rows.len());
            let mut tags: HashMap<Uuid, i64> = HashMap::new();
            for r in &rows {
                let id: Uuid = r.try_get("id").map_err(map)?;
                if let Some(tag) = r.try_get::<Option<i64>, _>("ftag").map_err(map)? {
                    tags.insert(id, tag);
                }
                cands.push((
                    id,
                    r.try_get("queue").map_err(map)?,
                    r.try_get("limit_key").map_err(map)?,
                ));
            }
            self.load_keys(&mut tx, &cands, &gates, &mut keys, now)
                .await?;
            let read = cands.len();
            let mut passed = 0usize;
            let mut admitted: Vec<Uuid> = Vec::new();
            let mut newly_shut = false;
            for (id, queue, key) in cands {
                if claimed.len() + admitted.len() >= want {
                    break;
                }
                let Some(gate) = gates.get_mut(&queue) else {
                    continue;
                };
                if !gate.open() {
                    continue;
                }
                let mut slot = gate.concurrency.is_some();
                if let Some(key) = key {
                    let Some(k) = keys.get_mut(&(queue.clone(), key.clone())) else {
                        continue;
                    };
                    slot |= k.limit.is_some();
                    let full = k.deferred
                        || k.limit.is_some_and(|n| k.running >= n)
                        || gate.key_rate_starts.is_some_and(|n| k.starts >= n);
                    if full {
                        passed += 1;
                        newly_shut = true;
                        shut_q.push(queue);
                        shut_k.push(key);
                        continue;
                    }
                    k.running += 1;
                    if gate.key_rate {
                        k.starts += 1;
                        start_q.push(queue.clone());
                        start_k.push(key);
                    }
                }
                gate.running += 1;
                if let (true, Some(&tag)) = (gate.fair, tags.get(&id)) {
                    let top = served.entry(queue.clone()).or_insert(tag);
                    *top = (*top).max(tag);
                }
                if gate.rate_starts.is_some() {
                    gate.starts += 1;
                    start_q.push(queue);
                    start_k.push(QUEUE_KEY.to_owned());
                }
                if slot {
                    slotted.push(id);
                }
                admitted.push(id);
            }
            if !admitted.is_empty() {
                let taken = self
                    .query(&sql.take)
                    .bind(&admitted)
                    .bind(now.as_micros())
                    .bind(params.owner.as_str())
                    .bind(expires.as_micros())
                    .bind(lease)
                    .fetch_all(&mut *tx)
                    .await;
                match taken {
                    Ok(rows) => {
                        for r in &rows {
                            claimed.push(super::claim::seq_item(r).map_err(map)?);
                        }
                    }
                    Err(e) if super::claim::is_scope_race(&e) => {
                        let _ = tx.rollback().await;
                        return Ok(Limited::ScopeRace);
                    }
                    Err(e) => return Err(map(e)),
                }
            }
            if !newly_shut {
                break;
            }
            by_key = by_key || (keyable && passed * 2 > read);
            dedup_pairs(&mut shut_q, &mut shut_k);
        }
        if !start_q.is_empty() {
            self.query(&sql.record_starts)
                .bind(&start_q)
                .bind(&start_k)
                .bind(now.as_micros())
                .execute(&mut *tx)
                .await
                .map_err(map)?;
            self.query(&sql.prune_starts)
                .bind(queues)
                .bind(now.as_micros())
                .execute(&mut *tx)
                .await
                .map_err(map)?;
        }
        if !served.is_empty() {
            let (qs, ts): (Vec<String>, Vec<i64>) = served.into_iter().unzip();
            self.query(&sql.fair_served)
                .bind(&qs)
                .bind(&ts)
                .execute(&mut *tx)
                .await
                .map_err(map)?;
        }
        tx.commit().await.map_err(map)?;
        self.holding(slotted.into_iter());
        Ok(Limited::Claimed(claimed))
    }

    /// Reads the counts of the candidates' keys not read yet, under the claim locks.
    async fn load_keys(
        &self,
        conn: &mut PgConnection,
        cands: &[(Uuid, String, Option<String>)],
        gates: &HashMap<String, QueueGate>,
        keys: &mut HashMap<(String, String), KeyGate>,
        now: Timestamp,
    ) -> Result<()> {
        let mut seen = HashSet::new();
        let (mut qs, mut ks) = (Vec::new(), Vec::new());
        for (_, q, k) in cands {
            let Some(k) = k else { continue };
            let pair = (q.clone(), k.clone());
            if keys.contains_key(&pair) || !seen.insert(pair) {
                continue;
            }
            qs.push(q.as_str());
            ks.push(k.as_str());
        }
        if qs.is_empty() {
            return Ok(());
        }
        let rows = self
            .query(&self.inner.limits_sql.key_state)
            .bind(&qs)
            .bind(&ks)
            .bind(now.as_micros())
            .fetch_all(&mut *conn)
            .await
            .map_err(map)?;
        for r in &rows {
            let queue: String = r.try_get("queue").map_err(map)?;
            let key: String = r.try_get("key").map_err(map)?;
            let default = gates.get(&queue).and_then(|g| g.key_concurrency);
            let k = KeyGate {
                limit: get_i64(r, "override")?.or(default),
                running: get_i64(r, "running")?.unwrap_or(0),
                starts: get_i64(r, "starts")?.unwrap_or(0),
                deferred: r.try_get("deferred").map_err(map)?,
            };
            keys.insert((queue, key), k);
        }
        Ok(())
    }
}

/// Sorts the pairs `(qs[i], ks[i])` and removes repeats.
fn dedup_pairs(qs: &mut Vec<String>, ks: &mut Vec<String>) {
    let mut pairs: Vec<(String, String)> = qs.drain(..).zip(ks.drain(..)).collect();
    pairs.sort();
    pairs.dedup();
    for (q, k) in pairs {
        qs.push(q);
        ks.push(k);
    }
}
