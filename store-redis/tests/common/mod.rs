//! Throwaway `redis-server` processes for the fault and durability tests: each on a
//! free port with a temporary directory of its own, killed when dropped.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// True when a missing server must fail the run (CI sets `TENURE_REQUIRE_STORES=1`).
pub fn required() -> bool {
    std::env::var("TENURE_REQUIRE_STORES").is_ok_and(|v| v == "1")
}

/// `TENURE_REDIS_URL`, or the local default.
pub fn url() -> String {
    std::env::var("TENURE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A `redis-server` of our own.
pub struct TempRedis {
    pub port: u16,
    pub dir: tempfile::TempDir,
    args: Vec<String>,
    child: Option<Child>,
}

impl TempRedis {
    /// Starts `redis-server` with `args` on a free port in a fresh directory, or answers
    /// `None` (after printing why) when there is no `redis-server` and none is required.
    pub async fn start(args: &[&str]) -> Option<TempRedis> {
        if Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_err()
        {
            assert!(
                !required(),
                "redis-server is required (TENURE_REQUIRE_STORES=1) but not installed"
            );
            eprintln!("skipped: no redis-server on PATH");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = TempRedis {
            port,
            dir: tempfile::tempdir().unwrap(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            child: None,
        };
        server.boot().await;
        Some(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the process on the same port and directory, and waits until it answers
    /// `PING` with `PONG` (so it has loaded its data).
    pub async fn boot(&mut self) {
        let child = Command::new("redis-server")
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", ""])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log())
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let client = redis::Client::open(self.url()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let answer = async {
                let mut c = client.get_multiplexed_async_connection().await?;
                redis::cmd("PING").query_async::<String>(&mut c).await
            };
            if let Ok(Ok(pong)) = tokio::time::timeout(Duration::from_secs(1), answer).await {
                if pong == "PONG" {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer; see {}",
                self.port,
                self.log().display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kills the process (SIGKILL: no shutdown, no final save) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }
}

impl Drop for TempRedis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A plain connection to `url`, for the tests' own commands.
pub async fn admin(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A store on the shared server under a fresh prefix `<kind>_<uuid>`, on `clock`, with
/// the listener off, and its prefix; `None` as [`on_shared_server`] answers it.
pub async fn on_fresh_prefix(
    kind: &str,
    clock: &tenure_core::ManualClock,
) -> Option<(tenure_redis::RedisStore, String)> {
    let prefix = format!("{kind}_{}", uuid::Uuid::now_v7().simple());
    let store = on_shared_server(
        tenure_redis::RedisConfig::new(url())
            .prefix(&prefix)
            .clock(clock.clone())
            .listen(false),
    )
    .await?;
    Some((store, prefix))
}

/// A store on the shared server (`TENURE_REDIS_URL`) with `config`'s settings, or
/// `None` (after printing why) when the server does not answer and none is required.
pub async fn on_shared_server(
    config: tenure_redis::RedisConfig,
) -> Option<tenure_redis::RedisStore> {
    let store = tenure_redis::RedisStore::connect(config).await.unwrap();
    if let Err(e) = store.ping().await {
        assert!(!required(), "Redis at {} is required: {e}", url());
        eprintln!("skipped: Redis at {} is unreachable ({e})", url());
        return None;
    }
    Some(store)
}
