//! [`RedisConfig`]: how a [`RedisStore`](crate::RedisStore) connects.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::{ProtocolVersion, RedisConnectionInfo};
use tenure_core::{Clock, Error, Limits, Result, SharedClock, SystemClock};

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

/// The URL schemes of a Redis store, lowercase: [`RedisConfig::from_url`] reads them,
/// and `tenure::open` routes them here.
pub const URL_SCHEMES: &[&str] = &["redis", "rediss", SENTINEL_SCHEME, CLUSTER_SCHEME];

/// Connections a store opens by default (see [`RedisConfig::connections`]).
const DEFAULT_CONNECTIONS: usize = 4;

impl RedisConfig {
    /// Connect to `url` with every default: prefix `tenure`, the
    /// system clock, default [`Limits`], finished items deleted, pub/sub wake-ups on, a
    /// 2 s connect timeout, a 10 s response timeout, no `WAIT` for replicas, calls
    /// spread over 4 connections.
    ///
    /// The URL names one server, a Sentinel-watched primary, or a Cluster:
    ///
    /// | URL | connects to |
    /// |---|---|
    /// | `redis://[user:password@]host[:port][/db]` | one server (`rediss://` when the driver is built with TLS) |
    /// | `redis+sentinel://[user:password@]host[:port],host[:port],.../master_name[/db][?sentinel_username=..&sentinel_password=..]` | the primary the sentinels name for `master_name`, asked again after every connection failure (sentinel port default 26379) |
    /// | `redis+cluster://[user:password@]host[:port],host[:port],...` | a Redis Cluster, found from any of the hosts (port default 6379) |
    ///
    /// The user and password, percent-encoded, are those of the data nodes (primary,
    /// replicas, cluster nodes); the sentinels' own, if they need any, are the
    /// `sentinel_username` and `sentinel_password` parameters. A host list that is
    /// empty or has an empty entry or a bad port, a Sentinel URL without its master
    /// name, a path on a Cluster URL (a cluster has only database 0) and any other
    /// parameter make [`RedisStore::connect`](crate::RedisStore::connect) answer
    /// [`Error::InvalidInput`](tenure_core::Error) naming the field (`hosts`,
    /// `master_name`, `db`, or `url` with the parameter's name), before any command
    /// is sent. See the crate docs for what each topology does on a failover.
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

    /// Reads a store URL of any form [`RedisConfig::new`] takes (`redis://`,
    /// `rediss://`, `redis+sentinel://`, `redis+cluster://`, the scheme in any case),
    /// with the store's own parameter `tenure_prefix=NAME` (default `tenure`, checked
    /// as [`RedisConfig::prefix`] says) taken out and the rest left for
    /// [`RedisStore::connect`](crate::RedisStore::connect) to check. Every other
    /// setting has its default.
    ///
    /// ```
    /// let c = tenure_redis::RedisConfig::from_url("Redis://cache:6379/0?tenure_prefix=jobs")?;
    /// assert_eq!((c.url(), c.prefix_name()), ("redis://cache:6379/0", "jobs"));
    /// # Ok::<(), tenure_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `url` for another scheme, or naming
    /// `tenure_prefix` when it is given twice, has no value or is not a valid prefix.
    pub fn from_url(url: &str) -> Result<Self> {
        let url = tenure_core::url_in_schemes(url, URL_SCHEMES)?;
        let (driver_url, prefix) = tenure_core::take_url_param(&url, "tenure_prefix")?;
        let mut config = RedisConfig::new(driver_url);
        if let Some(prefix) = prefix {
            tenure_core::validate_identifier("tenure_prefix", &prefix)?;
            config = config.prefix(&prefix);
        }
        Ok(config)
    }

