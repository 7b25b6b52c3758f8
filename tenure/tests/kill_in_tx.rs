//! A worker that finalizes inside its own business transaction (`complete_in_tx`),
//! killed with SIGKILL between its business write and its commit: nothing is lost and
//! nothing is done twice. Every item ends with exactly one business row, and at the
//! kill an item is finished exactly when its business row exists.
//!
//! The test re-executes this binary, running the same test with
//! `TENURE_KILL_TX_ROLE=child`: the child works the queue with a handler that takes the
//! finalize over (`Job::take_finalize`) and, in one transaction, inserts a payment row
//! and completes its item. At item `PAUSE_AT` it prints `paused <id>` after the insert
//! and the accepted completion, and never commits; the parent kills it there. A
//! survivor in the parent then drains the rest with the same handler.

// The shared body runs outside #[test] functions; a failure there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{pg_url, Backend, Place};
use rusqlite::TransactionBehavior;
use sqlx::Connection;
use tenure::runtime::{Job, JobError, PollPolicy, Worker};
use tenure::{
    CompleteParams, EnqueueParams, ItemId, ItemState, NewItem, PgConfig, PgStore, QueueName,
    SqliteConfig, SqliteStore, Store, TokenOutcome,
};

const ROLE: &str = "TENURE_KILL_TX_ROLE";
const URL: &str = "TENURE_KILL_TX_URL";
const SCHEMA: &str = "TENURE_KILL_TX_SCHEMA";
const ITEMS: usize = 300;
/// The item whose transaction the child leaves open (its business row written and its
/// completion accepted, not committed) until it is killed.
const PAUSE_AT: usize = 150;
const CHILD_LEASE: Duration = Duration::from_secs(1);

fn queue() -> QueueName {
    QueueName::new("payments").unwrap()
}

fn number(job: &Job) -> usize {
    std::str::from_utf8(job.payload())
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("payloads are item numbers")
}

/// Where the business rows live, and how the handler writes one with its completion.
#[derive(Clone)]
enum Business {
    Sqlite {
        store: SqliteStore,
        conn: Arc<Mutex<rusqlite::Connection>>,
    },
    Postgres {
        store: PgStore,
        pool: sqlx::PgPool,
        table: String,
    },
}

impl Business {
    async fn open(backend: Backend, url: &str, schema: Option<&str>) -> Business {
        match backend {
            Backend::Sqlite => {
                let store = SqliteStore::open(SqliteConfig::from_url(url).unwrap())
                    .await
                    .unwrap();
                let conn = store.connection().unwrap();
                conn.execute_batch(
                    "CREATE TABLE IF NOT EXISTS payments (item TEXT NOT NULL, attempt INTEGER NOT NULL)",
                )
                .unwrap();
                Business::Sqlite {
                    store,
                    conn: Arc::new(Mutex::new(conn)),
                }
            }
            Backend::Postgres => {
                let schema = schema.expect("a schema");
                let store = PgStore::connect(PgConfig::new(pg_url()).schema(schema))
                    .await
                    .unwrap();
                let table = format!("{schema}.payments");
                sqlx::raw_sql(&format!(
                    "CREATE TABLE IF NOT EXISTS {table} (item text NOT NULL, attempt int4 NOT NULL)"
                ))
                .execute(store.pool())
                .await
                .unwrap();
                Business::Postgres {
                    pool: store.pool().clone(),
                    store,
                    table,
                }
            }
            other => panic!("{other:?} has no transactions to join"),
        }
    }

    fn store(&self) -> Arc<dyn Store> {
        match self {
            Business::Sqlite { store, .. } => Arc::new(store.clone()),
            Business::Postgres { store, .. } => Arc::new(store.clone()),
        }
    }

