//! Throwaway Redis topologies for the fault, failover and durability tests: one
//! `redis-server`, a primary with a replica and three sentinels, or a Redis Cluster,
//! each process on free loopback ports in a temporary directory of its own, stopped
//! by pid and killed when dropped. Also a [`Ledger`] store wrapper that records what
//! every `complete` was told.
//!
//! Self-contained (it needs `redis`, `tokio`, `tempfile`, `tenure-core`), so a
//! program outside this crate's tests can include it with
//! `#[path = ".../store-redis/tests/support/mod.rs"] mod support;`. That is also why it
//! is one file of over 600 lines: one `#[path]` brings all of it.
//!
//! Every helper that needs a binary answers `None` (after printing why) when it is
//! missing, and panics instead under CI (`TENURE_REQUIRE_STORES=1`).
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::collections::HashMap;
use std::future::Future;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

/// True when a missing server must fail the run (CI sets `TENURE_REQUIRE_STORES=1`).
pub fn required() -> bool {
    std::env::var("TENURE_REQUIRE_STORES").is_ok_and(|v| v == "1")
}

/// True when `program --version` runs; otherwise prints why the test is skipped, or
/// panics under CI.
pub fn have(program: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !ok {
        assert!(
            !required(),
            "{program} is required (TENURE_REQUIRE_STORES=1) but not installed"
        );
        eprintln!("skipped: no {program} on PATH");
    }
    ok
}

/// A free loopback port; with `bus`, one whose cluster bus port (`+10000`) is free
/// too.
pub fn free_port(bus: bool) -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !bus {
            return port;
        }
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// Polls `check` every 20 ms until it answers `Some`, or panics naming `what` after
/// `within`.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A plain connection to `url`, for the tests' own commands.
pub async fn admin(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// One command to the server on `port`, with a 1 s timeout for connecting and for
/// the answer; `None` when it does not answer (down, stopped) or answers an error.
pub async fn ask<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> Option<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let answer = async {
        let mut c = client.get_multiplexed_async_connection().await.ok()?;
        cmd.query_async::<T>(&mut c).await.ok()
    };
    tokio::time::timeout(Duration::from_secs(1), answer)
        .await
        .ok()
        .flatten()
}

/// One field of `INFO <section>` of the server on `port`.
pub async fn info_field(port: u16, section: &str, field: &str) -> Option<String> {
    let text: String = ask(port, redis::cmd("INFO").arg(section)).await?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_owned())
}

/// Waits until the replica on `port` reports `master_link_status:up`.
pub async fn wait_linked(port: u16) {
    eventually(
        Duration::from_secs(30),
        "the replica's link to be up",
        || async {
            (info_field(port, "replication", "master_link_status")
                .await
                .as_deref()
                == Some("up"))
            .then_some(())
        },
    )
    .await;
}

/// A `redis-server` process of our own (a data node or a sentinel).
pub struct TempRedis {
    pub port: u16,
    pub dir: tempfile::TempDir,
    argv: Vec<String>,
    child: Option<Child>,
}

impl TempRedis {
    /// Starts `redis-server` with `args` on a free port in a fresh directory (no RDB
    /// snapshots), or answers `None` (after printing why) when there is no
    /// `redis-server` and none is required.
    pub async fn start(args: &[&str]) -> Option<TempRedis> {
        if !have("redis-server") {
            return None;
        }
        Some(Self::data_node(free_port(false), args).await)
    }

