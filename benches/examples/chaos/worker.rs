//! The worker process: a `Worker` on the store, logging each handler start and each
//! accepted finish to a file of its own.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tenure_core::{CompleteParams, LeaseToken, QueueName, TokenOutcome};
use tenure_postgres::{PgConfig, PgStore};
use tenure_redis::{RedisConfig, RedisStore};
use tenure_runtime::{Job, JobError, Worker};

use crate::{now_us, BoxError, LEASE, QUEUE};

/// One worker process's log: a line per handler start and per accepted finish.
pub(crate) struct Log(Mutex<File>);

impl Log {
    fn line(&self, kind: char, at_us: u64, token: &LeaseToken) {
        let line = format!(
            "{kind} {at_us} {} {} {}\n",
            token.id,
            token.attempt,
            token.lease.to_i64()
        );
        let mut file = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // One write per line: a SIGKILL loses at most the line being written.
        let _ = file.write_all(line.as_bytes());
    }
}

pub(crate) struct WorkerArgs {
    pub(crate) store: String,
    pub(crate) url: String,
    pub(crate) log: PathBuf,
    pub(crate) wait_replicas: u32,
    /// How long each handler works before it finishes.
    pub(crate) work: Duration,
    pub(crate) concurrency: usize,
}

pub(crate) async fn worker_main(args: WorkerArgs) -> Result<(), BoxError> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.log)?;
    let log = Arc::new(Log(Mutex::new(file)));
    let queue = QueueName::new(QUEUE)?;
    let builder = match args.store.as_str() {
        "postgres" => {
            let store = retry_connect(|| {
                PgStore::connect(
                    PgConfig::new(args.url.clone())
                        .schema("chaos")
                        .keep_done(true)
                        .migrate_on_connect(false)
                        // Four processes and the orchestrator within the throwaway
                        // server's 40 connections, a respawn's included.
                        .max_connections(6),
                )
            })
            .await;
            let handler_store = store.clone();
            let log = Arc::clone(&log);
            let work = args.work;
            Worker::builder(store).handler(move |job: Job| {
                let store = handler_store.clone();
                let log = Arc::clone(&log);
                async move { finish_in_tx(&store, &log, work, job).await }
            })
        }
        "redis" => {
            let mut config = RedisConfig::new(args.url.clone())
                .prefix("chaos")
                .keep_done(true);
            if args.wait_replicas > 0 {
                config = config.wait_replicas(args.wait_replicas, Duration::from_secs(1));
            }
            let store = retry_connect(|| RedisStore::connect(config.clone())).await;
            let ledger = tenure_test_support::ledger::Ledger::new(store);
            tokio::spawn(log_accepted(Arc::clone(&ledger.told), Arc::clone(&log)));
            let log = Arc::clone(&log);
            let work = args.work;
            Worker::builder(ledger).handler(move |job: Job| {
                log.line('R', now_us(), &job.token());
                async move {
                    if !work.is_zero() {
                        tokio::time::sleep(work).await;
                    }
                    Ok(())
                }
            })
        }
        other => return Err(format!("store: {other:?} is not postgres or redis").into()),
    };
    let worker = builder
        .queue(queue)
        .concurrency(args.concurrency)
        .lease_duration(LEASE)
        .heartbeat(Duration::from_secs(1), Duration::from_secs(5))
        .maintenance_interval(Duration::from_secs(1))
        .spawn()?;
    // Runs until the orchestrator kills it (SIGKILL).
    std::future::pending::<()>().await;
    drop(worker);
    Ok(())
}

/// Connects, trying again every 200 ms while the server is down (a worker respawned
/// during a restart or a failover).
pub(crate) async fn retry_connect<S, F, Fut>(connect: F) -> S
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = tenure_core::Result<S>>,
{
    loop {
        match connect().await {
            Ok(store) => return store,
            Err(e) => {
                eprintln!("connect: {e}; trying again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// The PostgreSQL handler: the ledger row and the complete in one transaction.
pub(crate) async fn finish_in_tx(
    store: &PgStore,
    log: &Log,
    work: Duration,
    job: Job,
) -> Result<(), JobError> {
    log.line('R', now_us(), &job.token());
    if !work.is_zero() {
        tokio::time::sleep(work).await;
    }
    let token = job.take_finalize();
    loop {
        match ledger_and_complete(store, token).await {
            Ok(TokenOutcome::Accepted) => {
                log.line('A', now_us(), &token);
                return Ok(());
            }
            Ok(other) => {
                eprintln!("{}: {other:?}; rolled back", token.id);
                return Err(JobError::retry(format!("{other:?}; rolled back")));
            }
            // Unknown whether it committed: the same token again is safe (fenced).
            Err(e) if !job.is_cancelled() => {
                eprintln!("{}: {e}; trying again", token.id);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(JobError::retry(e.to_string())),
        }
    }
}

pub(crate) async fn ledger_and_complete(
    store: &PgStore,
    token: LeaseToken,
) -> Result<TokenOutcome, BoxError> {
    let mut tx = store.pool().begin().await?;
    sqlx::query("INSERT INTO chaos_ledger (id, attempt, lease) VALUES ($1, $2, $3)")
        .bind(token.id.as_uuid())
        .bind(i32::try_from(token.attempt)?)
        .bind(token.lease.to_i64())
        .execute(&mut *tx)
        .await?;
    let answer = store
        .complete_in_tx(&mut tx, CompleteParams::new(vec![token]))
        .await?;
    let outcome = answer.first().copied().ok_or("complete_in_tx: no answer")?;
    if outcome == TokenOutcome::Accepted {
        tx.commit().await?;
    }
    Ok(outcome)
}

/// Logs every token a `complete` through the ledger wrapper was told `Accepted`,
/// every 20 ms.
pub(crate) async fn log_accepted(
    told: Arc<Mutex<tenure_test_support::ledger::Told>>,
    log: Arc<Log>,
) {
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let accepted = {
            let mut told = told.lock().unwrap_or_else(|p| p.into_inner());
            told.lost.clear();
            told.unanswered.clear();
            std::mem::take(&mut told.accepted)
        };
        let (wall, mono) = (now_us(), Instant::now());
        for (token, at) in accepted {
            let ago = u64::try_from(mono.duration_since(at).as_micros()).unwrap_or(0);
            log.line('A', wall.saturating_sub(ago), &token);
        }
    }
}