    /// The handler's work: one transaction with the payment row and the fenced
    /// completion. With `pause`, announces itself after both and never commits.
    async fn pay(&self, job: Job, pause: bool) -> Result<(), JobError> {
        let token = job.take_finalize();
        let item = job.item().id.to_string();
        match self {
            Business::Sqlite { store, conn } => {
                let (store, conn) = (store.clone(), Arc::clone(conn));
                tokio::task::spawn_blocking(move || {
                    let mut conn = conn.lock().unwrap();
                    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    tx.execute(
                        "INSERT INTO payments VALUES (?1, ?2)",
                        rusqlite::params![item, token.attempt],
                    )?;
                    let answer = store
                        .complete_in_tx(&tx, CompleteParams::new(vec![token]))
                        .map_err(|e| JobError::retry(e.to_string()))?;
                    if pause {
                        println!("paused {item}");
                        std::thread::sleep(Duration::from_secs(60));
                        // Never reached unless the parent died: end the process, not
                        // just this thread (the runtime would wait for it).
                        std::process::exit(1);
                    }
                    match answer[0] {
                        TokenOutcome::Accepted => tx.commit()?,
                        TokenOutcome::LeaseLost | TokenOutcome::OutOfOrder => {
                            return Err(JobError::retry("lease lost"))
                        }
                    }
                    Ok(())
                })
                .await?
            }
            Business::Postgres { store, pool, table } => {
                let mut tx = pool.begin().await?;
                sqlx::query(&format!("INSERT INTO {table} VALUES ($1, $2)"))
                    .bind(&item)
                    .bind(i32::try_from(token.attempt).unwrap())
                    .execute(&mut *tx)
                    .await?;
                let answer = store
                    .complete_in_tx(&mut tx, CompleteParams::new(vec![token]))
                    .await
                    .map_err(|e| JobError::retry(e.to_string()))?;
                if pause {
                    println!("paused {item}");
                    std::future::pending::<()>().await;
                }
                match answer[0] {
                    TokenOutcome::Accepted => tx.commit().await?,
                    TokenOutcome::LeaseLost | TokenOutcome::OutOfOrder => {
                        return Err(JobError::retry("lease lost"))
                    }
                }
                Ok(())
            }
        }
    }

