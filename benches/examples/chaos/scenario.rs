//! One scenario: its servers, its faults, its run and its count.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tenure_core::{ItemId, ItemState, QueueName, Store};
use tenure_postgres::{PgConfig, PgStore};
use tenure_redis::{RedisConfig, RedisStore};

use crate::fleet::{produce, Fleet, Kind, Produced};
use crate::report::{recovery, timeline};
use crate::{cluster, now_us, support, BoxError, QUEUE, STALL};

/// One fault and when it happened (Unix µs).
#[derive(Clone, Debug)]
pub(crate) enum Fault {
    Kill {
        at_us: u64,
        process: usize,
    },
    Server {
        what: &'static str,
        at_us: u64,
        back_us: u64,
    },
}

/// What a scenario's faults are.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ServerFault {
    /// PostgreSQL: alternately `pg_ctl restart -m fast` and SIGKILL then start.
    Restart,
    /// Redis Sentinel: SIGKILL the primary, wait for the promotion, restart the old
    /// one (it rejoins as a replica).
    Failover,
}

/// The servers a scenario faults.
pub(crate) enum Servers {
    /// The primary, and the standby when the scenario has one.
    Postgres(
        cluster::PgServer,
        // Kept to be stopped when the scenario ends; the primary streams to it.
        #[allow(dead_code)] Option<cluster::PgServer>,
    ),
    Sentinel(support::SentinelSet),
}

impl Servers {
    /// Injects fault number `n`; answers what it was and when the server (or a
    /// promoted primary) was back.
    pub(crate) async fn fault(
        &mut self,
        kind: ServerFault,
        n: usize,
    ) -> Result<(&'static str, u64), BoxError> {
        match (self, kind) {
            (Servers::Postgres(pg, _), ServerFault::Restart) => {
                // pg_ctl blocks for the second or so the server takes.
                let what = tokio::task::block_in_place(|| {
                    if n % 2 == 0 {
                        pg.restart().map(|()| "restart (pg_ctl -m fast)")
                    } else {
                        pg.kill()
                            .and_then(|()| pg.start())
                            .map(|()| "crash (SIGKILL) and start")
                    }
                })?;
                Ok((what, now_us()))
            }
            (Servers::Sentinel(set), ServerFault::Failover) => {
                let old = set.primary_port().await.ok_or("no primary named")?;
                let next = *set
                    .nodes
                    .keys()
                    .find(|p| **p != old)
                    .ok_or("no replica to promote")?;
                set.node(old).kill();
                set.wait_primary(next, Duration::from_secs(60)).await;
                let back = now_us();
                // The old primary comes back empty and is made a replica of the new
                // one, as an operator would (the sentinels would too, in their time).
                set.node(old).boot().await;
                let _: Option<String> =
                    support::ask(old, redis::cmd("REPLICAOF").arg("127.0.0.1").arg(next)).await;
                support::eventually(
                    Duration::from_secs(60),
                    "the old primary to rejoin as a replica",
                    || async {
                        let role = support::info_field(old, "replication", "role").await;
                        let link =
                            support::info_field(old, "replication", "master_link_status").await;
                        (role.as_deref() == Some("slave") && link.as_deref() == Some("up"))
                            .then_some(())
                    },
                )
                .await;
                Ok(("failover (primary SIGKILLed)", back))
            }
            _ => Err("this fault does not fit these servers".into()),
        }
    }
}

/// One scenario's settings.
#[derive(Clone, Debug)]
pub(crate) struct Scenario {
    pub(crate) name: String,
    pub(crate) store: &'static str,
    pub(crate) items: usize,
    pub(crate) workers: usize,
    pub(crate) kills: usize,
    pub(crate) server_faults: usize,
    pub(crate) wait_replicas: u32,
    /// PostgreSQL: a streaming standby, synchronous when `Some(true)`.
    pub(crate) standby: Option<bool>,
    /// How long each handler works before it finishes.
    pub(crate) work: Duration,
    /// How long the producer takes to enqueue every item (a steady rate).
    pub(crate) seconds: f64,
}

