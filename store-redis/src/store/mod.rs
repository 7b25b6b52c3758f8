//! [`RedisStore`]: the [`Store`] contract on Redis, one library function per operation.
//!
//! This file holds the struct, its connections and the calls of the library's
//! functions, and its [`Base`] impl. Each group of the contract is implemented in its own
//! file (`claim.rs`, `finalize.rs`, `recovery.rs`, `instances.rs`, `inspect.rs`,
//! `limits.rs`; see the crate docs, Layout of this crate); core's [`Store`] validates the
//! params before they reach it. `admin.rs` holds the whole-prefix housekeeping, which is
//! outside the contract.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use redis::{AsyncConnectionConfig, Cmd, FromRedisValue, RedisResult, Value};
use tenure_core::contract::Base;
use tenure_core::{
    validate_identifier, Capabilities, Error, ItemId, LeaseId, Limits, Result, SharedClock,
    Timestamp, WakeHealth, WakeSignal,
};

// The docs name it.
#[cfg(doc)]
use tenure_core::Store;
use tokio::task::JoinHandle;

use crate::config::topology;
use crate::connect::{Conn, Target};
use crate::error::{bad_reply, map, needs_reconnect};
use crate::scripts::SCRIPTS;
use crate::{listen, RedisConfig, STORE};

mod admin;
mod claim;
mod finalize;
mod history;
mod inspect;
mod instances;
mod limits;
mod recovery;

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
    /// Limits were set, read or waited on through this handle (G16): a finish may free
    /// a slot a worker waits for, so finishes fire the wake signal.
    limited: std::sync::atomic::AtomicBool,
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
                limited: std::sync::atomic::AtomicBool::new(false),
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

impl Base for RedisStore {
    fn name(&self) -> &'static str {
        STORE
    }

    fn capabilities(&self) -> Capabilities {
        let caps = Capabilities::default()
            .with_partitioned_claiming()
            .with_stream_runs()
            .with_limits()
            .with_fair_shares();
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
}