    /// Every business row: item id to the attempts that wrote one.
    async fn rows(&self) -> HashMap<ItemId, Vec<u32>> {
        let pairs: Vec<(String, i64)> = match self {
            Business::Sqlite { conn, .. } => {
                let conn = conn.lock().unwrap();
                let mut stmt = conn.prepare("SELECT item, attempt FROM payments").unwrap();
                stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
            Business::Postgres { table, .. } => {
                let mut conn = sqlx::PgConnection::connect(&pg_url()).await.unwrap();
                let rows: Vec<(String, i32)> =
                    sqlx::query_as(&format!("SELECT item, attempt FROM {table}"))
                        .fetch_all(&mut conn)
                        .await
                        .unwrap();
                rows.into_iter().map(|(i, a)| (i, i64::from(a))).collect()
            }
        };
        let mut out: HashMap<ItemId, Vec<u32>> = HashMap::new();
        for (item, attempt) in pairs {
            out.entry(item.parse().unwrap())
                .or_default()
                .push(u32::try_from(attempt).unwrap());
        }
        out
    }
}

fn worker_on(business: Business, lease: Duration, pause: bool) -> Worker {
    Worker::builder(business.store())
        .queue(queue())
        .concurrency(4)
        .lease_duration(lease)
        .poll(PollPolicy::new(
            Duration::from_millis(25),
            Duration::from_millis(250),
        ))
        .handler(move |job: Job| {
            let business = business.clone();
            async move {
                let pause = pause && number(&job) == PAUSE_AT;
                let n = number(&job);
                business.pay(job, pause).await.inspect_err(|e| {
                    eprintln!("item {n}: {e}");
                })
            }
        })
        .spawn()
        .unwrap()
}

/// The child: works until it is killed (or exits after a minute, should the parent
/// have died).
async fn child(backend: Backend) {
    let url = std::env::var(URL).unwrap();
    let schema = std::env::var(SCHEMA).ok();
    let business = Business::open(backend, &url, schema.as_deref()).await;
    let _worker = worker_on(business, CHILD_LEASE, true);
    tokio::time::sleep(Duration::from_secs(60)).await;
    eprintln!("the child was never killed");
    std::process::exit(1);
}

async fn killed_between_write_and_commit(backend: Backend, test_name: &str) {
    if std::env::var(ROLE).is_ok_and(|r| r == "child") {
        return child(backend).await;
    }
    let Some(place) = Place::new(backend).await else {
        return;
    };
    let business = Business::open(backend, &place.url, place.schema.as_deref()).await;
    let store = business.store();
    let items: Vec<NewItem> = (0..ITEMS)
        .map(|n| NewItem::new(queue(), n.to_string().into_bytes()))
        .collect();
    let ids: Vec<ItemId> = store
        .enqueue(EnqueueParams::new(items))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();

    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, "child")
        .env(URL, &place.url)
        .stdout(Stdio::piped());
    if let Some(schema) = &place.schema {
        command.env(SCHEMA, schema);
    }
    let mut child = command.spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<ItemId>();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            // libtest may print its "test .. ... " header on the same line.
            let found = line.split_once("paused ").map(|(_, id)| id.trim());
            if let Some(id) = found.and_then(|i| i.parse().ok()) {
                let _ = tx.send(id);
            }
        }
    });
    let paused = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the child reached the paused item");
    child.kill().unwrap(); // SIGKILL, between the business write and the commit
    assert!(!child.wait().unwrap().success());

    // The moment after the kill. A commit the child sent just before it died may
    // still land, so read the business rows before and after the items and retry
    // until no commit came between: then the items are seen at one point in time.
    let (at_kill, done_at_kill) = loop {
        let before = business.rows().await;
        let mut done = HashSet::new();
        for id in &ids {
            match store.item_get(*id).await.unwrap() {
                None => {
                    done.insert(*id);
                }
                Some(i) if i.state == ItemState::Done => {
                    done.insert(*id);
                }
                Some(_) => {}
            }
        }
        if business.rows().await == before {
            break (before, done);
        }
    };
    println!(
        "{}: at the kill {} items done, {} business rows",
        backend.name(),
        done_at_kill.len(),
        at_kill.len()
    );
    let written: HashSet<ItemId> = at_kill.keys().copied().collect();
    assert_eq!(
        written, done_at_kill,
        "an item is finished exactly when its business row exists"
    );
    assert!(
        !written.contains(&paused),
        "the open transaction left no row"
    );
    let it = store.item_get(paused).await.unwrap().expect("not finished");
    assert_eq!(
        (it.state, it.attempt),
        (ItemState::Running, 1),
        "the paused item is still running under the dead worker's lease"
    );
    assert!(done_at_kill.len() >= PAUSE_AT / 2, "killed mid-run");

    // A survivor drains the rest once the dead worker's leases run out.
    let survivor = worker_on(business.clone(), Duration::from_secs(30), false);
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.queue_counts(&queue()).await.unwrap().pending() > 0 {
        assert!(Instant::now() < deadline, "the survivor did not finish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = survivor.shutdown(Duration::from_secs(10)).await;
    assert_eq!(report.metrics.lost, 0);
    assert_eq!(
        report.metrics.completed, 0,
        "every item finalized by its handler"
    );

    let counts = store.queue_counts(&queue()).await.unwrap();
    assert_eq!((counts.pending(), counts.dead), (0, 0), "nothing lost");
    let rows = business.rows().await;
    assert_eq!(rows.len(), ITEMS, "every item has its business row");
    for id in &ids {
        let attempts = &rows[id];
        assert_eq!(attempts.len(), 1, "item {id} was done twice: {attempts:?}");
        if at_kill.contains_key(id) {
            assert_eq!(at_kill[id], *attempts, "done once, by the child");
        }
    }
    assert_eq!(
        rows[&paused],
        vec![2],
        "the killed attempt's lease expired and attempt 2 paid"
    );
    drop(store);
    place.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_worker_killed_between_business_write_and_commit_loses_nothing_and_does_nothing_twice(
) {
    killed_between_write_and_commit(
        Backend::Sqlite,
        "sqlite_worker_killed_between_business_write_and_commit_loses_nothing_and_does_nothing_twice",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_worker_killed_between_business_write_and_commit_loses_nothing_and_does_nothing_twice(
) {
    killed_between_write_and_commit(
        Backend::Postgres,
        "postgres_worker_killed_between_business_write_and_commit_loses_nothing_and_does_nothing_twice",
    )
    .await;
}
