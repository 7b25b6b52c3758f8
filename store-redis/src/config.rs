//! [`RedisConfig`]: how a [`RedisStore`](crate::RedisStore) connects.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tenure_core::{Clock, Limits, SharedClock, SystemClock};

/// How a [`RedisStore`](crate::RedisStore) connects, built with [`RedisConfig::new`] and
/// its builder methods.
///
/// ```
/// use std::time::Duration;
/// use tenure_redis::RedisConfig;
///
/// let config = RedisConfig::new("redis://cache.internal:6379/0")
///     .prefix("jobs")
///     .response_timeout(Duration::from_secs(5));
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct RedisConfig {
    pub(crate) url: String,
    pub(crate) prefix: String,
    pub(crate) clock: SharedClock,
    pub(crate) limits: Limits,
    pub(crate) keep_done: bool,
    pub(crate) listen: bool,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) wait_replicas: Option<(u32, Duration)>,
    pub(crate) connections: usize,
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may carry a password: show only where it points.
        let shown = self
            .url
            .rsplit_once('@')
            .map_or(self.url.as_str(), |(_, host)| host);
        f.debug_struct("RedisConfig")
            .field("url", &format_args!("…@{shown}"))
            .field("prefix", &self.prefix)
            .field("keep_done", &self.keep_done)
            .field("listen", &self.listen)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("wait_replicas", &self.wait_replicas)
            .field("connections", &self.connections)
            .finish_non_exhaustive()
    }
}

/// Connections a store opens by default (see [`RedisConfig::connections`]).
const DEFAULT_CONNECTIONS: usize = 4;

impl RedisConfig {
    /// Connect to `url` (`redis://[user:password@]host[:port][/db]`, or `rediss://`
    /// when the driver is built with TLS) with every default: prefix `tenure`, the
    /// system clock, default [`Limits`], finished items deleted, pub/sub wake-ups on, a
    /// 2 s connect timeout, a 10 s response timeout, no `WAIT` for replicas, calls
    /// spread over 4 connections.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: "tenure".to_owned(),
            clock: Arc::new(SystemClock),
            limits: Limits::default(),
            keep_done: false,
            listen: true,
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(10),
            wait_replicas: None,
            connections: DEFAULT_CONNECTIONS,
        }
    }

    /// The key prefix (default `tenure`): every key of the store is
    /// `{<prefix>}:...`, so all of them hash to one Redis Cluster slot. It must be
    /// 1..=48 lowercase ASCII letters, digits and `_`, not starting with a digit;
    /// anything else makes [`RedisStore::connect`](crate::RedisStore::connect) answer
    /// [`Error::InvalidInput`](tenure_core::Error) naming `prefix`, before any command
    /// is sent. Stores with different prefixes share nothing.
    pub fn prefix(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.prefix);
        self
    }

    /// The clock every comparison and every written time reads (default: the system
    /// clock). Its time is passed into every script; the server's `TIME` is never read.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The input bounds the store enforces (G15).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Keep finished items as `done` until [`purge`](tenure_core::Store::purge) removes
    /// them, instead of deleting them at once (default `false`).
    pub fn keep_done(mut self, keep: bool) -> Self {
        self.keep_done = keep;
        self
    }

    /// Pub/sub wake-ups (default `true`): every enqueue that inserts publishes once on
    /// the prefix's channel and a dedicated connection subscribes to it, firing the
    /// store's [`wake_signal`](tenure_core::Store::wake_signal). A latency hint only;
    /// polling remains the fallback.
    pub fn listen(mut self, listen: bool) -> Self {
        self.listen = listen;
        self
    }

    /// How long opening a connection may take before the call answers
    /// [`Error::Unavailable`](tenure_core::Error) (default 2 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a call waits for the server's answer before it answers
    /// [`Error::Unavailable`](tenure_core::Error) (default 10 s). The script may still
    /// have run; every finalize is fenced, so retrying it is safe.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// How many multiplexed connections the store's calls take turns on (default 4,
    /// at least 1), each opened on first use. One connection pipelines every
    /// concurrent call already, but its one reader and writer serialize them; small
    /// calls from several tasks go about 1.5x faster over 4 (one claim and one
    /// complete per item, 4 tasks: 13.2-13.8k items/s on 1, 20.5-20.7k on 4, with no
    /// change for a single task or for batches of 100).
    pub fn connections(mut self, n: usize) -> Self {
        self.connections = n.max(1);
        self
    }

    /// After every script that writes, send `WAIT replicas timeout` and answer
    /// [`Error::Unavailable`](tenure_core::Error) when fewer than `replicas` replicas
    /// acknowledged the write in time (default: no `WAIT`). See the crate docs on
    /// durability: the write itself is not undone, so the caller retries it, which
    /// the fence makes safe.
    pub fn wait_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait_replicas = Some((replicas, timeout));
        self
    }
}
