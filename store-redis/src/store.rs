//! [`RedisStore`]: the [`Store`] contract on Redis, one library function per operation,
//! in contract order.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use redis::{AsyncConnectionConfig, Cmd, FromRedisValue, RedisResult, Value};
use tenure_core::machine;
use tenure_core::partition::key_hash;
use tenure_core::{
    async_trait, duration_micros, validate_identifier, Capabilities, ClaimParams, CompleteParams,
    DeregisterParams, DiscardParams, EnqueueParams, Enqueued, Error, EvictParams, Evicted,
    FailOutcome, FailParams, HeartbeatParams, Instance, Item, ItemId, LeaderInfo, LeaderName,
    LeaderParams, LeaderStatus, Lease, LeaseId, Limits, OwnerId, PurgeParams, Purged, QueueCounts,
    QueueName, RecoverParams, Recovered, ReleaseParams, RenewOutcome, RenewParams, RequeueParams,
    Result, Retry, SharedClock, Store, Timestamp, TokenOutcome, WakeHealth, WakeSignal,
};
use tokio::task::JoinHandle;

use crate::config::topology;
use crate::connect::{Conn, Target};
use crate::error::{bad_reply, map, needs_reconnect};
use crate::rows::{self, Flat};
use crate::scripts::SCRIPTS;
use crate::{listen, RedisConfig, STORE};

mod admin;
mod operate;

/// A Redis store. `Clone` gives another handle on the same connection.
///
/// See the [crate docs](crate) for the key layout, durability and faults.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    target: Arc<Target>,
    connection_config: AsyncConnectionConfig,
    connect_timeout: std::time::Duration,
    /// The multiplexed connections calls take turns on, each with its generation;
    /// `None` until its first call and after a call found it broken.
    slots: Vec<RwLock<Option<(u64, Conn)>>>,
    /// The slot the next call uses (modulo the number of slots).
    turn: AtomicUsize,
    /// Serialises reconnects; holds the last generation handed out.
    connecting: tokio::sync::Mutex<u64>,
    prefix: String,
    /// `{prefix}`: every script's one declared key, the hash tag of all others.
    root: String,
    /// The cluster slot of `root`, where a cluster store sends every command.
    slot: u16,
    clock: SharedClock,
    limits: Limits,
    keep_done: bool,
    wait_replicas: Option<(u32, std::time::Duration)>,
    listening: bool,
    wake: WakeSignal,
    listener: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(mut guard) = self.listener.lock() {
            if let Some(task) = guard.take() {
                task.abort();
            }
        }
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.inner.prefix)
            .field("keep_done", &self.inner.keep_done)
            .field("listening", &self.inner.listening)
            .finish_non_exhaustive()
    }
}

/// Writes a time in microseconds as a script argument.
fn micros(t: Timestamp) -> i64 {
    t.as_micros()
}