    /// The URL the store connects to (without the store's own parameters).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The key prefix the store's keys are under.
    pub fn prefix_name(&self) -> &str {
        &self.prefix
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
    /// change for a single task or for batches of 100). A Cluster store keeps one
    /// cluster connection, which holds one multiplexed connection per node.
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

/// Where a store's commands go: what [`RedisConfig::new`]'s URL names.
#[derive(Clone, Debug)]
pub(crate) enum Topology {
    /// One server; the driver parses the URL.
    Node(String),
    /// The primary that the sentinels name for `master`.
    Sentinel {
        sentinels: Vec<(String, u16)>,
        master: String,
        /// How to log in to the primary (database, user, password).
        node: RedisConnectionInfo,
        /// How to log in to the sentinels.
        sentinel: RedisConnectionInfo,
    },
    /// A Redis Cluster found from `nodes`.
    Cluster {
        nodes: Vec<(String, u16)>,
        node: RedisConnectionInfo,
    },
}

/// The Sentinel URL scheme.
pub(crate) const SENTINEL_SCHEME: &str = "redis+sentinel";
/// The Cluster URL scheme.
pub(crate) const CLUSTER_SCHEME: &str = "redis+cluster";

/// Parses a store URL (see [`RedisConfig::new`]). `redis://` and `rediss://` URLs
/// are left to the driver; the Sentinel and Cluster forms are read here, every
/// field checked.
pub(crate) fn topology(url: &str) -> Result<Topology> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(Topology::Node(url.to_owned()));
    };
    let scheme = scheme.to_ascii_lowercase();
    let sentinel = match scheme.as_str() {
        SENTINEL_SCHEME => true,
        CLUSTER_SCHEME => false,
        _ => return Ok(Topology::Node(url.to_owned())),
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let mut node = RedisConnectionInfo::default();
    if let Some(userinfo) = userinfo {
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(p)),
            None => (userinfo, None),
        };
        node.username = Some(decode("url", user)?).filter(|u| !u.is_empty());
        node.password = password.map(|p| decode("url", p)).transpose()?;
    }
    let default_port = if sentinel { 26379 } else { 6379 };
    let hosts = hosts
        .split(',')
        .map(|h| host_port(h, default_port))
        .collect::<Result<Vec<_>>>()?;
    let mut params = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = decode("url", name)?;
        let value = decode("url", value)?;
        let known = sentinel && matches!(name.as_str(), "sentinel_username" | "sentinel_password");
        if !known {
            return Err(Error::invalid(
                "url",
                format!(
                    "{scheme}:// takes no parameter `{name}`{}",
                    if sentinel {
                        " (it takes sentinel_username and sentinel_password)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        if params.iter().any(|(n, _)| *n == name) {
            return Err(Error::invalid(
                "url",
                format!("parameter `{name}` is given twice"),
            ));
        }
        params.push((name, value));
    }
    if !sentinel {
        if !path.is_empty() {
            return Err(Error::invalid(
                "url",
                format!("{scheme}:// takes no path: a cluster has only database 0 (got /{path})"),
            ));
        }
        return Ok(Topology::Cluster { nodes: hosts, node });
    }
    let mut segments = path.split('/');
    let master = segments
        .next()
        .map(|m| decode("master_name", m))
        .transpose()?;
    let Some(master) = master.filter(|m| !m.is_empty()) else {
        return Err(Error::invalid(
            "master_name",
            "a redis+sentinel:// URL names the master after its hosts: \
             redis+sentinel://host:26379,host:26379/mymaster",
        ));
    };
    if let Some(db) = segments.next().filter(|d| !d.is_empty()) {
        node.db = db
            .parse::<i64>()
            .ok()
            .filter(|d| *d >= 0)
            .ok_or_else(|| Error::invalid("db", format!("{db:?} is not a database number")))?;
    }
    if let Some(extra) = segments.find(|s| !s.is_empty()) {
        return Err(Error::invalid(
            "url",
            format!("unexpected path segment {extra:?} after /{master}/<db>"),
        ));
    }
    let mut sentinel_login = RedisConnectionInfo::default();
    for (name, value) in params {
        if name == "sentinel_username" {
            sentinel_login.username = Some(value);
        } else {
            sentinel_login.password = Some(value);
        }
    }
    node.protocol = ProtocolVersion::RESP2;
    Ok(Topology::Sentinel {
        sentinels: hosts,
        master,
        node,
        sentinel: sentinel_login,
    })
}

/// One `host[:port]` (or `[v6]:port`) of a host list.
fn host_port(entry: &str, default_port: u16) -> Result<(String, u16)> {
    let bad = |why: &str| Error::invalid("hosts", format!("{entry:?}: {why}"));
    if entry.is_empty() {
        return Err(bad(
            "an empty host (the URL needs at least one host, comma-separated)",
        ));
    }
    let (host, port) = if let Some(v6) = entry.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or_else(|| bad("no closing ]"))?;
        match after {
            "" => (host, None),
            p => (
                host,
                Some(p.strip_prefix(':').ok_or_else(|| bad("expected :port"))?),
            ),
        }
    } else {
        match entry.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (entry, None),
        }
    };
    if host.is_empty() || host.contains(|c: char| c.is_whitespace() || "/?#@[]".contains(c)) {
        return Err(bad("not a host name"));
    }
    let port = match port {
        None => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad("not a port number"))?,
    };
    Ok((host.to_owned(), port))
}

