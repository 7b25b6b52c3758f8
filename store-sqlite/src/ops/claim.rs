//! Claim as SQL ([`enqueue`](super::enqueue) is beside it): [`claim`]
//! with its walk of the ready index one priority level at a time, the owner's share
//! of a partitioned claim (G14) and the stream runs (G9).

use std::collections::{HashSet, VecDeque};

use rusqlite::{params, Connection, OptionalExtension};
use tenure_core::machine;
use tenure_core::{
    ClaimParams, Error, Item, Lease, LeaseId, OwnerId, QueueName, Recovered, Timestamp,
};

use crate::error::STORE;

use super::key_walk::{KeyWalk, KEY_WALK_AFTER};
use super::limits::{is_fair, limit_key_of, served, Admit, Gate};
use super::recovery::recover_where;
use super::{
    claim_chunk, claim_many_sql, is_paused, read_item, read_ready, Cx, OpResult, SQL_CLAIM_ONE,
    SQL_LEVEL_SCAN, SQL_LEVEL_SCAN_FAIR, SQL_LEVEL_SCAN_LIMITED, SQL_LEVEL_SCAN_PARTITIONED,
    SQL_NEXT_LEVEL, SQL_PIN, SQL_RANK, SQL_RUN_BEHIND, SQL_SCOPE_RUNNING,
};

/// A claimable head found in the ready index.
pub(super) struct Candidate {
    pub(super) seq: i64,
    pub(super) item: Item,
    /// Its start tag plus one in a fair queue (G18), else 0.
    pub(super) ftag: i64,
    /// Its limit key, when the scan that found it read it (`Some(None)`: no key).
    pub(super) limit_key: Option<Option<String>>,
}

impl Candidate {
    pub(super) fn order(&self) -> (i16, Timestamp, i64) {
        (self.item.priority, self.item.run_at, self.seq)
    }
}

/// The owner's share of a partitioned claim (G14).
struct Share<'a> {
    owner: &'a str,
    partitions: i64,
    live: i64,
    rank: i64,
}

impl<'a> Share<'a> {
    /// Ranks `owner` among the registered instances, or answers `NotFound` when it is
    /// not one (before anything is written, recovery included).
    fn of(conn: &Connection, owner: &'a OwnerId, partitions: u32) -> OpResult<Self> {
        let (live, rank, registered): (i64, i64, i64) = conn
            .prepare_cached(SQL_RANK)?
            .query_row([owner.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        if registered == 0 {
            return Err(Error::NotFound {
                what: "instance",
                id: owner.to_string(),
            }
            .into());
        }
        Ok(Share {
            owner: owner.as_str(),
            partitions: i64::from(partitions.max(1)),
            live,
            rank,
        })
    }
}

/// Walks one queue's due heads in claim order (G8), a priority level at a time, so
/// items scheduled for later never have to be stepped over: within a level the ready
/// index is ordered by `run_at`, and the scan of a level stops at `now`. With a
/// [`Share`] it walks the same index and keeps only the owner's share. A limited queue
/// may leave this walk for the [`KeyWalk`].
struct QueueCursor<'q> {
    queue: &'q QueueName,
    share: Option<&'q Share<'q>>,
    buf: VecDeque<Candidate>,
    level: Option<i64>,
    after: (i64, i64),
    level_exhausted: bool,
    done: bool,
    /// The queue keeps fair shares: walk its level in start-tag order (G18).
    fair: bool,
    after_tag: i64,
    /// The queue has limits: its scans read each head's limit key (G16).
    limited: bool,
    /// The queue has a limits row, and so all its items in `tenure_items_ready_key`:
    /// it may take the key walk (not with fair shares or a share, which keep theirs).
    keyable: bool,
    /// The keys found saturated in this claim, and how many heads were passed over.
    shut: HashSet<String>,
    passed: usize,
    /// What this claim took from the queue so far.
    taken: HashSet<i64>,
    keys: Option<KeyWalk>,
}

impl<'q> QueueCursor<'q> {
    fn new(queue: &'q QueueName, share: Option<&'q Share<'q>>) -> Self {
        QueueCursor {
            queue,
            share,
            buf: VecDeque::new(),
            level: None,
            after: (i64::MIN, i64::MIN),
            level_exhausted: true,
            done: false,
            fair: false,
            after_tag: i64::MIN,
            limited: false,
            keyable: false,
            shut: HashSet::new(),
            passed: 0,
            taken: HashSet::new(),
            keys: None,
        }
    }