impl RedisStore {
    /// Builds a store on `config.url` (one server, Sentinel or Cluster: see
    /// [`RedisConfig::new`]). No command is sent here: the connection opens with the
    /// first call (and again after it breaks), so this succeeds while the server is
    /// down and calls answer [`Error::Unavailable`] until it is back.
    ///
    /// The prefix is validated first: an unsafe one answers [`Error::InvalidInput`]
    /// naming `prefix`; a malformed URL names the field at fault (`url`, `hosts`,
    /// `master_name`, `db`). With
    /// [`listen`](RedisConfig::listen) on (the default) this starts the pub/sub
    /// listener, so it must run inside a tokio runtime.
    pub async fn connect(config: RedisConfig) -> Result<RedisStore> {
        validate_identifier("prefix", &config.prefix)?;
        let target = Arc::new(Target::new(
            &topology(&config.url)?,
            config.connect_timeout,
            config.response_timeout,
        )?);
        let connection_config = AsyncConnectionConfig::new()
            .set_connection_timeout(config.connect_timeout)
            .set_response_timeout(config.response_timeout);
        let root = format!("{{{}}}", config.prefix);
        let wake = WakeSignal::new();
        let store = RedisStore {
            inner: Arc::new(Inner {
                target: target.clone(),
                connection_config,
                connect_timeout: config.connect_timeout,
                slots: (0..config.connections.max(1))
                    .map(|_| RwLock::new(None))
                    .collect(),
                turn: AtomicUsize::new(0),
                connecting: tokio::sync::Mutex::new(0),
                prefix: config.prefix.clone(),
                root: root.clone(),
                slot: crate::connect::slot(&root),
                clock: config.clock.clone(),
                limits: config.limits,
                keep_done: config.keep_done,
                wait_replicas: config.wait_replicas,
                listening: config.listen,
                wake: wake.clone(),
                listener: Mutex::new(None),
            }),
        };
        if config.listen {
            // Not subscribed yet: workers poll at their base until the listener is up.
            wake.set_health(WakeHealth::Down);
            let task = listen::spawn(
                target,
                format!("{root}:wake"),
                crate::connect::slot(&root),
                config.connect_timeout,
                wake,
            );
            if let Ok(mut guard) = store.inner.listener.lock() {
                *guard = Some(task);
            }
        }
        Ok(store)
    }

    /// The key prefix this store uses.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// Sends `PING`: `Ok` when the server answers, [`Error::Unavailable`] when it
    /// cannot be reached. `tenure::open` calls it so a wrong URL fails at once.
    pub async fn ping(&self) -> Result<()> {
        let (generation, mut conn) = self.connection().await?;
        let answer: redis::RedisResult<String> =
            conn.query(&redis::cmd("PING"), self.inner.slot).await;
        match answer {
            Ok(_) => Ok(()),
            Err(e) => {
                self.failed(generation, &e);
                Err(map(e))
            }
        }
    }

    /// A connection for one call (slots in turn), opening it if there is none; the
    /// answer names the slot and the connection's generation for [`Self::broken`].
    async fn connection(&self) -> Result<((usize, u64), Conn)> {
        // A cluster connection holds one multiplexed connection per node already:
        // the store keeps one.
        let slot = match &*self.inner.target {
            Target::Cluster(..) => 0,
            _ => self.inner.turn.fetch_add(1, Ordering::Relaxed) % self.inner.slots.len(),
        };
        if let Some(c) = self.current(slot) {
            return Ok(c);
        }
        let mut generation = self.inner.connecting.lock().await;
        if let Some(c) = self.current(slot) {
            return Ok(c);
        }
        let conn = self
            .inner
            .target
            .open(&self.inner.connection_config, self.inner.connect_timeout)
            .await
            .map_err(map)?;
        *generation += 1;
        if let Ok(mut w) = self.inner.slots[slot].write() {
            *w = Some((*generation, conn.clone()));
        }
        Ok(((slot, *generation), conn))
    }

    fn current(&self, slot: usize) -> Option<((usize, u64), Conn)> {
        let guard = self.inner.slots[slot].read().ok()?;
        guard.as_ref().map(|(g, c)| ((slot, *g), c.clone()))
    }

    /// After a call on the connection `(slot, generation)` failed with `err`: replaces
    /// the connection when the error says it is broken or on a server that is no
    /// longer the primary. A cluster connection heals itself (it reconnects to a node
    /// and refreshes its slot map on its own) and is replaced only when its driver
    /// is gone.
    fn failed(&self, generation: (usize, u64), err: &redis::RedisError) {
        let replace = match &*self.inner.target {
            Target::Cluster(..) => {
                err.kind() == redis::ErrorKind::ClusterConnectionNotFound
                    || err.to_string().contains("redis_cluster: Unable to")
            }
            _ => needs_reconnect(err),
        };
        if replace {
            self.broken(generation);
        }
    }

