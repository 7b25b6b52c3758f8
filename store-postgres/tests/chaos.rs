//! Server restarts in the middle of a claim loop: claims resume within seconds of the
//! server being back, every call made while it is gone answers `Error::Unavailable`,
//! and no item is lost or finalized twice.
//!
//! The test provisions a throwaway PostgreSQL cluster of its own (so the shared server
//! is never restarted), with `tenure_test_support::pg_cluster`: `initdb` into a fresh
//! temporary directory, a free port on 127.0.0.1, its unix socket in that directory,
//! trust auth and `fsync = off`. As root (PostgreSQL refuses to run as root) the
//! server tools run as the `postgres` OS user.
//! It then restarts that cluster twice while four workers claim and complete:
//!
//! 1. `pg_ctl -w -m fast restart`;
//! 2. `pg_ctl -w -m fast stop`, a 3 s outage, `pg_ctl -w start`.
//!
//! The cluster is killed and its directory removed at the end, also when the test
//! fails. The server tools are looked up with `pg_config --bindir`, under
//! `/usr/lib/postgresql/*/bin` and on `PATH`; without them the test is skipped with a
//! message, or fails when `TENURE_REQUIRE_STORES=1` (as in CI).
//!
//! To use a server of your own instead, set both
//!
//! - `TENURE_CHAOS_URL`: the server's URL;
//! - `TENURE_CHAOS_RESTART`: a shell command that restarts it and returns when it is
//!   accepting connections again (for example `pg_ctl -D ... restart -m fast -w`);
//!
//! only the restart then runs.
//!
//! Run: `cargo test -p tenure-postgres --test chaos -- --nocapture` (prints how long
//! claims took to resume after each restart returned; the test asserts under 10 s).
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tenure_test_support::pg_cluster as cluster;

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster::PgServer;
use tenure_core::*;
use tenure_postgres::{PgConfig, PgStore};

const LEASE: Duration = Duration::from_secs(30);
/// Workers, each claiming up to `CLAIM` items per call.
const WORKERS: usize = 4;
const CLAIM: u32 = 10;
/// Items completed between two disruptions, so each one hits a running claim loop.
const WARM: usize = 1_000;
/// Items left to claim when a disruption starts, so the resumed loop finds work.
const BACKLOG: usize = 5_000;
/// How long the stopped server stays down in the outage variant.
const OUTAGE: Duration = Duration::from_secs(3);
/// The promise under test: claims resume within this long of the server being back.
const RESUME_WITHIN: Duration = Duration::from_secs(10);

/// One way of taking the server away and bringing it back.
enum Disruption {
    /// `pg_ctl -w -m fast restart` on the test's own cluster.
    Restart,
    /// `pg_ctl -w -m fast stop`, [`OUTAGE`] of nothing, `pg_ctl -w start`.
    Outage,
    /// The shell command in `TENURE_CHAOS_RESTART`.
    Command(String),
}

impl Disruption {
    fn name(&self) -> &'static str {
        match self {
            Disruption::Restart => "pg_ctl restart -m fast",
            Disruption::Outage => "pg_ctl stop -m fast, 3 s outage, pg_ctl start",
            Disruption::Command(_) => "TENURE_CHAOS_RESTART",
        }
    }
}

/// Restarts or stops and starts our own server (`tenure_test_support::pg_cluster`).
async fn disrupt_own(server: &PgServer, how: &Disruption) {
    // pg_ctl blocks for a second or two: off the async workers' turn.
    match how {
        Disruption::Restart => tokio::task::block_in_place(|| server.restart()).unwrap(),
        Disruption::Outage => {
            tokio::task::block_in_place(|| server.stop()).unwrap();
            tokio::time::sleep(OUTAGE).await;
            tokio::task::block_in_place(|| server.start()).unwrap();
        }
        Disruption::Command(_) => unreachable!("our own cluster has no restart command"),
    }
}

/// Where the test's server comes from.
enum Server {
    Own(PgServer),
    Given { url: String, restart: String },
}

