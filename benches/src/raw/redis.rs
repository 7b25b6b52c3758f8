//! A Lua claim loop on Redis: ready ids in a list, a lease hash and an expiry zset.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::Script;
use tenure_core::{Clock, SystemClock};

use super::raw_err;
use crate::{BenchError, LEASE};

/// `KEYS[1]` is the root `{prefix}`; ARGV: owner, batch, now (µs), lease (µs). Pops
/// up to `batch` ids, raises each one's attempt, records `owner:attempt` in the
/// lease hash and the expiry in the zset; answers `{id, attempt, payload}` each.
const CLAIM: &str = r"
local p = KEYS[1]
local ids = redis.call('LPOP', p .. ':ready', tonumber(ARGV[2]))
if not ids then return {} end
local exp = string.format('%d', tonumber(ARGV[3]) + tonumber(ARGV[4]))
local out = {}
for i, id in ipairs(ids) do
  local a = redis.call('HINCRBY', p .. ':attempt', id, 1)
  redis.call('HSET', p .. ':lease', id, ARGV[1] .. ':' .. a)
  redis.call('ZADD', p .. ':lease_exp', exp, id)
  out[i] = {id, a, redis.call('HGET', p .. ':payload', id)}
end
return out
";

/// `KEYS[1]` is the root; ARGV: owner, then pairs id, attempt. Deletes each item
/// whose lease is still `owner:attempt`; answers how many were.
const FINALIZE: &str = r"
local p = KEYS[1]
local n = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HGET', p .. ':lease', id) == ARGV[1] .. ':' .. ARGV[i + 1] then
redis.call('HDEL', p .. ':lease', id)
redis.call('ZREM', p .. ':lease_exp', id)
redis.call('HDEL', p .. ':attempt', id)
redis.call('HDEL', p .. ':payload', id)
n = n + 1
  end
end
return n
";

/// The two scripts and the root key of one raw queue.
#[derive(Clone, Debug)]
pub struct RedisRaw {
    root: String,
    claim: Script,
    finalize: Script,
}

/// A claimed item: its id, the attempt the claim started, and its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisRawLease {
    /// The item id.
    pub id: String,
    /// The attempt this claim started (the fencing token with `id`).
    pub attempt: i64,
    /// The item's payload.
    pub payload: Vec<u8>,
}

impl RedisRaw {
    /// A raw queue under the keys `{prefix}:...`.
    pub fn new(prefix: &str) -> Self {
        RedisRaw {
            root: format!("{{{prefix}}}"),
            claim: Script::new(CLAIM),
            finalize: Script::new(FINALIZE),
        }
    }

    /// Seeds `n` ready items (ids `0..n`, payload the id's eight little-endian
    /// bytes), in pipelines of 10,000.
    pub async fn seed(&self, conn: &mut MultiplexedConnection, n: usize) -> Result<(), BenchError> {
        for start in (0..n).step_by(10_000) {
            let mut pipe = redis::pipe();
            let ids: Vec<String> = (start..n.min(start + 10_000))
                .map(|i| i.to_string())
                .collect();
            pipe.rpush(format!("{}:ready", self.root), &ids).ignore();
            for (i, id) in ids.iter().enumerate() {
                let payload = ((start + i) as u64).to_le_bytes();
                pipe.hset(format!("{}:payload", self.root), id, &payload[..])
                    .ignore();
            }
            pipe.query_async::<()>(conn)
                .await
                .map_err(raw_err("seed"))?;
        }
        Ok(())
    }

    /// Claims up to `batch` items for `owner` with a lease of [`LEASE`].
    pub async fn claim(
        &self,
        conn: &mut MultiplexedConnection,
        owner: &str,
        batch: usize,
    ) -> Result<Vec<RedisRawLease>, BenchError> {
        let now = SystemClock.now().as_micros();
        let rows: Vec<(String, i64, Vec<u8>)> = self
            .claim
            .key(&self.root)
            .arg(owner)
            .arg(batch)
            .arg(now)
            .arg(tenure_core::duration_micros(LEASE))
            .invoke_async(conn)
            .await
            .map_err(raw_err("claim"))?;
        Ok(rows
            .into_iter()
            .map(|(id, attempt, payload)| RedisRawLease {
                id,
                attempt,
                payload,
            })
            .collect())
    }

    /// Finalizes `leases` held by `owner`, fenced on `owner:attempt`, in one script;
    /// returns how many were still held.
    pub async fn finalize(
        &self,
        conn: &mut MultiplexedConnection,
        owner: &str,
        leases: &[RedisRawLease],
    ) -> Result<usize, BenchError> {
        let mut inv = self.finalize.key(&self.root);
        inv.arg(owner);
        for l in leases {
            inv.arg(&l.id).arg(l.attempt);
        }
        let n: usize = inv.invoke_async(conn).await.map_err(raw_err("finalize"))?;
        Ok(n)
    }
}

/// The burn-down drain of `n` seeded items on `conns` (one task per connection,
/// owner `w{index}`): each task loops [`RedisRaw::claim`] of `batch` then one
/// [`RedisRaw::finalize`] of the whole batch, and returns at its first empty claim.
/// Every finalize must finish every item it names and exactly `n` must finish,
/// else the drain fails. Returns the time from the first claim to the last task's
/// return.
pub async fn drain(
    raw: &RedisRaw,
    conns: Vec<MultiplexedConnection>,
    n: usize,
    batch: usize,
) -> Result<Duration, BenchError> {
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(w, mut conn)| {
            let (done, raw) = (done.clone(), raw.clone());
            tokio::spawn(async move {
                let owner = format!("w{w}");
                loop {
                    let leases = raw.claim(&mut conn, &owner, batch).await?;
                    if leases.is_empty() {
                        return Ok::<(), BenchError>(());
                    }
                    let f = raw.finalize(&mut conn, &owner, &leases).await?;
                    if f != leases.len() {
                        return Err(BenchError::Check(format!(
                            "a raw finalize finished {f} of {} items just claimed",
                            leases.len()
                        )));
                    }
                    done.fetch_add(f as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut first_err = None;
    for t in tasks {
        if let Err(e) = t.await? {
            first_err.get_or_insert(e);
        }
    }
    let elapsed = start.elapsed();
    if let Some(e) = first_err {
        return Err(e);
    }
    let finished = done.load(Ordering::Relaxed);
    if finished != n as u64 {
        return Err(BenchError::Unfinished {
            finished,
            expected: n,
        });
    }
    Ok(elapsed)
}