    /// Forgets the connection `(slot, generation)` after it failed, so the next call
    /// on that slot opens another. Behind Sentinel it forgets every connection opened
    /// up to that one: the primary may have moved, and each new connection asks the
    /// sentinels where it is now.
    fn broken(&self, (slot, generation): (usize, u64)) {
        if self.inner.target.forgets_all_on_failure() {
            for s in &self.inner.slots {
                if let Ok(mut w) = s.write() {
                    if w.as_ref().is_some_and(|(g, _)| *g <= generation) {
                        *w = None;
                    }
                }
            }
            return;
        }
        if let Ok(mut w) = self.inner.slots[slot].write() {
            if w.as_ref().is_some_and(|(g, _)| *g == generation) {
                *w = None;
            }
        }
    }

    /// `FCALL` of the library function `name` with the store's root as its one key;
    /// the caller adds the arguments.
    fn call(&self, name: &str) -> Cmd {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(name).arg(1).arg(&self.inner.root);
        cmd
    }

    /// Sends `cmd` (an `FCALL`) to the prefix's primary; when it has no such
    /// function (restarted without persistence, `FUNCTION FLUSH`, a new primary that
    /// never had it), loads the library there and sends the call again.
    async fn fcall<T: FromRedisValue>(&self, conn: &mut Conn, cmd: &Cmd) -> RedisResult<T> {
        let slot = self.inner.slot;
        match conn.query(cmd, slot).await {
            Err(e) if function_missing(&e) => {
                conn.query::<()>(
                    redis::cmd("FUNCTION")
                        .arg("LOAD")
                        .arg("REPLACE")
                        .arg(&SCRIPTS.library),
                    slot,
                )
                .await?;
                conn.query(cmd, slot).await
            }
            other => other,
        }
    }

    /// Runs a function that only reads.
    async fn read<T: FromRedisValue>(&self, inv: &Cmd) -> Result<T> {
        let (generation, mut conn) = self.connection().await?;
        match self.fcall(&mut conn, inv).await {
            Ok(v) => Ok(v),
            Err(e) => {
                self.failed(generation, &e);
                Err(map(e))
            }
        }
    }

    /// Runs a function that writes, then the configured `WAIT` for replicas.
    async fn write<T: FromRedisValue>(&self, inv: &Cmd) -> Result<T> {
        let (generation, mut conn) = self.connection().await?;
        let out = match self.fcall(&mut conn, inv).await {
            Ok(v) => v,
            Err(e) => {
                self.failed(generation, &e);
                return Err(map(e));
            }
        };
        if let Some((replicas, timeout)) = self.inner.wait_replicas {
            let millis = u64::try_from(timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1);
            // On the connection that carried the write (WAIT counts that client's
            // writes), to the primary of the prefix's slot alone.
            let acked: i64 = match conn
                .query(
                    redis::cmd("WAIT").arg(replicas).arg(millis),
                    self.inner.slot,
                )
                .await
            {
                Ok(n) => n,
                Err(e) => {
                    self.failed(generation, &e);
                    return Err(map(e));
                }
            };
            if acked < i64::from(replicas) {
                return Err(Error::unavailable(
                    STORE,
                    format!(
                        "the write was acknowledged by {acked} of {replicas} replicas within \
                         {timeout:?}; it is applied on the primary and may be lost on failover"
                    ),
                ));
            }
        }
        Ok(out)
    }

    fn now(&self) -> i64 {
        micros(self.inner.clock.now())
    }

    /// Pushes token pairs `id, attempt` onto an invocation.
    fn tokens(inv: &mut Cmd, tokens: &[tenure_core::LeaseToken]) {
        for t in tokens {
            id_arg(inv, t.id).arg(t.attempt);
            lease_arg(inv, t.lease);
        }
    }
}

/// Pushes a lease id as the 16 hex digits the functions compare (G3).
fn lease_arg(inv: &mut Cmd, lease: LeaseId) -> &mut Cmd {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 16];
    let v = lease.to_u64();
    for (i, b) in buf.iter_mut().enumerate() {
        *b = HEX[((v >> (60 - 4 * i)) & 0xf) as usize];
    }
    inv.arg(&buf[..])
}