impl Server {
    /// The variables' server, else a fresh cluster, else `None` (skipped, said why).
    async fn get() -> Option<Server> {
        match (
            std::env::var("TENURE_CHAOS_URL"),
            std::env::var("TENURE_CHAOS_RESTART"),
        ) {
            (Ok(url), Ok(restart)) => return Some(Server::Given { url, restart }),
            (Err(_), Err(_)) => {}
            _ => panic!("set both TENURE_CHAOS_URL and TENURE_CHAOS_RESTART, or neither"),
        }
        let bindir = cluster::bindir_or_skip()?;
        Some(Server::Own(PgServer::primary(&bindir).unwrap()))
    }

    fn url(&self) -> String {
        match self {
            Server::Own(c) => c.url(),
            Server::Given { url, .. } => url.clone(),
        }
    }

    fn disruptions(&self) -> Vec<Disruption> {
        match self {
            Server::Own(_) => vec![Disruption::Restart, Disruption::Outage],
            Server::Given { restart, .. } => vec![Disruption::Command(restart.clone())],
        }
    }

    async fn disrupt(&self, how: &Disruption) {
        match (self, how) {
            (Server::Own(c), how) => disrupt_own(c, how).await,
            (Server::Given { .. }, Disruption::Command(restart)) => {
                let restart = restart.clone();
                let status = tokio::task::spawn_blocking(move || {
                    Command::new("sh").arg("-c").arg(&restart).status()
                })
                .await
                .unwrap()
                .unwrap();
                assert!(status.success(), "TENURE_CHAOS_RESTART failed: {status}");
            }
            (Server::Given { .. }, _) => unreachable!("a given server is only restarted"),
        }
    }
}

/// What the workers saw, shared with the test.
#[derive(Default)]
struct Seen {
    /// Items whose complete answered Accepted, and how often.
    accepted: Mutex<HashMap<ItemId, u32>>,
    done: AtomicUsize,
    /// Calls that answered Unavailable.
    unavailable: AtomicUsize,
    /// When each complete call that succeeded returned.
    ok_at: Mutex<Vec<Instant>>,
    /// The first answer that was neither a success nor Unavailable.
    wrong: Mutex<Option<String>>,
    stop: AtomicBool,
}

impl Seen {
    /// Fails the test as soon as a worker was told anything but Unavailable.
    fn check(&self) {
        if let Some(w) = self.wrong.lock().unwrap().as_ref() {
            panic!("{w}");
        }
    }
}

