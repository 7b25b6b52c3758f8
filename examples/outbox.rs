//! The transactional outbox: a business write and its work item commit together (or
//! not at all), then a worker drains the items. Runs on an SQLite file, no server:
//!
//! ```text
//! cargo run --example outbox
//! ```
//!
//! Each order is inserted into the application's own `orders` table and, in the same
//! transaction, a "send the confirmation" item is enqueued with
//! [`SqliteStore::enqueue_in_tx`]. One order fails validation after both writes and
//! rolls back: neither its row nor its work item exists afterwards. A worker then
//! sends each confirmation and marks the order confirmed. (On PostgreSQL the same
//! pattern uses `PgStore::enqueue_with(&mut tx, ..)` inside an sqlx transaction.)

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{params, TransactionBehavior};
use serde::{Deserialize, Serialize};
use tenure::runtime::{Job, JobError, Worker};
use tenure::{EnqueueParams, NewItem, QueueName, SqliteConfig, SqliteStore, Store};
use tenure_examples::args;

const USAGE: &str = "\
The transactional outbox on SQLite: orders and their work items commit together.

usage: outbox

  Runs on tenure-outbox.db in the system temp directory (replaced if it is a Tenure
  database, refused otherwise). Takes no arguments.
  -h, --help  print this help";

#[derive(Serialize, Deserialize)]
struct Confirmation {
    order_id: i64,
    email: String,
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
    let queue = QueueName::new("confirmations")?;

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
        let item = NewItem::json(
            queue.clone(),
            &Confirmation {
                order_id,
                email: email.to_owned(),
            },
        )?;
        store.enqueue_in_tx(&tx, EnqueueParams::one(item))?;
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

    // A worker sends each confirmation and marks its order confirmed.
    let db = Arc::new(Mutex::new(store.connection()?));
    let worker = Worker::builder(store.clone())
        .queue(queue.clone())
        .concurrency(2)
        .handler(move |job: Job| {
            let db = Arc::clone(&db);
            async move {
                let c: Confirmation = job.json().map_err(|e| JobError::permanent(e.to_string()))?;
                println!(
                    "sending confirmation of order {} to {}",
                    c.order_id, c.email
                );
                tokio::task::spawn_blocking(move || {
                    let db = db
                        .lock()
                        .map_err(|_| JobError::retry("connection poisoned"))?;
                    db.execute(
                        "UPDATE orders SET status = 'confirmed' WHERE id = ?1",
                        params![c.order_id],
                    )?;
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
    println!(
        "done: {placed} orders placed, {confirmed} confirmed, {} confirmations sent, \
         the refused order left neither a row nor an item",
        report.metrics.completed
    );
    drop(conn);
    store.close().await?;
    if confirmed != placed || report.metrics.completed != placed as u64 {
        return Err("every committed order should have been confirmed exactly once".into());
    }
    Ok(())
}