/// One scenario's figures.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) name: String,
    pub(crate) acked: usize,
    pub(crate) unanswered: usize,
    pub(crate) lost: usize,
    pub(crate) superseded: usize,
    pub(crate) twice: usize,
    pub(crate) rerun_items: usize,
    pub(crate) extra_runs: usize,
    pub(crate) unlogged: usize,
    pub(crate) dead: usize,
    pub(crate) seconds: f64,
    pub(crate) rate: f64,
    pub(crate) faults: Vec<(String, f64, Option<f64>, Option<f64>)>,
    /// Accepted finishes per bucket of `bucket_s` seconds, and the faults' buckets.
    pub(crate) timeline: Vec<usize>,
    pub(crate) bucket_s: f64,
    pub(crate) marks: Vec<(usize, char)>,
}

pub(crate) async fn run(scenario: &Scenario, dir: &Path) -> Result<Outcome, BoxError> {
    let exe = std::env::current_exe()?;
    let (servers, store, url): (Servers, Arc<dyn Store>, String) = match scenario.store {
        "postgres" => {
            let bindir =
                cluster::bindir().ok_or("no PostgreSQL server binaries (initdb, pg_ctl)")?;
            let standby = scenario.standby;
            let (pg, standby) = tokio::task::spawn_blocking(move || {
                let pg = cluster::PgServer::primary(&bindir)?;
                let Some(sync) = standby else {
                    return Ok::<_, std::io::Error>((pg, None));
                };
                let standby = cluster::PgServer::standby_of(&pg)?;
                pg.wait_streaming(1, Duration::from_secs(30))?;
                if sync {
                    pg.psql("ALTER SYSTEM SET synchronous_standby_names = '*'")?;
                    pg.psql("SELECT pg_reload_conf()")?;
                }
                Ok((pg, Some(standby)))
            })
            .await??;
            let url = pg.url();
            let store = PgStore::connect(
                PgConfig::new(url.clone())
                    .schema("chaos")
                    .keep_done(true)
                    .max_connections(4),
            )
            .await?;
            store.migrate().await?;
            sqlx::query(
                "CREATE TABLE chaos_ledger (id uuid NOT NULL, attempt int NOT NULL, \
                 lease bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())",
            )
            .execute(store.pool())
            .await?;
            (Servers::Postgres(pg, standby), Arc::new(store), url)
        }
        _ => {
            let set = support::SentinelSet::start(
                &["--repl-diskless-sync-delay", "0"],
                Duration::from_millis(1000),
                Duration::from_secs(3),
            )
            .await
            .ok_or("no redis-server")?;
            let url = set.url();
            let mut config = RedisConfig::new(url.clone())
                .prefix("chaos")
                .keep_done(true);
            if scenario.wait_replicas > 0 {
                config = config.wait_replicas(scenario.wait_replicas, Duration::from_secs(1));
            }
            let store = RedisStore::connect(config).await?;
            (Servers::Sentinel(set), Arc::new(store), url)
        }
    };
    let server_fault = if scenario.store == "postgres" {
        ServerFault::Restart
    } else {
        ServerFault::Failover
    };

    let mut fleet = Fleet::new(
        exe,
        dir.to_owned(),
        scenario.store,
        url,
        scenario.wait_replicas,
        scenario.work,
    );
    fleet.start(scenario.workers)?;
    let done = Arc::new(AtomicU64::new(0));
    let produced = Arc::new(Mutex::new(Produced::default()));
    let enqueued_all = Arc::new(AtomicBool::new(false));
    let producer = tokio::spawn(produce(
        Arc::clone(&store),
        scenario.items,
        scenario.items as f64 / scenario.seconds,
        Arc::clone(&done),
        Arc::clone(&produced),
        Arc::clone(&enqueued_all),
    ));

    // Faults at evenly spaced points of progress: kills at k/(kills+1), server
    // faults at k/(faults+1) of the items.
    let mut plan: Vec<(f64, bool)> = (1..=scenario.kills)
        .map(|k| (k as f64 / (scenario.kills + 1) as f64, false))
        .chain(
            (1..=scenario.server_faults)
                .map(|k| (k as f64 / (scenario.server_faults + 1) as f64, true)),
        )
        .collect();
    plan.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut plan = plan.into_iter().peekable();
    let mut faults = Vec::new();
    let (mut kills, mut server_faults) = (0usize, 0usize);
    let servers = Arc::new(tokio::sync::Mutex::new(servers));
    let mut pending = None;
    let (mut last_kill, mut last_server_fault) = (Instant::now(), Instant::now());
    let started = Instant::now();
    let started_us = now_us();
    let queue = QueueName::new(QUEUE)?;
    let mut last_print = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        fleet.read()?;
        let finished = fleet.done.len();
        done.store(finished as u64, Ordering::Relaxed);
        if last_print.elapsed() > Duration::from_secs(5) {
            last_print = Instant::now();
            eprintln!(
                "  {}: {finished} of {} finished, {} faults so far, {:.0} s",
                scenario.name,
                scenario.items,
                faults.len(),
                started.elapsed().as_secs_f64()
            );
        }
        // A server fault runs on a task of its own (a rejoining Redis replica takes
        // seconds to sync), while the logs are read and workers are killed.
        if pending
            .as_ref()
            .is_some_and(tokio::task::JoinHandle::is_finished)
        {
            if let Some(task) = pending.take() {
                let (at_us, (what, back_us)) = task.await??;
                eprintln!(
                    "  {}: {what} ({:.1} s down)",
                    scenario.name,
                    (back_us - at_us) as f64 / 1e6
                );
                faults.push(Fault::Server {
                    what,
                    at_us,
                    back_us,
                });
                last_server_fault = Instant::now();
            }
        }
        if let Some(&(at, server)) = plan.peek() {
            // Faults come at their point of progress, a kill at least a second after
            // the one before, a server fault two seconds after the last one ended.
            let due = finished as f64 >= at * scenario.items as f64
                && if server {
                    pending.is_none() && last_server_fault.elapsed() >= Duration::from_secs(2)
                } else {
                    last_kill.elapsed() >= Duration::from_secs(1)
                };
            if due {
                plan.next();
                let at_us = now_us();
                if server {
                    let servers = Arc::clone(&servers);
                    let n = server_faults;
                    pending = Some(tokio::spawn(async move {
                        let back = servers.lock().await.fault(server_fault, n).await?;
                        Ok::<_, BoxError>((at_us, back))
                    }));
                    server_faults += 1;
                } else {
                    let slot = kills % scenario.workers;
                    let process = fleet.kill_and_replace(slot)?;
                    kills += 1;
                    last_kill = Instant::now();
                    faults.push(Fault::Kill { at_us, process });
                }
                continue;
            }
        }
        // The end: everything enqueued, no fault left, and nothing ready, scheduled or
        // running in the store (a worker killed between its commit and its log line
        // leaves an item done with no line, so the logs alone cannot tell).
        if enqueued_all.load(Ordering::Acquire) && plan.peek().is_none() && pending.is_none() {
            if let Ok(c) = store.queue_counts(&queue).await {
                if c.ready + c.scheduled + c.running == 0 {
                    break;
                }
                if last_print.elapsed() > Duration::from_secs(4) {
                    eprintln!("  {}: left: {c:?}", scenario.name);
                }
            }
        }
        if now_us().saturating_sub(fleet.last_done_us.max(started_us)) > STALL.as_micros() as u64 {
            eprintln!(
                "  {}: nothing finished for {STALL:?}; stopping (logs in {})",
                scenario.name,
                dir.display()
            );
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    producer.abort();
    fleet.stop();
    fleet.read()?;

    let produced = std::mem::take(&mut *produced.lock().unwrap_or_else(|p| p.into_inner()));
    let servers = servers.lock().await;
    let ledger: Vec<(ItemId, i64)> = match &*servers {
        Servers::Postgres(..) => {
            let pg = PgStore::connect(
                PgConfig::new(fleet.url.clone())
                    .schema("chaos")
                    .migrate_on_connect(false)
                    .max_connections(2),
            )
            .await?;
            let rows: Vec<(uuid::Uuid, i64)> = sqlx::query_as("SELECT id, lease FROM chaos_ledger")
                .fetch_all(pg.pool())
                .await?;
            rows.into_iter()
                .map(|(id, lease)| (ItemId::from_uuid(id), lease))
                .collect()
        }
        Servers::Sentinel(_) => fleet
            .events
            .iter()
            .filter(|e| e.kind == Kind::Accepted)
            .map(|e| (e.id, e.lease))
            .collect(),
    };
    let finals = final_items(
        &store,
        produced
            .acked
            .iter()
            .chain(&produced.unanswered)
            .copied()
            .collect(),
    )
    .await?;
    drop(servers);

    let mut finishes: HashMap<ItemId, Vec<i64>> = HashMap::new();
    for (id, lease) in &ledger {
        finishes.entry(*id).or_default().push(*lease);
    }
    let mut runs: HashMap<ItemId, usize> = HashMap::new();
    for e in fleet.events.iter().filter(|e| e.kind == Kind::Run) {
        *runs.entry(e.id).or_default() += 1;
    }
    let mut out = Outcome {
        name: scenario.name.clone(),
        acked: produced.acked.len(),
        unanswered: produced.unanswered.len(),
        seconds,
        rate: fleet.done.len() as f64 / seconds,
        ..Outcome::default()
    };
    let acked_ids: HashSet<ItemId> = produced.acked.iter().copied().collect();
    for id in produced.acked.iter().chain(&produced.unanswered) {
        let acked = acked_ids.contains(id);
        let state = finals.get(id).copied();
        let leases = finishes.get(id).map_or(&[][..], Vec::as_slice);
        match state {
            Some((ItemState::Done, final_lease)) => {
                out.superseded += leases.iter().filter(|l| **l != final_lease).count();
                if leases.len() > 1 {
                    out.twice += 1;
                }
                if leases.is_empty() {
                    out.unlogged += 1;
                }
            }
            Some((ItemState::Dead, _)) => {
                out.dead += 1;
                out.lost += usize::from(acked);
            }
            _ => out.lost += usize::from(acked),
        }
        let n = runs.get(id).copied().unwrap_or(0);
        if n > 1 {
            out.rerun_items += 1;
            out.extra_runs += n - 1;
        }
    }
    out.faults = recovery(&faults, &fleet.events);
    (out.timeline, out.bucket_s, out.marks) = timeline(&faults, &fleet.events, started_us, seconds);
    Ok(out)
}

/// Every item's final state and lease, 64 lookups at a time.
pub(crate) async fn final_items(
    store: &Arc<dyn Store>,
    ids: Vec<ItemId>,
) -> Result<HashMap<ItemId, (ItemState, i64)>, BoxError> {
    let mut out = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(4_096) {
        let mut tasks = tokio::task::JoinSet::new();
        for part in chunk.chunks(64) {
            let store = Arc::clone(store);
            let part = part.to_vec();
            tasks.spawn(async move {
                let mut found = Vec::with_capacity(part.len());
                for id in part {
                    // The store answers Unavailable once per connection a restart
                    // broke; ask again.
                    let mut tries = 0;
                    let item = loop {
                        match store.item_get(id).await {
                            Err(e) if e.is_retryable() && tries < 50 => {
                                tries += 1;
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                            other => break other?,
                        }
                    };
                    if let Some(item) = item {
                        found.push((id, (item.state, item.lease.to_i64())));
                    }
                }
                Ok::<_, tenure_core::Error>(found)
            });
        }
        while let Some(found) = tasks.join_next().await {
            out.extend(found??);
        }
    }
    Ok(out)
}
