//! The operations that join the application's own transaction: enqueue (the
//! transactional outbox) and the fenced finalizes (complete, fail, release), so a
//! business write and the item's transition commit or roll back together.
//!
//! Each runs the very statement the store's own call runs (see `store/claim.rs` and
//! `store/finalize.rs`), on the caller's connection, in a savepoint of the caller's
//! transaction: the same fence on `(id, attempt)`, the same per-token answers.

use sqlx::{Acquire, PgConnection};
use tenure_core::{
    CompleteParams, EnqueueParams, Enqueued, Error, FailOutcome, FailParams, NewItem,
    ReleaseParams, Result, Task, TokenOutcome,
};

use crate::error::map;
use crate::PgStore;

impl PgStore {
    /// Enqueues inside the caller's transaction (or on the caller's connection): the
    /// items become visible when the caller commits and vanish if it rolls back.
    ///
    /// Pass `&mut tx` for a `sqlx::Transaction<'_, Postgres>` (it dereferences to a
    /// connection) or a `&mut PgConnection`. The steps run in a savepoint (or, outside
    /// a transaction, in a transaction of their own), so a failure leaves the caller's
    /// transaction usable. The NOTIFY is delivered by Postgres at the caller's commit;
    /// this handle's in-process wake signal fires at once (a hint: a claim before the
    /// commit simply finds nothing).
    pub async fn enqueue_in_tx(
        &self,
        conn: &mut PgConnection,
        params: EnqueueParams,
    ) -> Result<Vec<Enqueued>> {
        params.validate(self.limits_ref())?;
        let now = self.now();
        params.validate_schedule(self.limits_ref(), now)?;
        let mut tx = conn.begin().await.map_err(map)?;
        self.check_pin(&mut tx, &params).await?;
        let out = self
            .enqueue_steps(
                &mut tx,
                &params.items,
                now,
                crate::store::Notify::InStatement,
            )
            .await?;
        self.pin_enqueued(&mut tx, &params, &out).await?;
        tx.commit().await.map_err(map)?;
        self.notify_local();
        Ok(out)
    }

