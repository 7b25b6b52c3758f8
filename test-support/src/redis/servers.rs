//! Throwaway Redis servers for the fault, failover and durability tests: one
//! `redis-server`, or a primary with a replica and three sentinels, each process on
//! free loopback ports in a temporary directory of its own, stopped by pid and killed
//! when dropped. A Redis Cluster is in [`super::cluster`].
//!
//! Every helper that needs a binary answers `None` (after printing why) when it is
//! missing, and panics instead under CI (`TENURE_REQUIRE_STORES=1`).

use std::collections::HashMap;
use std::future::Future;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
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
        return crate::skip::<()>(program, "not installed (not on PATH)").is_some();
    }
    ok
}

/// A free loopback port; with `bus`, one whose cluster bus port (`+10000`) is free
/// too.
pub fn free_port(bus: bool) -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("a free loopback port")
            .local_addr()
            .expect("a bound address")
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
        .expect("a Redis URL")
        .get_multiplexed_async_connection()
        .await
        .expect("a connection to Redis")
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
    /// Its loopback port.
    pub port: u16,
    /// Its directory: data, configuration and log.
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
        let dir = tempfile::tempdir().expect("a temporary directory");
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
        let dir = tempfile::tempdir().expect("a temporary directory");
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
        .expect("sentinel.conf is written");
        let mut server = TempRedis {
            port,
            dir,
            argv: vec![conf.display().to_string(), "--sentinel".into()],
            child: None,
        };
        server.boot().await;
        server
    }

    /// `redis://` naming it.
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
            .expect("kill runs")
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
    /// The name the sentinels watch the primary by.
    pub master_name: String,
    /// The servers by port: the primary and the replica at the start (roles change
    /// with failovers; ask [`Self::primary_port`]).
    pub nodes: HashMap<u16, TempRedis>,
    /// The three sentinels.
    pub sentinels: Vec<TempRedis>,
    /// The port of the primary at the start.
    pub first_primary: u16,
    /// The port of the replica at the start.
    pub first_replica: u16,
    /// How long the sentinels wait before they call the primary down.
    pub down_after: Duration,
    /// The sentinels' failover timeout.
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

    /// The data node on `port`.
    pub fn node(&mut self, port: u16) -> &mut TempRedis {
        self.nodes.get_mut(&port).expect("a node of the set")
    }
}