/// Percent-decodes one URL component.
fn decode(field: &'static str, text: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    Error::invalid(field, format!("bad percent-encoding in {text:?}"))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| Error::invalid(field, format!("{text:?} is not UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(url: &str) -> &'static str {
        match topology(url) {
            Err(e) => e.invalid_field().unwrap_or("?"),
            Ok(t) => panic!("{url} was accepted: {t:?}"),
        }
    }

    #[test]
    fn tenure_prefix_is_taken_out_of_every_form_of_url() {
        for (url, rest, prefix) in [
            (
                "redis://h:6379/0?protocol=resp2&tenure_prefix=jobs",
                "redis://h:6379/0?protocol=resp2",
                "jobs",
            ),
            ("rediss://h", "rediss://h", "tenure"),
            (
                "REDIS+Sentinel://a,b/m?tenure_prefix=j",
                "redis+sentinel://a,b/m",
                "j",
            ),
            (
                "redis+cluster://?tenure_prefix=jobs",
                "redis+cluster://",
                "jobs",
            ),
        ] {
            let c = RedisConfig::from_url(url).unwrap();
            assert_eq!((c.url(), c.prefix_name()), (rest, prefix), "{url}");
        }
    }

    #[test]
    fn bad_urls_name_the_field_before_connecting() {
        for (bad, want) in [
            ("memcached://h", "url"),
            ("redis", "url"),
            ("redis://h?tenure_prefix=a}b", "tenure_prefix"),
            ("redis://h?tenure_prefix=", "tenure_prefix"),
            ("redis://h?tenure_prefix", "tenure_prefix"),
            ("redis://h?tenure_prefix=a&tenure_prefix=b", "tenure_prefix"),
        ] {
            let e = RedisConfig::from_url(bad).unwrap_err();
            assert_eq!(e.invalid_field(), Some(want), "{bad}: {e}");
        }
    }

    #[test]
    fn plain_urls_are_left_to_the_driver() {
        for url in [
            "redis://h:6379/0",
            "rediss://h",
            "REDIS://h",
            "unix:///tmp/r.sock",
        ] {
            assert!(
                matches!(topology(url).unwrap(), Topology::Node(u) if u == url),
                "{url}"
            );
        }
    }

    #[test]
    fn a_sentinel_url_names_the_sentinels_the_master_and_the_logins() {
        let t = topology(
            "redis+sentinel://u:p%40ss@h1:26380,h2,[::1]:5/mymaster/3\
             ?sentinel_username=su&sentinel_password=s%26p",
        )
        .unwrap();
        let Topology::Sentinel {
            sentinels,
            master,
            node,
            sentinel,
        } = t
        else {
            panic!("{t:?}");
        };
        assert_eq!(
            sentinels,
            [
                ("h1".to_owned(), 26380),
                ("h2".to_owned(), 26379),
                ("::1".to_owned(), 5)
            ]
        );
        assert_eq!(master, "mymaster");
        assert_eq!(
            (node.db, node.username.as_deref(), node.password.as_deref()),
            (3, Some("u"), Some("p@ss"))
        );
        assert_eq!(
            (sentinel.username.as_deref(), sentinel.password.as_deref()),
            (Some("su"), Some("s&p"))
        );
    }

    #[test]
    fn a_cluster_url_names_its_hosts_with_the_default_port() {
        let t = topology("Redis+Cluster://:secret@a,b:7001").unwrap();
        let Topology::Cluster { nodes, node } = t else {
            panic!("{t:?}");
        };
        assert_eq!(nodes, [("a".to_owned(), 6379), ("b".to_owned(), 7001)]);
        assert_eq!(
            (node.username, node.password.as_deref()),
            (None, Some("secret"))
        );
    }

    #[test]
    fn bad_sentinel_and_cluster_urls_name_the_field() {
        let cases = [
            ("redis+sentinel://h1:26379,h2:26379", "master_name"),
            ("redis+sentinel://h1:26379,h2:26379/", "master_name"),
            ("redis+sentinel:///mymaster", "hosts"),
            ("redis+sentinel://h1,,h2/mymaster", "hosts"),
            ("redis+sentinel://h1:port/mymaster", "hosts"),
            ("redis+sentinel://h1:0/mymaster", "hosts"),
            ("redis+sentinel://h1/mymaster/x", "db"),
            ("redis+sentinel://h1/mymaster/0/more", "url"),
            ("redis+sentinel://h1/mymaster?timeout=1", "url"),
            (
                "redis+sentinel://h1/m?sentinel_password=a&sentinel_password=b",
                "url",
            ),
            ("redis+cluster://", "hosts"),
            ("redis+cluster://?x=1", "hosts"),
            ("redis+cluster://a,", "hosts"),
            ("redis+cluster://a:99999", "hosts"),
            ("redis+cluster://a/0", "url"),
            ("redis+cluster://a?sentinel_password=x", "url"),
            ("redis+cluster://a?read_from_replicas=1", "url"),
            ("redis+cluster://%zz@a", "url"),
        ];
        for (url, want) in cases {
            assert_eq!(field(url), want, "{url}");
        }
        let err = topology("redis+cluster://a?tenure_prefx=jobs").unwrap_err();
        assert!(err.to_string().contains("tenure_prefx"), "{err}");
    }

    #[test]
    fn parameter_names_are_percent_decoded_before_matching() {
        let t = topology("redis+sentinel://h/m?sentinel%5Fpassword=x").unwrap();
        let Topology::Sentinel { sentinel, .. } = t else {
            panic!("{t:?}");
        };
        assert_eq!(sentinel.password.as_deref(), Some("x"));
    }
}