    /// Enqueues one [`Task`] value inside the caller's transaction (or on the
    /// caller's connection): its JSON on [`Task::QUEUE`] with the task's defaults
    /// ([`NewItem::task`]), under the contract of [`PgStore::enqueue_in_tx`]. For
    /// options of one enqueue (a delay, a stream), pass
    /// `EnqueueParams::one(NewItem::task_with(&value, options)?)` to `enqueue_in_tx`.
    ///
    /// ```no_run
    /// # async fn demo(store: tenure_postgres::PgStore) -> Result<(), Box<dyn std::error::Error>> {
    /// use serde::{Deserialize, Serialize};
    /// use tenure_core::Task;
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct SendReceipt {
    ///     order: i64,
    /// }
    ///
    /// impl Task for SendReceipt {
    ///     const QUEUE: &'static str = "receipts";
    /// }
    ///
    /// let mut tx = store.pool().begin().await?;
    /// sqlx::query("INSERT INTO orders (id) VALUES ($1)").bind(7_i64).execute(&mut *tx).await?;
    /// store.enqueue_task_in_tx(&mut tx, &SendReceipt { order: 7 }).await?;
    /// tx.commit().await?; // the order and its receipt task, or neither
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `payload` when the value does not encode as JSON
    /// (or `queue`, or a key the task derives), with nothing sent; otherwise as
    /// [`PgStore::enqueue_in_tx`].
    pub async fn enqueue_task_in_tx<T: Task>(
        &self,
        conn: &mut PgConnection,
        task: &T,
    ) -> Result<Enqueued> {
        let item = NewItem::task(task)?;
        let mut out = self.enqueue_in_tx(conn, EnqueueParams::one(item)).await?;
        match (out.pop(), out.is_empty()) {
            (Some(enqueued), true) => Ok(enqueued),
            _ => Err(Error::internal(
                "postgres",
                "expected exactly one answer for one item",
            )),
        }
    }

    /// The former name of [`PgStore::enqueue_in_tx`], which it calls.
    #[deprecated(note = "renamed to `enqueue_in_tx`, like the other transactional calls")]
    pub async fn enqueue_with(
        &self,
        conn: &mut PgConnection,
        params: EnqueueParams,
    ) -> Result<Vec<Enqueued>> {
        self.enqueue_in_tx(conn, params).await
    }

    /// Completes leased items inside the caller's transaction: the business write and
    /// the fenced completion commit together, or neither does.
    ///
    /// The same contract as [`Store::complete`](tenure_core::Store::complete), by the
    /// same statement: one answer per token, in order; a token that is not its item's
    /// current running attempt answers [`TokenOutcome::LeaseLost`] and changes nothing
    /// (G3); a stream head's completion promotes the next item (G9). The answers hold
    /// for the caller's commit: the statement row-locks every item it finishes until
    /// the caller's transaction ends, so recovery and claims (which skip or wait for
    /// locked rows) cannot come between the answer and the commit.
    ///
    /// # The pattern
    ///
    /// Begin a transaction, write the business rows, call this, and commit only if
    /// every token you meant to finish was accepted; on [`TokenOutcome::LeaseLost`]
    /// roll back, so a worker that lost its lease (expired and re-claimed, evicted)
    /// writes no business row either:
    ///
    /// ```no_run
    /// # async fn demo(store: tenure_postgres::PgStore, lease: tenure_core::Lease)
    /// # -> Result<(), Box<dyn std::error::Error>> {
    /// use tenure_core::{CompleteParams, TokenOutcome};
    ///
    /// let mut tx = store.pool().begin().await?;
    /// sqlx::query("UPDATE payments SET status = 'paid' WHERE key = $1")
    ///     .bind("pay-1")
    ///     .execute(&mut *tx)
    ///     .await?;
    /// match store.complete_in_tx(&mut tx, CompleteParams::new(vec![lease.token])).await?[0] {
    ///     TokenOutcome::Accepted => tx.commit().await?,
    ///     TokenOutcome::LeaseLost | TokenOutcome::OutOfOrder => tx.rollback().await?,
    /// }
    /// # Ok(())
    /// # }
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
    /// Pass `&mut tx` for a `sqlx::Transaction<'_, Postgres>` or a `&mut
    /// PgConnection` to the same database (on a connection outside a transaction the
    /// call is simply a transaction of its own). The statement runs in a savepoint, so
    /// an error leaves the caller's transaction usable. The connection's
    /// `search_path` does not matter: the statement names the store's schema. `now` is
    /// read from this store's clock.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](tenure_core::Error) for bad params (nothing sent),
    /// [`Error::Unavailable`](tenure_core::Error) when the server cannot be reached;
    /// other database errors as [`Store::complete`](tenure_core::Store::complete)
    /// answers them.
    pub async fn complete_in_tx(
        &self,
        conn: &mut PgConnection,
        params: CompleteParams,
    ) -> Result<Vec<TokenOutcome>> {
        params.validate(self.limits_ref())?;
        let mut tx = conn.begin().await.map_err(map)?;
        let out = self.complete_on(&mut tx, &params).await?;
        tx.commit().await.map_err(map)?;
        Ok(out)
    }

    /// Records failures inside the caller's transaction: the same contract as
    /// [`Store::fail`](tenure_core::Store::fail) (retry at `now + delay`, or dead when
    /// the attempts are used up or the failure is permanent; G5), fenced and answered
    /// per token like [`PgStore::complete_in_tx`], whose pattern, guarantees and
    /// errors apply unchanged. Use it to record the failure together with the
    /// application's own rows (a failed payment marked failed in the same commit).
    pub async fn fail_in_tx(
        &self,
        conn: &mut PgConnection,
        params: FailParams,
    ) -> Result<Vec<FailOutcome>> {
        params.validate(self.limits_ref())?;
        let mut tx = conn.begin().await.map_err(map)?;
        let out = self.fail_on(&mut tx, &params).await?;
        tx.commit().await.map_err(map)?;
        Ok(out)
    }

    /// Gives leases back inside the caller's transaction: the same contract as
    /// [`Store::release`](tenure_core::Store::release) (ready again at once, no attempt
    /// spent), fenced and answered per token like [`PgStore::complete_in_tx`], whose
    /// pattern, guarantees and errors apply unchanged.
    pub async fn release_in_tx(
        &self,
        conn: &mut PgConnection,
        params: ReleaseParams,
    ) -> Result<Vec<TokenOutcome>> {
        params.validate(self.limits_ref())?;
        let mut tx = conn.begin().await.map_err(map)?;
        let out = self.release_on(&mut tx, &params).await?;
        tx.commit().await.map_err(map)?;
        Ok(out)
    }
}
