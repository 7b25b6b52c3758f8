//! The operations that run inside the application's own transaction: enqueue (the
//! transactional outbox) and the fenced finalizes (complete, fail, release), so a
//! business write and the item's transition commit or roll back together.
//!
//! Each runs the very function of [`crate::ops`] that the store's own call runs, on
//! the caller's connection, in a savepoint of the caller's transaction: the same
//! statements, the same fence on `(id, attempt, lease)`, the same per-token answers.

use tenure_core::{
    CompleteParams, EnqueueParams, Enqueued, Error, FailOutcome, FailParams, NewItem,
    ReleaseParams, Result, Task, TokenOutcome,
};

use crate::error::{self, Phase};
use crate::ops::{self, Cx, OpError, OpResult};
use crate::{schema, SqliteStore, SCHEMA_VERSION};

impl SqliteStore {
    /// Enqueues items inside the caller's transaction, so they commit or roll back
    /// with the caller's own rows (the transactional outbox). Blocking: it runs on the
    /// caller's thread, on the caller's connection.
    ///
    /// The same contract as [`Store::enqueue`](tenure_core::Store::enqueue): validated
    /// first, enqueue order as given, all or nothing (a savepoint inside `tx`). On top
    /// of it:
    ///
    /// - The connection must be to this store's file ([`SqliteStore::path`],
    ///   [`SqliteStore::connection`]), and the schema must exist, which it does once
    ///   this store has opened the file; otherwise the call answers
    ///   [`Error::Conflict`] (`schema`).
    /// - Dedup keys (G11) are recorded in the same transaction: if the caller rolls
    ///   back, the key is forgotten with the item, and a later enqueue with that key is
    ///   not a duplicate. Two transactions with one key serialize on SQLite's write
    ///   lock, so the second sees the first's key once it commits.
    /// - The wake signal cannot fire here, since the items are not visible before the
    ///   caller commits. Call [`SqliteStore::notify_enqueued`] after the commit, or let
    ///   workers find the items at their next poll.
    /// - `now` is read from this store's clock.
    pub fn enqueue_in_tx(
        &self,
        tx: &rusqlite::Transaction<'_>,
        params: EnqueueParams,
    ) -> Result<Vec<Enqueued>> {
        params.validate(&self.config().limits)?;
        let limits = self.config().limits;
        self.in_tx(tx, move |cx| {
            params.validate_schedule(&limits, cx.now)?;
            ops::enqueue(cx, &params)
        })
    }

