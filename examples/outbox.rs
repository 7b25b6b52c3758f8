//! The transactional outbox, both ways round: a business write and its work item
//! commit together (or not at all), and a worker's business write and the item's
//! fenced completion commit together (or not at all). Runs on an SQLite file, no
//! server:
//!
//! ```text
//! cargo run --example outbox
//! ```
//!
//! Each order is inserted into the application's own `orders` table and, in the same
//! transaction, a `Confirmation` task (a Rust value; [`Task`] names its queue) is
//! enqueued with [`SqliteStore::enqueue_task_in_tx`]. One order fails validation after
//! both writes and rolls back: neither its row nor its work item exists afterwards.
//!
//! A worker then sends each confirmation and marks the order confirmed. Its handler
//! gets the decoded `Confirmation`, takes the finalize over ([`Job::take_finalize`]) and, in one `BEGIN IMMEDIATE`
//! transaction, marks the order confirmed and completes the item with
//! [`SqliteStore::complete_in_tx`], fenced on the attempt's token: it commits only if
//! the store accepted the token, and rolls back if the lease was lost, so a worker
//! that no longer owns the item writes nothing. There is one commit, not two: a crash
//! before it leaves the order unconfirmed and the item running under its lease, which
//! expires and is retried, so no confirmation is lost and none is recorded twice.
//!
//! The first attempt at one order fails after its write (the mail server refuses the
//! message) and rolls back: the order stays unconfirmed and the item stays running
//! under its lease, exactly as before the transaction. The handler returns the error,
//! so the runtime records a retry at once (rather than waiting for the lease to
//! expire), and the second attempt confirms the order.
//!
//! (On PostgreSQL the same pattern uses `PgStore::enqueue_task_in_tx(&mut tx, ..)` and
//! `PgStore::complete_in_tx(&mut tx, ..)` inside an sqlx transaction.)

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{params, TransactionBehavior};
use serde::{Deserialize, Serialize};
use tenure::runtime::{Job, JobError, Worker};
use tenure::{
    CompleteParams, QueueName, RetryPolicy, SqliteConfig, SqliteStore, Store, Task, TokenOutcome,
};
use tenure_examples::args;

const USAGE: &str = "\
The transactional outbox on SQLite: orders and their work items commit together, and
each order is confirmed and its item completed in one transaction.

usage: outbox

  Runs on tenure-outbox.db in the system temp directory (replaced if it is a Tenure
  database, refused otherwise). Takes no arguments.
  -h, --help  print this help";

/// The work item: a confirmation to send, stored as JSON on its task's queue.
#[derive(Serialize, Deserialize)]
struct Confirmation {
    order_id: i64,
    email: String,
}

impl Task for Confirmation {
    const QUEUE: &'static str = "confirmations";
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    args::parse_or_exit(USAGE, 0);
    let path: PathBuf = std::env::temp_dir().join("tenure-outbox.db");
    if let Err(e) = args::replace_store_file(&path) {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    println!("outbox example on SQLite, file {}", path.display());
    let store = SqliteStore::open(SqliteConfig::new(&path)).await?;
    let queue = QueueName::new(Confirmation::QUEUE)?;

    // The application's own table, in the same file as Tenure's tables.
    let mut conn = store.connection()?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS orders (
             id INTEGER PRIMARY KEY,
             email TEXT NOT NULL,
             total_cents INTEGER NOT NULL,
             status TEXT NOT NULL DEFAULT 'placed'
         )",
    )?;

    // Place orders: the order row and its work item in one transaction.
    let orders = [
        ("ada@example.com", 1_250),
        ("grace@example.com", 990),
        ("ken@example.com", -5), // refused below, after both writes
        ("barbara@example.com", 4_200),
    ];
    for (email, total_cents) in orders {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO orders (email, total_cents) VALUES (?1, ?2)",
            params![email, total_cents],
        )?;
        let order_id = tx.last_insert_rowid();
        let confirmation = Confirmation {
            order_id,
            email: email.to_owned(),
        };
        store.enqueue_task_in_tx(&tx, &confirmation)?;
        if total_cents < 0 {
            // Dropping the transaction rolls back the order and its work item together.
            drop(tx);
            println!("order {order_id} for {email}: refused, rolled back");
            continue;
        }
        tx.commit()?;
        println!("order {order_id} for {email}: committed with its confirmation item");
    }
    // The items became visible at each commit; tell the local workers at once.
    store.notify_enqueued();

    let counts = store.queue_counts(&queue).await?;
    let placed: i64 = conn.query_row("SELECT count(*) FROM orders", [], |r| r.get(0))?;
    println!(
        "{placed} orders in the table, {} confirmation items waiting",
        counts.ready
    );

    // A worker sends each confirmation and, in one transaction, marks its order
    // confirmed and completes its item.
    let db = Arc::new(Mutex::new(store.connection()?));
    let finalizing = store.clone();
    let worker = Worker::builder(store.clone())
        .concurrency(2)
        .retry(RetryPolicy::exponential(
            Duration::from_millis(50),
            Duration::from_secs(1),
        ))
        .task_with(move |c: Confirmation, job: Job| {
            let db = Arc::clone(&db);
            let store = finalizing.clone();
            async move {
                // This handler completes the item itself, with its own write.
                let token = job.take_finalize();
                println!(
                    "sending confirmation of order {} to {} (attempt {})",
                    c.order_id, c.email, token.attempt
                );
                tokio::task::spawn_blocking(move || {
                    let mut db = db
                        .lock()
                        .map_err(|_| JobError::retry("connection poisoned"))?;
                    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    tx.execute(
                        "UPDATE orders SET status = 'confirmed' WHERE id = ?1",
                        params![c.order_id],
                    )?;
                    let answer = store
                        .complete_in_tx(&tx, CompleteParams::new(vec![token]))
                        .map_err(|e| JobError::retry(e.to_string()))?;
                    if c.email.starts_with("grace") && token.attempt == 1 {
                        // Dropping the transaction rolls back the confirmation and the
                        // completion together; the item is still ours, running.
                        drop(tx);
                        println!("order {}: the mail server refused; rolled back", c.order_id);
                        return Err(JobError::retry("mail server refused the message"));
                    }
                    match answer[0] {
                        TokenOutcome::Accepted => tx.commit()?,
                        // Another worker owns the item now: write nothing.
                        TokenOutcome::LeaseLost => return Err(JobError::retry("lease lost")),
                        // Items without a stream are never behind another one.
                        TokenOutcome::OutOfOrder => {
                            return Err(JobError::retry("behind an unfinished item"))
                        }
                    }
                    Ok::<(), JobError>(())
                })
                .await??;
                Ok(())
            }
        })
        .spawn()?;
    while store.queue_counts(&queue).await?.pending() > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = worker.shutdown(Duration::from_secs(5)).await;

    let confirmed: i64 = conn.query_row(
        "SELECT count(*) FROM orders WHERE status = 'confirmed'",
        [],
        |r| r.get(0),
    )?;
    let m = report.metrics;
    println!(
        "done: {placed} orders placed, {confirmed} confirmed, {} confirmations recorded by \
         their handlers' own transactions ({} retried after a rollback), the refused order \
         left neither a row nor an item",
        m.handler_finalized, m.failed
    );
    drop(conn);
    store.close().await?;
    if confirmed != placed || m.handler_finalized != placed as u64 || m.completed != 0 {
        return Err("every committed order should have been confirmed exactly once".into());
    }
    Ok(())
}