    /// A data node on `port` with `args`, started and answering.
    pub async fn data_node(port: u16, args: &[&str]) -> TempRedis {
        let dir = tempfile::tempdir().unwrap();
        let mut argv: Vec<String> = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
            "--dir".into(),
            dir.path().display().to_string(),
            "--logfile".into(),
            dir.path().join("redis.log").display().to_string(),
        ];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let mut server = TempRedis {
            port,
            dir,
            argv,
            child: None,
        };
        server.boot().await;
        server
    }

    /// A sentinel on a free port watching `master_name` at `primary_port`, quorum 2,
    /// deciding the primary is down after `down_after` and giving a failover
    /// `failover_timeout`.
    pub async fn sentinel(
        master_name: &str,
        primary_port: u16,
        down_after: Duration,
        failover_timeout: Duration,
    ) -> TempRedis {
        let port = free_port(false);
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {dir}/sentinel.log\n\
                 sentinel monitor {master_name} 127.0.0.1 {primary_port} 2\n\
                 sentinel down-after-milliseconds {master_name} {down}\n\
                 sentinel failover-timeout {master_name} {failover}\n\
                 sentinel parallel-syncs {master_name} 1\n",
                dir = dir.path().display(),
                down = down_after.as_millis(),
                failover = failover_timeout.as_millis(),
            ),
        )
        .unwrap();
        let mut server = TempRedis {
            port,
            dir,
            argv: vec![conf.display().to_string(), "--sentinel".into()],
            child: None,
        };
        server.boot().await;
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts the process on the same port and directory, and waits until it answers
    /// `PING` with `PONG` (so it has loaded its data).
    pub async fn boot(&mut self) {
        let child = Command::new("redis-server")
            .args(&self.argv)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let port = self.port;
        let log = self.dir.path().display().to_string();
        eventually(
            Duration::from_secs(20),
            &format!("redis-server on port {port} to answer (logs in {log})"),
            || async {
                let pong: Option<String> = ask(port, &redis::cmd("PING")).await;
                (pong.as_deref() == Some("PONG")).then_some(())
            },
        )
        .await;
    }

    /// Kills the process (SIGKILL: no shutdown, no final save) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the process where it is (SIGSTOP): it keeps its sockets and answers
    /// nothing until [`Self::resume`].
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused process run again (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, which: &str) {
        let pid = self.pid().expect("the process runs");
        let ok = Command::new("kill")
            .arg(which)
            .arg(pid.to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {which} {pid}");
    }

    /// The server's log, for a failure message.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }
}

impl Drop for TempRedis {
    fn drop(&mut self) {
        // SIGKILL ends a stopped process too.
        self.kill();
    }
}

/// A primary, one replica linked to it, and three sentinels watching it (quorum 2).
pub struct SentinelSet {
    pub master_name: String,
    /// The servers by port: the primary and the replica at the start (roles change
    /// with failovers; ask [`Self::primary_port`]).
    pub nodes: HashMap<u16, TempRedis>,
    pub sentinels: Vec<TempRedis>,
    pub first_primary: u16,
    pub first_replica: u16,
    pub down_after: Duration,
    pub failover_timeout: Duration,
}