/// Claims and completes until stopped. Unavailable is counted and retried; any other
/// error is recorded for the test to fail on.
async fn worker(store: PgStore, q: QueueName, owner: OwnerId, seen: Arc<Seen>) {
    let wrong = |what: &str, e: Error| {
        *seen.wrong.lock().unwrap() = Some(format!("{what} answered {e:?}, not Unavailable"));
    };
    while !seen.stop.load(Ordering::SeqCst) {
        let claim = ClaimParams::new(q.clone(), owner.clone(), CLAIM, LEASE);
        let leases = match store.claim(claim).await {
            Ok(l) => l,
            Err(Error::Unavailable { .. }) => {
                seen.unavailable.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(e) => return wrong("claim", e),
        };
        if leases.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
        match store.complete(CompleteParams::new(tokens.clone())).await {
            Ok(out) => {
                let mut acc = seen.accepted.lock().unwrap();
                for (t, o) in tokens.iter().zip(out) {
                    if o == TokenOutcome::Accepted {
                        *acc.entry(t.id).or_default() += 1;
                        seen.done.fetch_add(1, Ordering::SeqCst);
                    }
                }
                seen.ok_at.lock().unwrap().push(Instant::now());
            }
            // The items stay leased (or were finished and the answer lost): the drain
            // below lets their leases expire and checks where each one ended.
            Err(Error::Unavailable { .. }) => {
                seen.unavailable.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => return wrong("complete", e),
        }
    }
}

async fn enqueue(store: &PgStore, q: &QueueName, n: usize, ids: &mut Vec<ItemId>) {
    for chunk in 0..n.div_ceil(1_000) {
        let items: Vec<NewItem> = (0..1_000.min(n - chunk * 1_000))
            .map(|_| NewItem::new(q.clone(), b"x".to_vec()))
            .collect();
        ids.extend(items.iter().map(|it| it.id));
        store.enqueue(EnqueueParams::new(items)).await.unwrap();
    }
}

async fn wait_until(seen: &Seen, what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        seen.check();
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_resume_within_seconds_after_a_server_restart() {
    let Some(server) = Server::get().await else {
        return;
    };
    let url = server.url();
    let schema = format!("chaos_{}", uuid::Uuid::now_v7().simple());
    let clock = ManualClock::starting_now();
    let store = PgStore::connect(
        PgConfig::new(url.clone())
            .schema(&schema)
            .clock(clock.clone())
            // Finished rows stay, so the end can check where every item went.
            .keep_done(true)
            .max_connections(WORKERS as u32 + 2)
            .acquire_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let q = QueueName::new("q").unwrap();
    let mut ids = Vec::new();
    enqueue(&store, &q, BACKLOG + WARM, &mut ids).await;

    let seen = Arc::new(Seen::default());
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let owner = OwnerId::new(format!("w{w}")).unwrap();
            tokio::spawn(worker(store.clone(), q.clone(), owner, seen.clone()))
        })
        .collect();

    for how in server.disruptions() {
        // Enough left that the resumed loop finds work, and a warm loop to interrupt.
        let left = ids.len() - seen.done.load(Ordering::SeqCst);
        if left < BACKLOG + WARM {
            enqueue(&store, &q, BACKLOG + WARM - left, &mut ids).await;
        }
        let warm_from = seen.done.load(Ordering::SeqCst);
        wait_until(
            &seen,
            "the claim loop warmed up",
            Duration::from_secs(60),
            || seen.done.load(Ordering::SeqCst) >= warm_from + WARM,
        )
        .await;
        let before = seen.done.load(Ordering::SeqCst);
        let unavailable_before = seen.unavailable.load(Ordering::SeqCst);
        let t0 = Instant::now();
        server.disrupt(&how).await;
        let back = Instant::now();
        // The first complete that succeeded after the server was back.
        let first_ok = || {
            seen.ok_at
                .lock()
                .unwrap()
                .iter()
                .copied()
                .find(|t| *t > back)
        };
        wait_until(&seen, "claims resumed", RESUME_WITHIN, || {
            first_ok().is_some()
        })
        .await;
        let resumed = first_ok().unwrap() - back;
        let unavailable = seen.unavailable.load(Ordering::SeqCst) - unavailable_before;
        println!(
            "{}: took {:?}; claims resumed {resumed:?} after it returned; {before} items \
             were done before; {unavailable} calls answered Unavailable",
            how.name(),
            back - t0,
        );
        assert!(resumed < RESUME_WITHIN, "{resumed:?}");
        if let Disruption::Outage = how {
            assert!(unavailable > 0, "no call noticed a {OUTAGE:?} outage");
        }
    }

    // Drain. Leases whose claim or complete answer was lost in a restart are orphaned:
    // once nothing else is ready, expire them so they are claimed again.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut expiries = 0;
    loop {
        seen.check();
        let counts = store.queue_counts(&q).await.unwrap();
        if counts.pending() == 0 {
            break;
        }
        if counts.ready == 0 {
            clock.advance(LEASE);
            expiries += 1;
        }
        assert!(Instant::now() < deadline, "items were lost: {counts:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seen.stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }
    seen.check();

    let counts = store.queue_counts(&q).await.unwrap();
    assert_eq!(
        (counts.done, counts.dead, counts.pending()),
        (ids.len() as u64, 0, 0),
        "every item finished, none dead or left: {counts:?}"
    );
    let acc = seen.accepted.lock().unwrap().clone();
    assert!(acc.values().all(|n| *n == 1), "an item was finalized twice");
    // Items no complete was told about: finished by a complete whose answer was lost.
    let mut answer_lost = 0;
    for id in ids.iter().filter(|id| !acc.contains_key(id)) {
        let item = store.item_get(*id).await.unwrap();
        assert_eq!(item.map(|i| i.state), Some(ItemState::Done), "{id:?}");
        answer_lost += 1;
    }
    println!(
        "{} items: {} finalized once each as Accepted, {answer_lost} finished by a complete \
         whose answer was lost; leases expired {expiries} times to drain",
        ids.len(),
        acc.len()
    );

    store.close().await;
    if let Server::Given { .. } = server {
        let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
            .await
            .unwrap();
        sqlx::Executor::execute(&mut admin, format!("DROP SCHEMA {schema} CASCADE").as_str())
            .await
            .unwrap();
    }
}
