//! Wake-ups for other processes, sent after an enqueue commits.
//!
//! A `NOTIFY` sent inside the enqueue's own transaction costs every enqueue its
//! share of one lock: PostgreSQL holds the database's notification lock from the
//! moment a notifying transaction starts to commit until its commit record is
//! flushed, so notifying transactions commit one after another, one disk flush
//! each, and concurrent enqueues cannot share a flush. On a disk that flushes in
//! 3 ms, that caps a database's enqueues at about 300 a second, whatever the number
//! of producers (measured with pgbench on this project's CI machine: 376
//! transactions/s with the `NOTIFY`, 2,533 without).
//!
//! So the store's own enqueues commit without one, and hand the wake-up to a
//! [`Pump`]: one task per store that sends `pg_notify` in a transaction of its own
//! with `synchronous_commit` off (a wake-up is a hint, and losing one to a crash costs
//! a poll interval, as a lost connection already does). Its queue holds one request:
//! requests that arrive while one waits are the same request, so a burst of enqueues
//! costs a few notifications, and each enqueue is followed by a notification sent
//! after its commit. An enqueue in the caller's transaction
//! ([`PgStore::enqueue_in_tx`](crate::PgStore::enqueue_in_tx)) still notifies inside
//! it: only that transaction's commit makes the items visible.

use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The sending half of the pump: [`Pump::wake`] asks for one notification.
#[derive(Debug)]
pub(crate) struct Pump {
    requests: mpsc::Sender<()>,
    task: JoinHandle<()>,
}

impl Pump {
    /// Starts the task that notifies `channel` through `pool`; dropping the pump
    /// stops it.
    pub(crate) fn spawn(pool: PgPool, channel: &str) -> Pump {
        let (requests, mut pending) = mpsc::channel::<()>(1);
        let statement = format!(
            "BEGIN; SET LOCAL synchronous_commit TO off; SELECT pg_notify({}, ''); COMMIT",
            literal(channel)
        );
        let task = tokio::spawn(async move {
            while pending.recv().await.is_some() {
                if let Err(e) = sqlx::raw_sql(&statement).execute(&pool).await {
                    // Workers elsewhere poll; the next enqueue tries again.
                    tracing::debug!(error = %e, "tenure-postgres: a wake-up NOTIFY failed");
                }
            }
        });
        Pump { requests, task }
    }

    /// Asks for a notification after what this handle has committed so far. Never
    /// waits: a request already queued covers this one.
    pub(crate) fn wake(&self) {
        let _ = self.requests.try_send(());
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `s` as an SQL string literal.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::literal;

    #[test]
    fn a_channel_name_is_quoted_as_a_literal() {
        assert_eq!(literal("tenure_jobs"), "'tenure_jobs'");
        assert_eq!(literal("a'b"), "'a''b'");
    }
}