impl SentinelSet {
    /// Starts the set with `args` for both data nodes and waits until the replica is
    /// linked and every sentinel knows the replica and the two other sentinels, so a
    /// failover can happen; `None` (after printing why) without `redis-server`.
    pub async fn start(
        args: &[&str],
        down_after: Duration,
        failover_timeout: Duration,
    ) -> Option<SentinelSet> {
        if !have("redis-server") {
            return None;
        }
        let master_name = "tenure".to_owned();
        let primary = TempRedis::data_node(free_port(false), args).await;
        let mut replica_args: Vec<&str> = args.to_vec();
        let primary_port = primary.port.to_string();
        replica_args.extend(["--replicaof", "127.0.0.1", &primary_port]);
        let replica = TempRedis::data_node(free_port(false), &replica_args).await;
        wait_linked(replica.port).await;
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            sentinels.push(
                TempRedis::sentinel(&master_name, primary.port, down_after, failover_timeout).await,
            );
        }
        let set = SentinelSet {
            master_name,
            first_primary: primary.port,
            first_replica: replica.port,
            nodes: [(primary.port, primary), (replica.port, replica)]
                .into_iter()
                .collect(),
            sentinels,
            down_after,
            failover_timeout,
        };
        set.wait_sentinels_ready().await;
        Some(set)
    }

    /// Waits until every sentinel knows a replica and two peers.
    pub async fn wait_sentinels_ready(&self) {
        for s in &self.sentinels {
            let name = self.master_name.clone();
            eventually(
                Duration::from_secs(30),
                "every sentinel to know the replica and its two peers",
                || {
                    let name = name.clone();
                    async move {
                        let replicas: Vec<redis::Value> =
                            ask(s.port, redis::cmd("SENTINEL").arg("REPLICAS").arg(&name)).await?;
                        let peers: Vec<redis::Value> =
                            ask(s.port, redis::cmd("SENTINEL").arg("SENTINELS").arg(&name)).await?;
                        (!replicas.is_empty() && peers.len() == 2).then_some(())
                    }
                },
            )
            .await;
        }
    }

    /// `redis+sentinel://` naming the three sentinels and the master.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{}", hosts.join(","), self.master_name)
    }

    /// The port of the primary as the first sentinel that answers names it.
    pub async fn primary_port(&self) -> Option<u16> {
        for s in &self.sentinels {
            let addr: Option<(String, u16)> = ask(
                s.port,
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(&self.master_name),
            )
            .await;
            if let Some((_, port)) = addr {
                return Some(port);
            }
        }
        None
    }

    /// Waits until every sentinel names `port` as the primary and that server says
    /// it is one.
    pub async fn wait_primary(&self, port: u16, within: Duration) {
        eventually(
            within,
            &format!("the sentinels to name {port} the primary"),
            || async {
                for s in &self.sentinels {
                    let addr: Option<(String, u16)> = ask(
                        s.port,
                        redis::cmd("SENTINEL")
                            .arg("GET-MASTER-ADDR-BY-NAME")
                            .arg(&self.master_name),
                    )
                    .await;
                    if addr.map(|a| a.1) != Some(port) {
                        return None;
                    }
                }
                (info_field(port, "replication", "role").await.as_deref() == Some("master"))
                    .then_some(())
            },
        )
        .await;
    }

    pub fn node(&mut self, port: u16) -> &mut TempRedis {
        self.nodes.get_mut(&port).expect("a node of the set")
    }
}

/// A Redis Cluster of `primaries` primaries with `replicas` replicas each, made by
/// `redis-cli --cluster create`.
pub struct TempCluster {
    pub nodes: HashMap<u16, TempRedis>,
    /// The node ports in start order.
    pub ports: Vec<u16>,
}