    /// Enqueues one [`Task`] value inside the caller's transaction: its JSON on
    /// [`Task::QUEUE`] with the task's defaults ([`NewItem::task`]), under the contract
    /// of [`SqliteStore::enqueue_in_tx`]. For options of one enqueue (a delay, a
    /// stream), pass `EnqueueParams::one(NewItem::task_with(&value, options)?)` to
    /// `enqueue_in_tx`.
    ///
    /// ```
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use rusqlite::TransactionBehavior;
    /// use serde::{Deserialize, Serialize};
    /// use tenure_core::Task;
    /// use tenure_sqlite::{SqliteConfig, SqliteStore};
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct SendReceipt {
    ///     order: u64,
    /// }
    ///
    /// impl Task for SendReceipt {
    ///     const QUEUE: &'static str = "receipts";
    /// }
    ///
    /// # let dir = tempfile::tempdir()?;
    /// let store = SqliteStore::open(SqliteConfig::new(dir.path().join("work.db"))).await?;
    /// let mut conn = store.connection()?;
    /// # conn.execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY)")?;
    /// let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    /// tx.execute("INSERT INTO orders (id) VALUES (7)", [])?;
    /// store.enqueue_task_in_tx(&tx, &SendReceipt { order: 7 })?;
    /// tx.commit()?; // the order and its receipt task, or neither
    /// store.notify_enqueued();
    /// # Ok(())
    /// # }
    /// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # rt.block_on(demo()).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `payload` when the value does not encode as JSON
    /// (or `queue`, or a key the task derives), with nothing written; otherwise as
    /// [`SqliteStore::enqueue_in_tx`].
    pub fn enqueue_task_in_tx<T: Task>(
        &self,
        tx: &rusqlite::Transaction<'_>,
        task: &T,
    ) -> Result<Enqueued> {
        let mut out = self.enqueue_in_tx(tx, EnqueueParams::one(NewItem::task(task)?))?;
        match (out.pop(), out.is_empty()) {
            (Some(enqueued), true) => Ok(enqueued),
            _ => Err(Error::internal(
                "sqlite",
                "expected exactly one answer for one item",
            )),
        }
    }

    /// Completes leased items inside the caller's transaction: the business write and
    /// the fenced completion commit together, or neither does. Blocking, on the
    /// caller's thread and connection.
    ///
    /// The same contract as [`Store::complete`](tenure_core::Store::complete), by the
    /// same statements: one answer per token, in order; a token that is not its item's
    /// current running attempt answers [`TokenOutcome::LeaseLost`] and changes nothing
    /// (G3); a stream head's completion moves the head on (G9). The answers hold for
    /// the caller's commit: the transaction holds SQLite's write lock from the fenced
    /// write until it ends, so no recovery or claim can come between the answer and
    /// the commit.
    ///
    /// # The pattern
    ///
    /// Open the transaction with `BEGIN IMMEDIATE`, write the business rows, call this,
    /// and commit only if every token you meant to finish was accepted; on
    /// [`TokenOutcome::LeaseLost`] roll back, so a worker that lost its lease (expired
    /// and re-claimed, evicted) writes no business row either:
    ///
    /// ```
    /// # async fn demo() -> tenure_core::Result<()> {
    /// use std::time::Duration;
    /// use rusqlite::TransactionBehavior;
    /// use tenure_core::{CompleteParams, NewItem, OwnerId, QueueName, StoreExt, TokenOutcome};
    /// use tenure_sqlite::{SqliteConfig, SqliteStore};
    ///
    /// # let dir = std::env::temp_dir().join(format!("tenure-doc-c-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let store = SqliteStore::open(SqliteConfig::new(dir.join("work.db"))).await?;
    /// let mut conn = store.connection()?;
    /// # conn.execute_batch("CREATE TABLE IF NOT EXISTS payments (key TEXT PRIMARY KEY)").unwrap();
    /// let queue = QueueName::new("payments")?;
    /// store.enqueue_one(NewItem::new(queue.clone(), b"pay-1".to_vec())).await?;
    /// let me = OwnerId::new("worker-1")?;
    /// let lease = store.claim_one(queue, me, Duration::from_secs(30)).await?.unwrap();
    ///
    /// let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    /// tx.execute("INSERT INTO payments (key) VALUES ('pay-1')", []).unwrap();
    /// match store.complete_in_tx(&tx, CompleteParams::new(vec![lease.token]))?[0] {
    ///     TokenOutcome::Accepted => tx.commit().unwrap(),
    ///     // Dropping the transaction rolls the payment back with it.
    ///     TokenOutcome::LeaseLost | TokenOutcome::OutOfOrder => drop(tx),
    /// }
    /// # Ok(())
    /// # }
    /// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # rt.block_on(demo()).unwrap();
    /// ```
    ///
    /// A transaction that rolls back (or a process that dies before its commit) leaves
    /// the item exactly as it was: running under this attempt's lease. The same worker
    /// may try again with the same token while the lease lasts (or give the item up
    /// with [`Store::fail`](tenure_core::Store::fail) or
    /// [`Store::release`](tenure_core::Store::release)); otherwise the lease expires
    /// and recovery hands the item out again with the next attempt, counting a stall
    /// (G2, G6). Nothing is lost and nothing is finished twice.
    ///
    /// The connection must be to this store's file, as for
    /// [`SqliteStore::enqueue_in_tx`]; `now` is read from this store's clock.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for bad params (nothing written), [`Error::Conflict`]
    /// (`schema`) for a file without this store's schema, [`Error::Unavailable`] when
    /// the database is busy or gone. On an error the savepoint is rolled back and the
    /// caller's transaction is left as it was before the call.
    pub fn complete_in_tx(
        &self,
        tx: &rusqlite::Transaction<'_>,
        params: CompleteParams,
    ) -> Result<Vec<TokenOutcome>> {
        params.validate(&self.config().limits)?;
        self.in_tx(tx, move |cx| ops::complete(cx, &params))
    }

    /// Records failures inside the caller's transaction: the same contract as
    /// [`Store::fail`](tenure_core::Store::fail) (retry at `now + delay`, or dead when
    /// the attempts are used up or the failure is permanent; G5), fenced and answered
    /// per token like [`SqliteStore::complete_in_tx`], whose pattern, guarantees and
    /// errors apply unchanged. Use it to record the failure together with the
    /// application's own rows (a failed payment marked failed in the same commit).
    pub fn fail_in_tx(
        &self,
        tx: &rusqlite::Transaction<'_>,
        params: FailParams,
    ) -> Result<Vec<FailOutcome>> {
        params.validate(&self.config().limits)?;
        self.in_tx(tx, move |cx| ops::fail(cx, &params))
    }

    /// Gives leases back inside the caller's transaction: the same contract as
    /// [`Store::release`](tenure_core::Store::release) (ready again at once, no attempt
    /// spent), fenced and answered per token like [`SqliteStore::complete_in_tx`],
    /// whose pattern, guarantees and errors apply unchanged.
    pub fn release_in_tx(
        &self,
        tx: &rusqlite::Transaction<'_>,
        params: ReleaseParams,
    ) -> Result<Vec<TokenOutcome>> {
        params.validate(&self.config().limits)?;
        self.in_tx(tx, move |cx| ops::release(cx, &params))
    }

    /// Runs `op` on the caller's transaction in a savepoint of its own, after checking
    /// that the connection's file carries this store's schema; an error rolls the
    /// savepoint back and leaves the caller's transaction as it was.
    fn in_tx<T>(
        &self,
        tx: &rusqlite::Transaction<'_>,
        op: impl FnOnce(&Cx<'_>) -> OpResult<T>,
    ) -> Result<T> {
        let config = self.config();
        let missing_schema = |e: &rusqlite::Error| e.to_string().contains("no such table: tenure_");
        let run = move || -> OpResult<T> {
            let version = schema::read_version(tx, &config.path, Phase::Call)?;
            if version != SCHEMA_VERSION {
                return Err(OpError::Store(Error::conflict(
                    "schema",
                    format!(
                        "{} has tenure schema version {version}, expected {SCHEMA_VERSION}; \
                         open a SqliteStore on this file first",
                        config.path.display()
                    ),
                )));
            }
            let cx = Cx {
                conn: tx,
                now: config.clock.now(),
                keep_done: config.keep_done,
            };
            op(&cx)
        };
        let sql = |e: rusqlite::Error| -> Error {
            if missing_schema(&e) {
                Error::conflict(
                    "schema",
                    format!(
                        "{} has no tenure schema; open a SqliteStore on it first",
                        config.path.display()
                    ),
                )
            } else {
                error::map(&e, &config.path, Phase::Call)
            }
        };
        tx.execute_batch("SAVEPOINT tenure_in_tx").map_err(sql)?;
        match run() {
            Ok(out) => {
                tx.execute_batch("RELEASE tenure_in_tx").map_err(sql)?;
                Ok(out)
            }
            Err(e) => {
                let _ = tx.execute_batch("ROLLBACK TO tenure_in_tx; RELEASE tenure_in_tx");
                Err(match e {
                    OpError::Store(e) => e,
                    OpError::Sql(e) => sql(e),
                })
            }
        }
    }
}