    /// The gate found `key` saturated: its heads are passed over from now on, and
    /// after [`KEY_WALK_AFTER`] passed heads the cursor takes the key walk.
    fn shut_key(&mut self, key: &str) {
        self.shut.insert(key.to_owned());
        self.passed += 1;
        match &mut self.keys {
            Some(walk) => walk
                .streams
                .retain(|s| s.key.as_deref().is_none_or(|k| k != key)),
            None if self.keyable && self.passed >= KEY_WALK_AFTER => {
                self.buf.clear();
                self.keys = Some(KeyWalk {
                    streams: Vec::new(),
                    pending: true,
                });
            }
            None => {}
        }
    }

    fn refill(&mut self, conn: &Connection, now: Timestamp, want: usize) -> OpResult<()> {
        if let Some(walk) = &mut self.keys {
            if self.buf.is_empty() && !self.done {
                if walk.pending {
                    walk.enumerate(conn, self.queue, &self.shut)?;
                }
                match walk.next(conn, self.queue, now, &self.taken)? {
                    Some(cand) => self.buf.push_back(cand),
                    None => self.done = true,
                }
            }
            return Ok(());
        }
        while self.buf.is_empty() && !self.done {
            if self.level_exhausted {
                let mut next = conn.prepare_cached(SQL_NEXT_LEVEL)?;
                let from = self.level.unwrap_or(i64::MIN);
                match next
                    .query_row(params![self.queue.as_str(), from], |r| r.get::<_, i64>(0))
                    .optional()?
                {
                    Some(p) => {
                        self.level = Some(p);
                        self.after = (i64::MIN, i64::MIN);
                        self.after_tag = i64::MIN;
                        self.level_exhausted = false;
                    }
                    None => {
                        self.done = true;
                        break;
                    }
                }
            }
            let Some(level) = self.level else { break };
            let limit = i64::try_from(want.max(1)).unwrap_or(i64::MAX);
            let mut stmt;
            let fair = self.fair && self.share.is_none();
            let mut rows = match self.share {
                None if fair => {
                    stmt = conn.prepare_cached(SQL_LEVEL_SCAN_FAIR)?;
                    stmt.query(params![
                        self.queue.as_str(),
                        level,
                        now.as_micros(),
                        self.after_tag,
                        self.after.0,
                        self.after.1,
                        limit
                    ])?
                }
                None => {
                    let sql = if self.limited {
                        SQL_LEVEL_SCAN_LIMITED
                    } else {
                        SQL_LEVEL_SCAN
                    };
                    stmt = conn.prepare_cached(sql)?;
                    stmt.query(params![
                        self.queue.as_str(),
                        level,
                        now.as_micros(),
                        self.after.0,
                        self.after.1,
                        limit
                    ])?
                }
                Some(share) => {
                    stmt = conn.prepare_cached(SQL_LEVEL_SCAN_PARTITIONED)?;
                    stmt.query(params![
                        self.queue.as_str(),
                        level,
                        now.as_micros(),
                        self.after.0,
                        self.after.1,
                        limit,
                        share.owner,
                        share.partitions,
                        share.live,
                        share.rank,
                    ])?
                }
            };
            let mut got = 0usize;
            while let Some(row) = rows.next()? {
                let (seq, item) = read_ready(row, self.queue)?;
                let (ftag, limit_key) = match (fair, self.limited && self.share.is_none()) {
                    (true, _) => (row.get::<_, i64>(15)?, Some(row.get(16)?)),
                    (false, true) => (0, Some(row.get(15)?)),
                    (false, false) => (0, None),
                };
                self.after = (item.run_at.as_micros(), seq);
                self.after_tag = ftag;
                self.buf.push_back(Candidate {
                    seq,
                    item,
                    ftag,
                    limit_key,
                });
                got += 1;
            }
            if got < want.max(1) {
                self.level_exhausted = true;
            }
        }
        Ok(())
    }
}

/// Adds to `picked` the items right behind the just-picked head of `stream` at
/// `head_seq`, at most `room`, while each is ready, due, in one of the claim's queues
/// and free of a busy scope (G9, G10).
fn extend_run(
    cx: &Cx<'_>,
    params: &ClaimParams,
    (stream, head_seq, room): (&str, i64, usize),
    busy: &mut HashSet<String>,
    picked: &mut Vec<Candidate>,
) -> OpResult<()> {
    if room == 0 {
        return Ok(());
    }
    let conn = cx.conn;
    let mut behind = conn.prepare_cached(SQL_RUN_BEHIND)?;
    let mut scope_running = conn.prepare_cached(SQL_SCOPE_RUNNING)?;
    let mut rows = behind.query(params![
        stream,
        head_seq,
        i64::try_from(room).unwrap_or(i64::MAX)
    ])?;
    while let Some(row) = rows.next()? {
        let (seq, item) = read_item(row)?;
        if !machine::is_due(&item, cx.now) || !params.queues.contains(&item.queue) {
            break;
        }
        if let Some(scope) = &item.scope {
            if busy.contains(scope.as_str()) || scope_running.exists([scope.as_str()])? {
                break;
            }
            busy.insert(scope.as_str().to_owned());
        }
        picked.push(Candidate {
            seq,
            item,
            ftag: 0,
            limit_key: None,
        });
    }
    Ok(())
}

/// [`Store::claim`](tenure_core::Store::claim); mirrors [`machine::claim`] plus the
/// collection rules (stream head, scope, order) and, with
/// [`ClaimParams::partitioning`], the owner's share and its stream pins (G14).
pub(crate) fn claim(cx: &Cx<'_>, params: &ClaimParams) -> OpResult<Vec<Lease>> {
    let conn = cx.conn;
    let now = cx.now;
    // G14: the owner must be registered; checked before recovery writes anything.
    let share = match &params.partitioning {
        Some(p) => Some(Share::of(conn, &params.owner, p.partitions)?),
        None => None,
    };
    let mut queues: Vec<&QueueName> = params.queues.iter().collect();
    queues.sort_unstable();
    queues.dedup();

    // G2/G6: expired leases of these queues first, exactly as recover_expired.
    let mut recovered = Recovered::default();
    for q in &queues {
        recover_where(cx, Some(q.as_str()), u32::MAX, &mut recovered)?;
    }
    // A paused queue's items are not claimed (its expired leases are still recovered).
    let mut open = Vec::with_capacity(queues.len());
    for q in queues {
        if !is_paused(cx, q.as_str())? {
            open.push(q);
        }
    }
    let queues = open;

    let limit = usize::try_from(params.limit).unwrap_or(usize::MAX);
    let mut cursors: Vec<QueueCursor<'_>> = queues
        .iter()
        .map(|q| QueueCursor::new(q, share.as_ref()))
        .collect();

    let mut scope_running = conn.prepare_cached(SQL_SCOPE_RUNNING)?;
    // Scopes known busy: running before this claim, or taken earlier in this batch (G10).
    let mut busy: HashSet<String> = HashSet::new();
    let mut picked: Vec<Candidate> = Vec::with_capacity(limit.min(1024));
    let run = usize::try_from(params.stream_run).unwrap_or(1);
    // The limits of each queue that has any (G16, G17), read in this transaction.
    let mut gates: Vec<Option<Gate>> = Vec::with_capacity(queues.len());
    for (q, c) in queues.iter().zip(cursors.iter_mut()) {
        let gate = Gate::load(cx, q)?;
        c.fair = is_fair(cx, q.as_str())?;
        c.limited = gate.is_some();
        c.keyable = gate.as_ref().is_some_and(Gate::configured) && !c.fair && c.share.is_none();
        gates.push(gate);
    }
    while picked.len() < limit {
        let want = limit - picked.len();
        for c in cursors.iter_mut() {
            c.refill(conn, now, want)?;
        }
        let best = cursors
            .iter_mut()
            .enumerate()
            .filter(|(_, c)| !c.buf.is_empty())
            .min_by_key(|(_, c)| c.buf.front().map(Candidate::order));
        let Some((at, cand)) = best.and_then(|(at, c)| c.buf.pop_front().map(|cand| (at, cand)))
        else {
            break;
        };
        if let Some(scope) = &cand.item.scope {
            if busy.contains(scope.as_str()) || scope_running.exists([scope.as_str()])? {
                busy.insert(scope.as_str().to_owned());
                continue;
            }
        }
        // G16, G17: a queue at its bound gives nothing more; a key at its bound is
        // passed over, as a busy scope is.
        let gated = match gates.get_mut(at).and_then(Option::as_mut) {
            None => None,
            Some(gate) => {
                let key = match &cand.limit_key {
                    Some(key) => key.clone(),
                    None => limit_key_of(cx, cand.seq)?,
                };
                match gate.admit(cx, key.as_deref())? {
                    Admit::Open => {
                        gate.taken(cx, key.as_deref())?;
                        Some(())
                    }
                    Admit::KeyShut => {
                        if let (Some(c), Some(key)) = (cursors.get_mut(at), key.as_deref()) {
                            c.shut_key(key);
                        }
                        continue;
                    }
                    Admit::QueueShut => {
                        if let Some(c) = cursors.get_mut(at) {
                            c.buf.clear();
                            c.done = true;
                        }
                        continue;
                    }
                }
            }
        };
        if let Some(scope) = &cand.item.scope {
            busy.insert(scope.as_str().to_owned());
        }
        // A limited queue's stream heads are claimed alone, each through the gate.
        let head = cand
            .item
            .stream
            .clone()
            .filter(|_| run > 1 && gated.is_none());
        let head_seq = cand.seq;
        if gated.is_some() {
            if let Some(c) = cursors.get_mut(at) {
                c.taken.insert(head_seq);
            }
        }
        picked.push(cand);
        if let Some(stream) = head {
            let room = run.min(limit - picked.len() + 1) - 1;
            extend_run(
                cx,
                params,
                (stream.as_str(), head_seq, room),
                &mut busy,
                &mut picked,
            )?;
        }
    }

    // machine::claim on each loaded row, then the same change written for the whole
    // batch in one statement under the `state = 'ready'` guard.
    let mut leases = Vec::with_capacity(picked.len());
    let mut seqs = Vec::with_capacity(picked.len());
    let mut pin = match share {
        Some(_) => Some(conn.prepare_cached(SQL_PIN)?),
        None => None,
    };
    // One lease id for the leases of this claim: it only has to differ between the
    // leases of one item (`LeaseId`).
    let lease = LeaseId::mint();
    // G18: each fair queue's virtual time follows the greatest tag this claim takes.
    let mut served_tags: Vec<(String, i64)> = Vec::new();
    for c in picked.iter().filter(|c| c.ftag > 0) {
        match served_tags
            .iter_mut()
            .find(|(q, _)| q == c.item.queue.as_str())
        {
            Some((_, t)) => *t = (*t).max(c.ftag),
            None => served_tags.push((c.item.queue.as_str().to_owned(), c.ftag)),
        }
    }
    for (q, t) in &served_tags {
        served(cx, q, *t)?;
    }
    for Candidate { seq, mut item, .. } in picked {
        if machine::claim(&mut item, &params.owner, lease, now, params.lease_for) {
            // G14: a claimed stream stays with the owner (a no-op when it already is).
            if let (Some(pin), Some(stream)) = (pin.as_mut(), &item.stream) {
                pin.execute([stream.as_str(), params.owner.as_str()])?;
            }
            seqs.push(seq);
            leases.push(Lease::from_item(item)?);
        }
    }
    if seqs.is_empty() {
        return Ok(leases);
    }
    let (owner, expires, at, lease) = (
        params.owner.as_str(),
        (now + params.lease_for).as_micros(),
        now.as_micros(),
        lease.to_i64(),
    );
    let mut changed = 0;
    let mut rest = &seqs[..];
    while !rest.is_empty() {
        let (chunk, after) = rest.split_at(claim_chunk(rest.len()));
        changed += if chunk.len() == 1 {
            conn.prepare_cached(SQL_CLAIM_ONE)?
                .execute(params![chunk[0], owner, expires, at, lease])?
        } else {
            let mut update = conn.prepare_cached(claim_many_sql(chunk.len()))?;
            update.raw_bind_parameter(1, owner)?;
            update.raw_bind_parameter(2, expires)?;
            update.raw_bind_parameter(3, at)?;
            update.raw_bind_parameter(4, lease)?;
            for (i, seq) in chunk.iter().enumerate() {
                update.raw_bind_parameter(i + 5, seq)?;
            }
            update.raw_execute()?
        };
        rest = after;
    }
    if changed != seqs.len() {
        return Err(Error::internal(
            STORE,
            format!(
                "claim changed {changed} rows for {} picked items",
                seqs.len()
            ),
        )
        .into());
    }
    Ok(leases)
}