impl TempCluster {
    /// Starts the nodes (`--cluster-node-timeout` as given) and creates the
    /// cluster; waits until every node reports `cluster_state:ok` and every replica
    /// is linked. `None` (after printing why) without `redis-server` or `redis-cli`.
    pub async fn start(
        primaries: usize,
        replicas: usize,
        node_timeout: Duration,
        args: &[&str],
    ) -> Option<TempCluster> {
        if !have("redis-server") || !have("redis-cli") {
            return None;
        }
        let timeout = node_timeout.as_millis().to_string();
        let mut node_args: Vec<&str> = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &timeout,
        ];
        node_args.extend(args);
        let mut nodes = HashMap::new();
        let mut ports = Vec::new();
        for _ in 0..primaries * (1 + replicas) {
            let port = free_port(true);
            nodes.insert(port, TempRedis::data_node(port, &node_args).await);
            ports.push(port);
        }
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for p in &ports {
            create.arg(format!("127.0.0.1:{p}"));
        }
        let out = create
            .arg("--cluster-replicas")
            .arg(replicas.to_string())
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli runs");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = TempCluster { nodes, ports };
        cluster.wait_healthy().await;
        Some(cluster)
    }

    /// Waits until every running node reports `cluster_state:ok`, every replica is
    /// linked, and all of them agree on the primaries.
    pub async fn wait_healthy(&self) {
        let ports: Vec<u16> = self.nodes.keys().copied().collect();
        eventually(Duration::from_secs(60), "the cluster to be healthy", || {
            let ports = ports.clone();
            async move {
                for p in &ports {
                    let info: String = ask(*p, redis::cmd("CLUSTER").arg("INFO")).await?;
                    if !info.contains("cluster_state:ok") {
                        return None;
                    }
                    if info_field(*p, "replication", "role").await?.as_str() == "slave"
                        && info_field(*p, "replication", "master_link_status")
                            .await?
                            .as_str()
                            != "up"
                    {
                        return None;
                    }
                }
                Some(())
            }
        })
        .await;
    }

    /// `redis+cluster://` naming every node.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The port of the primary serving `slot`, as the first node that answers
    /// `CLUSTER SLOTS` sees it.
    pub async fn primary_of(&self, slot: u16) -> Option<u16> {
        for p in &self.ports {
            if self.nodes.get(p).is_none_or(|n| n.pid().is_none()) {
                continue;
            }
            let Some(ranges) =
                ask::<Vec<redis::Value>>(*p, redis::cmd("CLUSTER").arg("SLOTS")).await
            else {
                continue;
            };
            for range in ranges {
                let redis::Value::Array(f) = range else {
                    continue;
                };
                let start: i64 = redis::from_redis_value(&f[0]).ok()?;
                let end: i64 = redis::from_redis_value(&f[1]).ok()?;
                if (start..=end).contains(&i64::from(slot)) {
                    let redis::Value::Array(primary) = &f[2] else {
                        return None;
                    };
                    let port: i64 = redis::from_redis_value(&primary[1]).ok()?;
                    return u16::try_from(port).ok();
                }
            }
        }
        None
    }

    /// The cluster slot of `key`, as the server on any node computes it.
    pub async fn keyslot(&self, key: &str) -> u16 {
        let port = self.ports[0];
        ask(port, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
            .await
            .expect("CLUSTER KEYSLOT")
    }

    /// The ports of the replicas of the primary on `port`.
    pub async fn replicas_of(&self, port: u16) -> Vec<u16> {
        let mut out = Vec::new();
        for (p, n) in &self.nodes {
            if n.pid().is_none() || *p == port {
                continue;
            }
            if info_field(*p, "replication", "master_port")
                .await
                .as_deref()
                == Some(&port.to_string())
            {
                out.push(*p);
            }
        }
        out
    }

    pub fn node(&mut self, port: u16) -> &mut TempRedis {
        self.nodes.get_mut(&port).expect("a node of the cluster")
    }
}

/// What every `complete` through a [`Ledger`] was told, per token.
#[derive(Default, Debug)]
pub struct Told {
    /// Tokens a complete answered `Accepted` for, in order, with when the answer
    /// came.
    pub accepted: Vec<(tenure_core::LeaseToken, Instant)>,
    /// Tokens a complete answered `LeaseLost` for.
    pub lost: Vec<tenure_core::LeaseToken>,
    /// Tokens of completes that got no answer (an error): applied or not.
    pub unanswered: Vec<tenure_core::LeaseToken>,
}

/// A store wrapper that records what each `complete` was told; every other call
/// passes through.
#[derive(Clone, Debug)]
pub struct Ledger<S> {
    pub inner: S,
    pub told: Arc<Mutex<Told>>,
}

impl<S> Ledger<S> {
    pub fn new(inner: S) -> Self {
        Ledger {
            inner,
            told: Arc::default(),
        }
    }
}

tenure_core::forward_store! {
    impl<S: tenure_core::Store> tenure_core::Store for Ledger<S> {
        forward self => self.inner;

        async fn complete(
            &self,
            p: tenure_core::CompleteParams,
        ) -> tenure_core::Result<Vec<tenure_core::TokenOutcome>> {
            let tokens = p.tokens.clone();
            let answer = self.inner.complete(p).await;
            let mut told = self.told.lock().unwrap();
            match &answer {
                Ok(outcomes) => {
                    for (t, o) in tokens.iter().zip(outcomes) {
                        match o {
                            tenure_core::TokenOutcome::Accepted => {
                                told.accepted.push((*t, Instant::now()))
                            }
                            tenure_core::TokenOutcome::LeaseLost
                            | tenure_core::TokenOutcome::OutOfOrder => told.lost.push(*t),
                        }
                    }
                }
                Err(_) => told.unanswered.extend(tokens),
            }
            answer
        }
    }
}
