//! The key walk of a limited queue's claim (G16): the due heads of each open limit
//! key, merged in claim order, so a saturated key's backlog costs one index seek.

use std::collections::{HashSet, VecDeque};

use rusqlite::{params, Connection, OptionalExtension};

use super::claim::Candidate;
use super::*;

/// How many candidates of saturated keys a claim passes over in one limited queue
/// before it leaves the walk of the ready index for the key walk ([`KeyWalk`]).
pub(super) const KEY_WALK_AFTER: usize = 64;

/// How many heads of one limit key the key walk reads at a time.
const KEY_CHUNK: usize = 8;

/// The due heads of one limit key (or of the heads without one) of a limited queue,
/// in claim order, read a chunk at a time from `tenure_items_ready_key`.
pub(super) struct KeyStream {
    pub(super) key: Option<String>,
    buf: VecDeque<Candidate>,
    after: (i64, i64, i64),
    exhausted: bool,
}

impl KeyStream {
    pub(super) fn new(key: Option<String>) -> Self {
        KeyStream {
            key,
            buf: VecDeque::new(),
            after: (i64::MIN, i64::MIN, i64::MIN),
            exhausted: false,
        }
    }

    pub(super) fn fill(
        &mut self,
        conn: &Connection,
        queue: &QueueName,
        now: Timestamp,
    ) -> OpResult<()> {
        if !self.buf.is_empty() || self.exhausted {
            return Ok(());
        }
        let chunk = i64::try_from(KEY_CHUNK).unwrap_or(1);
        let (p, r, q) = self.after;
        let mut stmt;
        let mut rows = match &self.key {
            Some(key) => {
                stmt = conn.prepare_cached(SQL_KEY_SCAN)?;
                stmt.query(params![
                    queue.as_str(),
                    key,
                    now.as_micros(),
                    p,
                    r,
                    q,
                    chunk
                ])?
            }
            None => {
                stmt = conn.prepare_cached(SQL_UNKEYED_SCAN)?;
                stmt.query(params![queue.as_str(), now.as_micros(), p, r, q, chunk])?
            }
        };
        let mut got = 0;
        while let Some(row) = rows.next()? {
            let (seq, item) = read_ready(row, queue)?;
            self.after = (i64::from(item.priority), item.run_at.as_micros(), seq);
            self.buf.push_back(Candidate {
                seq,
                item,
                ftag: 0,
                limit_key: Some(row.get(15)?),
            });
            got += 1;
        }
        if got < KEY_CHUNK {
            self.exhausted = true;
        }
        Ok(())
    }
}

/// The key walk of a limited queue (G16): a merge, in claim order, of the due heads of
/// each limit key that is not saturated, each read from `tenure_items_ready_key`.
///
/// The walk of the ready index reads a queue's heads in claim order and passes over
/// the ones of saturated keys: cheap while those are few, but a saturated key holding
/// 100,000 ready heads in front of the others costs every claim 100,000 rows. Once a
/// claim has passed over [`KEY_WALK_AFTER`] of them, it switches to this walk: it
/// steps from key to key with one index seek each (a loose index scan over
/// `(queue, limit_key)`, skipping the keys found saturated), reads the first heads of
/// each open key, and merges them by `(priority, run_at, seq)`. The merge of the
/// per-key orders is the queue's claim order restricted to open keys, so the claim
/// takes exactly what the walk would have taken (G8), at a cost of one seek per key
/// with ready heads, whatever the saturated keys hold. A key that fills up during the
/// claim leaves the merge ([`QueueCursor::shut_key`]). Heads without a key are one
/// more stream of the merge: every item of a limited queue is in the index (`lq`).
pub(super) struct KeyWalk {
    pub(super) streams: Vec<KeyStream>,
    /// The keys were not enumerated yet.
    pub(super) pending: bool,
}

impl KeyWalk {
    pub(super) fn enumerate(
        &mut self,
        conn: &Connection,
        queue: &QueueName,
        shut: &HashSet<String>,
    ) -> OpResult<()> {
        let mut next = conn.prepare_cached(SQL_NEXT_KEY)?;
        self.streams.push(KeyStream::new(None));
        let mut after = String::new();
        while let Some(key) = next
            .query_row(params![queue.as_str(), after], |r| r.get::<_, String>(0))
            .optional()?
        {
            if !shut.contains(&key) {
                self.streams.push(KeyStream::new(Some(key.clone())));
            }
            after = key;
        }
        self.pending = false;
        Ok(())
    }

    /// The next head in claim order among the open keys, passing over `taken` ones.
    pub(super) fn next(
        &mut self,
        conn: &Connection,
        queue: &QueueName,
        now: Timestamp,
        taken: &HashSet<i64>,
    ) -> OpResult<Option<Candidate>> {
        loop {
            for s in self.streams.iter_mut() {
                s.fill(conn, queue, now)?;
            }
            self.streams.retain(|s| !s.buf.is_empty());
            let best = self
                .streams
                .iter_mut()
                .min_by_key(|s| s.buf.front().map(Candidate::order));
            let Some(cand) = best.and_then(|s| s.buf.pop_front()) else {
                return Ok(None);
            };
            if !taken.contains(&cand.seq) {
                return Ok(Some(cand));
            }
        }
    }
}