/// Pushes an item id as its hyphenated text (as the functions key it), without
/// allocating a string for it.
fn id_arg(inv: &mut Cmd, id: ItemId) -> &mut Cmd {
    let mut buf = uuid::Uuid::encode_buffer();
    inv.arg(&*id.as_uuid().hyphenated().encode_lower(&mut buf))
}

/// True when `err` is the server's answer to an `FCALL` of a function it does not
/// have.
fn function_missing(err: &redis::RedisError) -> bool {
    err.code() == Some("ERR")
        && err
            .detail()
            .is_some_and(|d| d.starts_with("Function not found"))
}

fn int_of(v: &Value) -> Result<i64> {
    i64::from_redis_value(v).map_err(|_| bad_reply("expected an integer"))
}

fn string_of(v: &Value) -> Result<String> {
    String::from_redis_value(v).map_err(|_| bad_reply("expected a string"))
}

fn u64_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn u32_of(n: i64) -> Result<u32> {
    u32::try_from(n).map_err(|_| bad_reply(format!("{n} is out of range")))
}

#[async_trait]
impl Store for RedisStore {
    fn name(&self) -> &'static str {
        STORE
    }

    fn capabilities(&self) -> Capabilities {
        let caps = Capabilities::default()
            .with_partitioned_claiming()
            .with_stream_runs();
        if self.inner.listening {
            caps.with_cross_process_wakeups()
        } else {
            caps
        }
    }

    fn limits(&self) -> Limits {
        self.inner.limits
    }

    fn wake_signal(&self) -> Option<WakeSignal> {
        Some(self.inner.wake.clone())
    }

    async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        params.validate_schedule(&self.inner.limits, now)?;
        let mut inv = self.call(&SCRIPTS.enqueue);
        inv.arg(micros(now)).arg(params.items.len());
        for it in &params.items {
            id_arg(&mut inv, it.id)
                .arg(it.queue.as_str())
                .arg(it.payload.as_slice())
                .arg(it.stream.as_ref().map_or("", |s| s.as_str()))
                .arg(it.scope.as_ref().map_or("", |s| s.as_str()))
                .arg(it.dedup_key.as_ref().map_or("", |s| s.as_str()))
                .arg(duration_micros(it.dedup_window))
                .arg(it.priority)
                .arg(micros(it.schedule.run_at(now)))
                .arg(it.max_attempts)
                .arg(it.max_stalls)
                .arg(it.max_renewals);
            // The partition hash (G14) as two 32-bit halves: Lua numbers are doubles.
            let hash = key_hash(it.stream.as_ref(), it.id).unsigned_abs();
            inv.arg(hash >> 32).arg(hash & 0xffff_ffff);
        }
        // G14: the instance a pinned enqueue pins new streams to, after the items.
        inv.arg(params.pin_to.as_ref().map_or("", |o| o.as_str()));
        let answers: Vec<(String, i64)> = match self.write(&inv).await {
            Err(e) if e.kind() == tenure_core::ErrorKind::NotFound => {
                let who = params.pin_to.as_ref().map_or("", |o| o.as_str());
                return Err(Error::not_found("instance", who));
            }
            other => other?,
        };
        if answers.len() != params.items.len() {
            return Err(bad_reply("enqueue answered a different number of items"));
        }
        let out = answers
            .into_iter()
            .map(|(id, dup)| {
                Ok(Enqueued {
                    id: rows::id_of(&id)?,
                    duplicate: dup == 1,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.inner.wake.notify();
        Ok(out)
    }

    async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
        params.validate(&self.inner.limits)?;
        let now = self.inner.clock.now();
        let expires_at = now + params.lease_for;
        let mut inv = self.call(&SCRIPTS.claim);
        inv.arg(micros(now))
            .arg(params.owner.as_str())
            .arg(params.limit)
            .arg(micros(expires_at))
            .arg(params.partitioning.map_or(0, |p| p.partitions))
            .arg(params.queues.len());
        for q in &params.queues {
            inv.arg(q.as_str());
        }
        // G9: the most items of one stream run. G3: one lease id for the leases of this
        // claim (it only has to differ between the leases of one item: `LeaseId`).
        inv.arg(params.stream_run);
        let lease = LeaseId::mint();
        lease_arg(&mut inv, lease);
        let answer: Value = match self.write(&inv).await {
            Err(e) if e.kind() == tenure_core::ErrorKind::NotFound => {
                return Err(Error::not_found("instance", params.owner.to_string()))
            }
            other => other?,
        };
        let Value::Array(answers) = answer else {
            return Err(bad_reply("claim did not answer an array"));
        };
        // The function answers each item as it was before the claim; the claim's
        // changes are exactly those of `machine::claim`, applied here. An item the
        // function took was in `ready`, so it was due on the server: an enqueue that
        // read a later clock (another process's, or this one's on another connection)
        // and reached the server first put it there with a `run_at` after this claim's
        // `now`. The server's order stands, so the transition is applied as of `now`
        // with `run_at` kept; refusing the answer would leave the items leased to
        // nobody until their leases expired.
        rows::claimed_items(answers, &params.queues)?
            .into_iter()
            .map(|mut item| {
                let run_at = item.run_at;
                item.run_at = run_at.min(now);
                let claimed =
                    machine::claim(&mut item, &params.owner, lease, now, params.lease_for);
                item.run_at = run_at;
                if !claimed || item.lease_expires_at != Some(expires_at) {
                    return Err(bad_reply(format!(
                        "claim answered item {} that was not claimable",
                        item.id
                    )));
                }
                Lease::from_item(item)
            })
            .collect()
    }

    async fn renew(&self, params: RenewParams) -> Result<Vec<RenewOutcome>> {
        params.validate(&self.inner.limits)?;
        let mut inv = self.call(&SCRIPTS.renew);
        inv.arg(self.now()).arg(duration_micros(params.lease_for));
        Self::tokens(&mut inv, &params.tokens);
        let answers: Vec<Vec<i64>> = self.write(&inv).await?;
        answers
            .into_iter()
            .map(|a| match a.as_slice() {
                [1, expires, renewals] => Ok(RenewOutcome::Renewed {
                    expires_at: Timestamp::from_micros(*expires),
                    renewals: u32_of(*renewals)?,
                }),
                [2, limit] => Ok(RenewOutcome::LimitReached {
                    limit: u32_of(*limit)?,
                }),
                [0] => Ok(RenewOutcome::LeaseLost),
                other => Err(bad_reply(format!("renew answered {other:?}"))),
            })
            .collect()
    }

    async fn complete(&self, params: CompleteParams) -> Result<Vec<TokenOutcome>> {
        params.validate(&self.inner.limits)?;
        let mut inv = self.call(&SCRIPTS.complete);
        inv.arg(self.now())
            .arg(if self.inner.keep_done { "1" } else { "0" });
        Self::tokens(&mut inv, &params.tokens);
        let answers: Vec<i64> = self.write(&inv).await?;
        Ok(answers
            .into_iter()
            .map(|a| match a {
                1 => TokenOutcome::Accepted,
                2 => TokenOutcome::OutOfOrder,
                _ => TokenOutcome::LeaseLost,
            })
            .collect())
    }

    async fn fail(&self, params: FailParams) -> Result<Vec<FailOutcome>> {
        params.validate(&self.inner.limits)?;
        let mut inv = self.call(&SCRIPTS.fail);
        inv.arg(self.now());
        for f in &params.failures {
            let delay = match f.retry {
                Retry::After(d) => duration_micros(d),
                Retry::Never => -1,
            };
            id_arg(&mut inv, f.token.id).arg(f.token.attempt);
            lease_arg(&mut inv, f.token.lease).arg(delay);
        }
        for f in &params.failures {
            inv.arg(f.error.as_str());
        }
        let answers: Vec<Vec<i64>> = self.write(&inv).await?;
        answers
            .into_iter()
            .map(|a| match a.as_slice() {
                [1, run_at] => Ok(FailOutcome::Retrying {
                    run_at: Timestamp::from_micros(*run_at),
                }),
                [2] => Ok(FailOutcome::Dead),
                [0] => Ok(FailOutcome::LeaseLost),
                other => Err(bad_reply(format!("fail answered {other:?}"))),
            })
            .collect()
    }

    async fn release(&self, params: ReleaseParams) -> Result<Vec<TokenOutcome>> {
        params.validate(&self.inner.limits)?;
        let mut inv = self.call(&SCRIPTS.release);
        inv.arg(self.now());
        Self::tokens(&mut inv, &params.tokens);
        let answers: Vec<i64> = self.write(&inv).await?;
        Ok(token_outcomes(answers))
    }

    async fn recover_expired(&self, params: RecoverParams) -> Result<Recovered> {
        params.validate(&self.inner.limits)?;
        let mut inv = self.call(&SCRIPTS.recover);
        inv.arg(self.now()).arg(params.limit);
        let (requeued, dead): (i64, i64) = self.write(&inv).await?;
        Ok(Recovered {
            requeued: u64_of(requeued),
            dead: u64_of(dead),
        })
    }

    async fn purge(&self, params: PurgeParams) -> Result<Purged> {
        params.validate(&self.inner.limits)?;
        let mut inv = self.call(&SCRIPTS.purge);
        inv.arg(self.now())
            .arg(duration_micros(params.keep_done_for))
            .arg(params.limit);
        let (items, keys): (i64, i64) = self.write(&inv).await?;
        Ok(Purged {
            items: u64_of(items),
            dedup_keys: u64_of(keys),
        })
    }

    async fn dead_requeue(&self, params: RequeueParams) -> Result<u64> {
        params.validate(&self.inner.limits)?;
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

    async fn dead_discard(&self, params: DiscardParams) -> Result<u64> {
        params.validate(&self.inner.limits)?;
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

    async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
        let mut inv = self.call(&SCRIPTS.item_get);
        inv.arg(id.to_string());
        let flat: Flat = self.read(&inv).await?;
        if flat.is_empty() {
            return Ok(None);
        }
        rows::item(id, flat).map(Some)
    }

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

    async fn instance_heartbeat(&self, params: HeartbeatParams) -> Result<()> {
        let mut inv = self.call(&SCRIPTS.heartbeat);
        inv.arg(self.now()).arg(params.instance.as_str());
        let _: i64 = self.write(&inv).await?;
        Ok(())
    }

    async fn instance_list(&self) -> Result<Vec<Instance>> {
        let inv = self.call(&SCRIPTS.instance_list);
        let rows: Vec<(String, i64, i64)> = self.read(&inv).await?;
        rows.into_iter()
            .map(|(id, started, seen)| {
                Ok(Instance {
                    id: OwnerId::new(id)?,
                    started_at: Timestamp::from_micros(started),
                    last_seen: Timestamp::from_micros(seen),
                })
            })
            .collect()
    }

    async fn instance_evict_stale(&self, params: EvictParams) -> Result<Evicted> {
        params.validate(&self.inner.limits)?;
        let mut inv = self.call(&SCRIPTS.evict);
        inv.arg(self.now()).arg(duration_micros(params.stale_after));
        let answer: Vec<Value> = self.write(&inv).await?;
        let Some((released, ids)) = answer.split_first() else {
            return Err(bad_reply("instance_evict_stale answered nothing"));
        };
        let instances = ids
            .iter()
            .map(|id| OwnerId::new(string_of(id)?))
            .collect::<Result<Vec<_>>>()?;
        Ok(Evicted {
            instances,
            released: u64_of(int_of(released)?),
        })
    }

    async fn instance_deregister(&self, params: DeregisterParams) -> Result<Evicted> {
        let mut inv = self.call(&SCRIPTS.deregister);
        inv.arg(self.now()).arg(params.instance.as_str());
        let (released, registered): (i64, i64) = self.write(&inv).await?;
        Ok(Evicted {
            instances: if registered == 1 {
                vec![params.instance]
            } else {
                Vec::new()
            },
            released: u64_of(released),
        })
    }

    async fn leader_acquire(&self, params: LeaderParams) -> Result<LeaderStatus> {
        params.validate(&self.inner.limits)?;
        let mut inv = self.call(&SCRIPTS.leader_acquire);
        inv.arg(self.now())
            .arg(params.name.as_str())
            .arg(params.holder.as_str())
            .arg(duration_micros(params.lease_for));
        let answer: Vec<Value> = self.write(&inv).await?;
        match answer.as_slice() {
            [lead, term, expires] if int_of(lead)? == 1 => Ok(LeaderStatus::Leader {
                term: u64_of(int_of(term)?),
                expires_at: Timestamp::from_micros(int_of(expires)?),
            }),
            [_, holder, term, expires] => Ok(LeaderStatus::Follower {
                holder: OwnerId::new(string_of(holder)?)?,
                term: u64_of(int_of(term)?),
                expires_at: Timestamp::from_micros(int_of(expires)?),
            }),
            other => Err(bad_reply(format!("leader_acquire answered {other:?}"))),
        }
    }

    async fn leader_resign(&self, params: LeaderParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        let mut inv = self.call(&SCRIPTS.leader_resign);
        inv.arg(self.now())
            .arg(params.name.as_str())
            .arg(params.holder.as_str());
        let n: i64 = self.write(&inv).await?;
        Ok(n == 1)
    }

    async fn leader_get(&self, name: &LeaderName) -> Result<Option<LeaderInfo>> {
        let mut inv = self.call(&SCRIPTS.leader_get);
        inv.arg(self.now()).arg(name.as_str());
        let answer: Vec<Value> = self.read(&inv).await?;
        match answer.as_slice() {
            [] => Ok(None),
            [holder, term, expires] => Ok(Some(LeaderInfo::new(
                OwnerId::new(string_of(holder)?)?,
                u64_of(int_of(term)?),
                Timestamp::from_micros(int_of(expires)?),
            ))),
            other => Err(bad_reply(format!("leader_get answered {other:?}"))),
        }
    }

    async fn item_list(
        &self,
        params: tenure_core::ItemListParams,
    ) -> Result<tenure_core::ItemPage> {
        params.validate(&self.inner.limits)?;
        self.op_item_list(params).await
    }

    async fn lease_list(
        &self,
        params: tenure_core::LeaseListParams,
    ) -> Result<tenure_core::LeasePage> {
        params.validate(&self.inner.limits)?;
        self.op_lease_list(params).await
    }

    async fn queue_list(&self) -> Result<Vec<QueueName>> {
        self.op_queue_list().await
    }

    async fn item_cancel(
        &self,
        params: tenure_core::CancelParams,
    ) -> Result<Vec<tenure_core::CancelOutcome>> {
        params.validate(&self.inner.limits)?;
        self.op_item_cancel(params).await
    }

    async fn queue_pause(&self, params: tenure_core::PauseParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        self.op_set_paused(params, true).await
    }

    async fn queue_resume(&self, params: tenure_core::PauseParams) -> Result<bool> {
        params.validate(&self.inner.limits)?;
        self.op_set_paused(params, false).await
    }
}

fn token_outcomes(answers: Vec<i64>) -> Vec<TokenOutcome> {
    answers
        .into_iter()
        .map(|a| {
            if a == 1 {
                TokenOutcome::Accepted
            } else {
                TokenOutcome::LeaseLost
            }
        })
        .collect()
}
