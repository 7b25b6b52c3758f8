//! Typed tasks end to end on every landed store: values of two task types round-trip
//! through the store, each handled by its own code in one worker; a payload that does
//! not decode ends dead with the error; and on SQLite and PostgreSQL a task enqueued
//! in the caller's transaction is there exactly when the transaction commits, and its
//! handler completes it in a transaction of its own through the job.

// The shared body runs outside #[test] functions; a failure there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{pg_url, Backend, Place};
use rusqlite::TransactionBehavior;
use serde::{Deserialize, Serialize};
use tenure::runtime::{Job, JobError, PollPolicy, RunTask, Worker, WorkerBuilder};
use tenure::{
    CompleteParams, DedupKey, DynStore, ItemState, NewItem, PgConfig, PgStore, QueueName, Result,
    SqliteConfig, SqliteStore, Store, StoreExt, Task, TaskOptions, TokenOutcome,
};

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct SendEmail {
    to: String,
    order: u64,
}

impl Task for SendEmail {
    const QUEUE: &'static str = "emails";

    fn dedup_key(&self) -> Result<Option<DedupKey>> {
        Ok(Some(DedupKey::new(format!("order-mail:{}", self.order))?))
    }
}

/// The mails [`SendEmail::run`] handled, by the schema, prefix or file of the test's
/// place, so tests that run at once on different stores keep theirs apart.
static MAILS: Mutex<Vec<(String, SendEmail)>> = Mutex::new(Vec::new());

