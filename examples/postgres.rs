//! A production set-up on PostgreSQL: migrations as a deploy step, workers that do no
//! DDL and use a small pool, an idempotent producer, a handler that honours its
//! cancellation, the leader-gated maintenance, metrics, and a graceful shutdown on
//! Ctrl-C.
//!
//! ```text
//! TENURE_POSTGRES_URL=postgres://app@db/app cargo run --example postgres
//! ```
//!
//! Without `TENURE_POSTGRES_URL` it uses `postgres://postgres@127.0.0.1:5432/test`.
//! It enqueues 500 e-mails, runs one worker until they are sent (or Ctrl-C), and stops.
//! Start it in several terminals at once: the workers share the queue, one of them
//! holds the maintenance lease, and a killed one's items come back within a lease.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tenure::runtime::{Job, JobError, PollPolicy, Worker};
use tenure::{
    DedupKey, EnqueueParams, NewItem, OwnerId, PgConfig, PgStore, QueueName, RetryPolicy, Store,
};
use tenure_examples::args;

const SCHEMA: &str = "tenure_example";

const USAGE: &str = "\
A production set-up on PostgreSQL: migrations, a worker, maintenance, Ctrl-C.

usage: TENURE_POSTGRES_URL=postgres://user@host/db postgres

  TENURE_POSTGRES_URL  the database (default postgres://postgres@127.0.0.1:5432/test);
                       the example uses the schema tenure_example in it.
  -h, --help           print this help";

#[derive(Serialize, Deserialize)]
struct Email {
    to: String,
    subject: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    args::parse_or_exit(USAGE, 0);
    let url = std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());

    // Deploy step: apply migrations with a role that may create the schema. In
    // production this runs once per release, not in every worker.
    let migrator = match PgStore::connect(PgConfig::new(&url).schema(SCHEMA)).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("PostgreSQL at {url} is not usable: {e}");
            eprintln!("set TENURE_POSTGRES_URL to a database this example may write to");
            std::process::exit(2);
        }
    };
    migrator.close().await;

    // A worker process: no DDL, a pool far smaller than its handler slots (a call
    // holds a connection only while its statement runs), LISTEN for wake-ups, and a
    // name that shows in pg_stat_activity.
    let store = PgStore::connect(
        PgConfig::new(&url)
            .schema(SCHEMA)
            .migrate_on_connect(false)
            .max_connections(6)
            .acquire_timeout(Duration::from_secs(3))
            .application_name("tenure-example-worker"),
    )
    .await?;
    let queue = QueueName::new("emails")?;

    // An idempotent producer: each e-mail has a dedup key, so enqueueing the same batch
    // again (a retried request, a replayed event) inserts nothing.
    let run = std::process::id();
    let batch = || -> Result<Vec<NewItem>, tenure::Error> {
        (0..500)
            .map(|n| {
                let email = Email {
                    to: if n % 100 == 99 {
                        "not-an-address".to_owned()
                    } else {
                        format!("user{n}@example.com")
                    },
                    subject: "Welcome".to_owned(),
                };
                Ok(NewItem::json(queue.clone(), &email)?
                    .dedup_key(DedupKey::new(format!("welcome-{run}-{n}"))?)
                    .max_attempts(5))
            })
            .collect()
    };
    let first = store.enqueue(EnqueueParams::new(batch()?)).await?;
    let again = store.enqueue(EnqueueParams::new(batch()?)).await?;
    println!(
        "enqueued {} e-mails; the replayed batch added {} (all {} were duplicates)",
        first.iter().filter(|e| !e.duplicate).count(),
        again.iter().filter(|e| !e.duplicate).count(),
        again.iter().filter(|e| e.duplicate).count(),
    );

    let instance = OwnerId::new(format!(
        "mailer-{}-{}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "local".to_owned()),
        std::process::id()
    ))?;
    let worker = Worker::builder(store.clone())
        .queue(queue.clone())
        .instance_id(instance)
        .concurrency(32)
        .lease_duration(Duration::from_secs(30))
        .poll(PollPolicy::default())
        .retry(RetryPolicy::exponential(
            Duration::from_secs(1),
            Duration::from_secs(300),
        ))
        .heartbeat(Duration::from_secs(10), Duration::from_secs(30))
        .maintenance_interval(Duration::from_secs(5))
        .keep_done_for(Duration::from_secs(60 * 60))
        .handler(|job: Job| async move {
            let email: Email = job.json().map_err(|e| JobError::permanent(e.to_string()))?;
            if !email.to.contains('@') {
                return Err(JobError::permanent(format!("bad address {:?}", email.to)));
            }
            // Honour the cancellation between steps: it fires when the lease is lost,
            // when renewals have failed for half a lease, or at the end of shutdown.
            tokio::select! {
                _ = job.cancelled() => Err(JobError::retry("stopped before sending")),
                _ = tokio::time::sleep(Duration::from_millis(20)) => Ok(()),
            }
        })
        .spawn()?;
    println!("worker {} started", worker.instance());

    let started = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {
                println!("Ctrl-C: shutting down");
                break;
            }
            _ = ticker.tick() => {
                let counts = store.queue_counts(&queue).await?;
                let m = worker.metrics();
                println!(
                    "{:>5.1}s role {}; claimed {}, completed {}, failed {} ({} dead), in flight {}; queue: {} ready, {} running",
                    started.elapsed().as_secs_f64(),
                    worker.role(),
                    m.claimed, m.completed, m.failed, m.dead, m.in_flight,
                    counts.ready, counts.running,
                );
                if counts.pending() == 0 {
                    break;
                }
            }
        }
    }

    // Stop claiming, give running handlers 10 s, then release what is left so other
    // workers take it at once; the leader lease is resigned.
    let report = worker.shutdown(Duration::from_secs(10)).await;
    println!(
        "stopped: drained {}, released {}, abandoned {}; {:?}",
        report.drained, report.released, report.abandoned, report.metrics
    );
    let counts = store.queue_counts(&queue).await?;
    println!(
        "queue now: {} ready, {} scheduled, {} running, {} dead (bad addresses)",
        counts.ready, counts.scheduled, counts.running, counts.dead
    );
    store.close().await;
    Ok(())
}
