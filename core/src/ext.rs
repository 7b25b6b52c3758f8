//! Conveniences over [`Store`], for callers. Do not implement: the blanket impl covers
//! every store.

use async_trait::async_trait;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::keys::{OwnerId, QueueName};
use crate::model::{Enqueued, FailOutcome, Lease, LeaseToken, NewItem, RenewOutcome, TokenOutcome};
use crate::store::{
    ClaimParams, CompleteParams, EnqueueParams, FailParams, Failure, ReleaseParams, RenewParams,
    Store,
};
use crate::task::{Task, TaskOptions};

fn single<T>(mut answers: Vec<T>, store: &'static str) -> Result<T> {
    match (answers.pop(), answers.is_empty()) {
        (Some(a), true) => Ok(a),
        _ => Err(Error::internal(
            store,
            "expected exactly one answer for one input",
        )),
    }
}

/// One-item conveniences and JSON helpers over any [`Store`].
#[async_trait]
pub trait StoreExt: Store {
    /// Enqueues one item.
    async fn enqueue_one(&self, item: NewItem) -> Result<Enqueued> {
        single(self.enqueue(EnqueueParams::one(item)).await?, self.name())
    }

    /// Enqueues one item whose payload is `value` as JSON.
    async fn enqueue_json<T: Serialize + Sync + ?Sized>(
        &self,
        queue: QueueName,
        value: &T,
    ) -> Result<Enqueued> {
        self.enqueue_one(NewItem::json(queue, value)?).await
    }

    /// Enqueues one [`Task`] value: its JSON on [`Task::QUEUE`], with the task's
    /// defaults (see [`NewItem::task`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming `payload` when the value does not encode as JSON
    /// (or `queue`, or a key the task derives), and nothing is written; otherwise as
    /// [`Store::enqueue`].
    async fn enqueue_task<T: Task>(&self, task: &T) -> Result<Enqueued> {
        self.enqueue_one(NewItem::task(task)?).await
    }

    /// Enqueues one [`Task`] value with `options` over the task's defaults: when it
    /// runs, its keys, priority and attempts (see [`NewItem::task_with`]). Errors as
    /// [`StoreExt::enqueue_task`].
    async fn enqueue_task_with<T: Task>(&self, task: &T, options: TaskOptions) -> Result<Enqueued> {
        self.enqueue_one(NewItem::task_with(task, options)?).await
    }

    /// Claims at most one item.
    async fn claim_one(
        &self,
        queue: QueueName,
        owner: OwnerId,
        lease_for: std::time::Duration,
    ) -> Result<Option<Lease>> {
        Ok(self
            .claim(ClaimParams::new(queue, owner, 1, lease_for))
            .await?
            .pop())
    }

    /// Completes one attempt; a superseded token is `Err(Error::LeaseLost)`, and an
    /// item behind an unfinished item of its stream
    /// ([`TokenOutcome::OutOfOrder`]) is `Err(Error::Conflict)` naming `token`, nothing
    /// changed.
    async fn complete_one(&self, token: LeaseToken) -> Result<()> {
        match single(
            self.complete(CompleteParams::new(vec![token])).await?,
            self.name(),
        )? {
            TokenOutcome::Accepted => Ok(()),
            TokenOutcome::LeaseLost => Err(Error::LeaseLost { token }),
            TokenOutcome::OutOfOrder => Err(out_of_order(token)),
        }
    }

    /// Releases one attempt; a superseded token is `Err(Error::LeaseLost)`.
    async fn release_one(&self, token: LeaseToken) -> Result<()> {
        match single(
            self.release(ReleaseParams::new(vec![token])).await?,
            self.name(),
        )? {
            TokenOutcome::Accepted => Ok(()),
            TokenOutcome::LeaseLost => Err(Error::LeaseLost { token }),
            // Not an answer of release; a store that gives it changed nothing.
            TokenOutcome::OutOfOrder => Err(out_of_order(token)),
        }
    }

    /// Records one failure; a superseded token is `Err(Error::LeaseLost)`.
    async fn fail_one(&self, failure: Failure) -> Result<FailOutcome> {
        let token = failure.token;
        match single(self.fail(FailParams::one(failure)).await?, self.name())? {
            FailOutcome::LeaseLost => Err(Error::LeaseLost { token }),
            other => Ok(other),
        }
    }

    /// Renews one lease; lease lost and the renewal cap come back as errors.
    async fn renew_one(
        &self,
        token: LeaseToken,
        lease_for: std::time::Duration,
    ) -> Result<crate::time::Timestamp> {
        match single(
            self.renew(RenewParams::new(vec![token], lease_for)).await?,
            self.name(),
        )? {
            RenewOutcome::Renewed { expires_at, .. } => Ok(expires_at),
            RenewOutcome::LimitReached { limit } => Err(Error::RenewalLimit { token, limit }),
            RenewOutcome::LeaseLost => Err(Error::LeaseLost { token }),
        }
    }

    /// Cancels one ready or scheduled item. Anything else is an error that says why:
    /// [`Error::Conflict`] naming the holder for a running item (cancel does not stop
    /// a running attempt), or a dead or done item; [`Error::NotFound`] for an unknown id.
    async fn cancel_one(&self, id: crate::model::ItemId) -> Result<()> {
        use crate::operate::CancelOutcome;
        match single(
            self.item_cancel(crate::store::CancelParams::new(vec![id]))
                .await?,
            self.name(),
        )? {
            CancelOutcome::Cancelled | CancelOutcome::Stopped { .. } => Ok(()),
            CancelOutcome::Running { attempt, owner } => Err(Error::conflict(
                "item",
                format!(
                    "{id} is running (attempt {attempt}, owner {owner}); cancel does not \
                     stop a running item: let it finish, or wait for it to fail or expire"
                ),
            )),
            CancelOutcome::Dead => Err(Error::conflict(
                "item",
                format!("{id} is dead; discard it instead of cancelling it"),
            )),
            CancelOutcome::Done => Err(Error::conflict(
                "item",
                format!("{id} has finished; there is nothing to cancel"),
            )),
            CancelOutcome::NotFound => Err(Error::not_found("item", id.to_string())),
        }
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

/// The error of a single complete answered [`TokenOutcome::OutOfOrder`].
fn out_of_order(token: LeaseToken) -> Error {
    Error::conflict(
        "token",
        format!(
            "item {} is behind an unfinished item of its stream: complete the items \
             ahead of it first (nothing changed; the lease is still current)",
            token.id
        ),
    )
}