impl RunTask for SendEmail {
    async fn run(self, job: Job) -> std::result::Result<(), JobError> {
        // Which place's item this is: the test reads back by the item's id.
        MAILS
            .lock()
            .unwrap()
            .push((job.item().id.to_string(), self));
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Resize {
    image: String,
    width: u32,
    sizes: Vec<u32>,
}

impl Task for Resize {
    const QUEUE: &'static str = "thumbnails";
}

fn worker(store: DynStore) -> WorkerBuilder {
    Worker::builder(store)
        .concurrency(4)
        .poll(PollPolicy::new(
            Duration::from_millis(25),
            Duration::from_millis(100),
        ))
        .maintenance(false)
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "not within 30 s: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn two_task_types_round_trip_and_a_wrong_payload_ends_dead(backend: Backend) {
    let Some(place) = Place::new(backend).await else {
        return;
    };
    let store = place.open().await.unwrap();
    let mails: Vec<SendEmail> = (0..20)
        .map(|n| SendEmail {
            to: format!("user{n}@example.com"),
            order: n,
        })
        .collect();
    let resizes: Vec<Resize> = (0..20)
        .map(|n| Resize {
            image: format!("img-{n}.png"),
            width: 100 + n,
            sizes: vec![n, n * 2],
        })
        .collect();
    let mut mail_ids = BTreeSet::new();
    for m in &mails {
        mail_ids.insert(store.enqueue_task(m).await.unwrap().id.to_string());
    }
    let again = store.enqueue_task(&mails[0]).await.unwrap();
    assert!(
        again.duplicate,
        "{}: the value's dedup key held",
        backend.name()
    );
    for r in &resizes {
        let options = TaskOptions::new().priority(1);
        store.enqueue_task_with(r, options).await.unwrap();
    }
    let wrong = store
        .enqueue_one(NewItem::new(
            QueueName::new(Resize::QUEUE).unwrap(),
            br#"{"image": 7}"#.to_vec(),
        ))
        .await
        .unwrap()
        .id;

    let handled: Arc<Mutex<Vec<Resize>>> = Arc::default();
    let h = handled.clone();
    let w = worker(store.clone())
        .task::<SendEmail>()
        .task_with(move |resize: Resize, _job: Job| {
            let h = h.clone();
            async move {
                h.lock().unwrap().push(resize);
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    until("every item finished", || {
        let m = w.metrics();
        m.completed == 40 && m.dead == 1
    })
    .await;
    let report = w.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        (report.metrics.completed, report.metrics.dead),
        (40, 1),
        "{}",
        backend.name()
    );

    let mut got: Vec<SendEmail> = MAILS
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, _)| mail_ids.contains(id))
        .map(|(_, m)| m.clone())
        .collect();
    got.sort();
    let mut want = mails;
    want.sort();
    assert_eq!(got, want, "{}: each mail once, as enqueued", backend.name());
    let mut got = handled.lock().unwrap().clone();
    got.sort();
    let mut want = resizes;
    want.sort();
    assert_eq!(
        got,
        want,
        "{}: each resize once, as enqueued",
        backend.name()
    );

    let dead = store.item_get(wrong).await.unwrap().unwrap();
    assert_eq!(dead.state, ItemState::Dead, "{}", backend.name());
    let error = dead.last_error.unwrap_or_default();
    assert!(
        error.contains("does not decode as") && error.contains("Resize"),
        "{}: {error}",
        backend.name()
    );
    assert!(
        error.contains("invalid type"),
        "{}: {error}",
        backend.name()
    );
    drop(store);
    place.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_two_task_types_round_trip_and_a_wrong_payload_ends_dead() {
    two_task_types_round_trip_and_a_wrong_payload_ends_dead(Backend::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_two_task_types_round_trip_and_a_wrong_payload_ends_dead() {
    two_task_types_round_trip_and_a_wrong_payload_ends_dead(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_task_types_round_trip_and_a_wrong_payload_ends_dead() {
    two_task_types_round_trip_and_a_wrong_payload_ends_dead(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_two_task_types_round_trip_and_a_wrong_payload_ends_dead() {
    two_task_types_round_trip_and_a_wrong_payload_ends_dead(Backend::Redis).await;
}

/// A task written with its order: enqueued in the order's transaction, and completed
/// by its handler in the transaction that records its receipt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Receipt {
    order: i64,
}

impl Task for Receipt {
    const QUEUE: &'static str = "receipts";
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_task_enqueued_in_a_transaction_exists_once_committed_and_finalizes_in_its_own() {
    let Some(place) = Place::new(Backend::Sqlite).await else {
        return;
    };
    let store = SqliteStore::open(SqliteConfig::from_url(&place.url).unwrap())
        .await
        .unwrap();
    let conn = Arc::new(Mutex::new(store.connection().unwrap()));
    {
        let mut c = conn.lock().unwrap();
        c.execute_batch(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY);
             CREATE TABLE receipts (id INTEGER PRIMARY KEY);",
        )
        .unwrap();
        for (order, commit) in [(1_i64, false), (2, true)] {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .unwrap();
            tx.execute("INSERT INTO orders (id) VALUES (?1)", [order])
                .unwrap();
            store.enqueue_task_in_tx(&tx, &Receipt { order }).unwrap();
            if commit {
                tx.commit().unwrap();
            }
        }
    }
    let queue = QueueName::new(Receipt::QUEUE).unwrap();
    let counts = store.queue_counts(&queue).await.unwrap();
    assert_eq!(counts.ready, 1, "the rolled-back enqueue left nothing");

    let (s, c) = (store.clone(), conn.clone());
    let w = worker(Arc::new(store.clone()))
        .task_with(move |receipt: Receipt, job: Job| {
            let (store, conn) = (s.clone(), c.clone());
            async move {
                let token = job.take_finalize();
                tokio::task::spawn_blocking(move || {
                    let mut conn = conn.lock().unwrap();
                    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    tx.execute("INSERT INTO receipts (id) VALUES (?1)", [receipt.order])?;
                    let answer = store
                        .complete_in_tx(&tx, CompleteParams::new(vec![token]))
                        .map_err(|e| JobError::retry(e.to_string()))?;
                    match answer[0] {
                        TokenOutcome::Accepted => tx.commit()?,
                        TokenOutcome::LeaseLost => return Err(JobError::retry("lease lost")),
                        TokenOutcome::OutOfOrder => return Err(JobError::retry("out of order")),
                    }
                    Ok(())
                })
                .await?
            }
        })
        .spawn()
        .unwrap();
    until("the receipt finalized", || {
        w.metrics().handler_finalized == 1
    })
    .await;
    let report = w.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        report.metrics.completed, 0,
        "the runtime wrote no completion"
    );
    let receipts: Vec<i64> = {
        let c = conn.lock().unwrap();
        let mut stmt = c.prepare("SELECT id FROM receipts").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    assert_eq!(receipts, vec![2], "the committed order's receipt, once");
    let counts = store.queue_counts(&queue).await.unwrap();
    assert_eq!((counts.pending(), counts.dead), (0, 0));
    place.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_task_enqueued_in_a_transaction_exists_once_committed_and_finalizes_in_its_own()
{
    let Some(place) = Place::new(Backend::Postgres).await else {
        return;
    };
    let schema = place.schema.clone().unwrap();
    let store = PgStore::connect(PgConfig::new(pg_url()).schema(&schema))
        .await
        .unwrap();
    sqlx::raw_sql(&format!(
        "CREATE TABLE {schema}.orders (id int8 PRIMARY KEY);
         CREATE TABLE {schema}.receipts (id int8 PRIMARY KEY);"
    ))
    .execute(store.pool())
    .await
    .unwrap();
    for (order, commit) in [(1_i64, false), (2, true)] {
        let mut tx = store.pool().begin().await.unwrap();
        sqlx::query(&format!("INSERT INTO {schema}.orders (id) VALUES ($1)"))
            .bind(order)
            .execute(&mut *tx)
            .await
            .unwrap();
        store
            .enqueue_task_in_tx(&mut tx, &Receipt { order })
            .await
            .unwrap();
        if commit {
            tx.commit().await.unwrap();
        } else {
            tx.rollback().await.unwrap();
        }
    }
    let queue = QueueName::new(Receipt::QUEUE).unwrap();
    let counts = store.queue_counts(&queue).await.unwrap();
    assert_eq!(counts.ready, 1, "the rolled-back enqueue left nothing");

    let (s, receipts) = (store.clone(), format!("{schema}.receipts"));
    let w = worker(Arc::new(store.clone()))
        .task_with(move |receipt: Receipt, job: Job| {
            let (store, receipts) = (s.clone(), receipts.clone());
            async move {
                let token = job.take_finalize();
                let mut tx = store.pool().begin().await?;
                sqlx::query(&format!("INSERT INTO {receipts} (id) VALUES ($1)"))
                    .bind(receipt.order)
                    .execute(&mut *tx)
                    .await?;
                let answer = store
                    .complete_in_tx(&mut tx, CompleteParams::new(vec![token]))
                    .await
                    .map_err(|e| JobError::retry(e.to_string()))?;
                match answer[0] {
                    TokenOutcome::Accepted => tx.commit().await?,
                    TokenOutcome::LeaseLost => return Err(JobError::retry("lease lost")),
                    TokenOutcome::OutOfOrder => return Err(JobError::retry("out of order")),
                }
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    until("the receipt finalized", || {
        w.metrics().handler_finalized == 1
    })
    .await;
    let report = w.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        report.metrics.completed, 0,
        "the runtime wrote no completion"
    );
    let rows: Vec<(i64,)> = sqlx::query_as(&format!("SELECT id FROM {schema}.receipts"))
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(rows, vec![(2,)], "the committed order's receipt, once");
    let counts = store.queue_counts(&queue).await.unwrap();
    assert_eq!((counts.pending(), counts.dead), (0, 0));
    store.pool().close().await;
    place.cleanup().await;
}
