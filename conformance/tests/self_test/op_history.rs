//! The flaws that break the work history: each broken store must fail the cases named
//! with it.

use tenure_core::{HistoryAddParams, HistoryParams, HistoryPoint, HISTORY_KEEP};

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_only_the_first_entry_fails_op_history() {
    must_fail(
        broken::<HistoryAddsOnlyTheFirstEntry>(),
        "op_history",
        "history_adds_sum_per_queue_and_minute_across_handles",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_queues_by_name_prefix_fails_op_history_alone() {
    must_fail_only(
        broken::<HistoryReadsByNamePrefix>(),
        "op_history",
        "history_reads_one_queue_and_only_the_span_asked",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keeping_a_minute_less_than_history_keep_fails_op_history_alone() {
    must_fail_only(
        broken::<HistoryKeepsAMinuteLess>(),
        "op_history",
        "history_keeps_every_minute_younger_than_history_keep",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_entries_before_refusing_the_call_fails_op_history_alone() {
    must_fail_only(
        broken::<HistoryWritesBeforeRefusing>(),
        "op_history",
        "history_params_out_of_bounds_are_refused_naming_the_field",
    )
    .await;
}

flaw! {
    /// Adds the first entry of each call and drops the others.
    HistoryAddsOnlyTheFirstEntry
}

tenure_core::forward_store! {
    impl Store for HistoryAddsOnlyTheFirstEntry {
        forward self => self.inner;

        async fn history_add(&self, mut params: HistoryAddParams) -> Result<()> {
            params.entries.truncate(1);
            self.inner.history_add(params).await
        }
    }
}

flaw! {
    /// Reads a queue's history with that of every queue whose name begins with its name.
    HistoryReadsByNamePrefix
}

tenure_core::forward_store! {
    impl Store for HistoryReadsByNamePrefix {
        forward self => self.inner;

        async fn history(&self, params: HistoryParams) -> Result<Vec<HistoryPoint>> {
            let mut points = self.inner.history(params.clone()).await?;
            for other in ["hist-longer"] {
                let other = QueueName::new(other)?;
                if other != params.queue && other.as_str().starts_with(params.queue.as_str()) {
                    let mut p = params.clone();
                    p.queue = other;
                    points.extend(self.inner.history(p).await?);
                }
            }
            points.sort_by_key(|p| p.minute);
            Ok(points)
        }
    }
}

flaw! {
    /// Forgets a minute once the newest minute added is `HISTORY_KEEP` after it: one
    /// minute sooner than the contract allows.
    HistoryKeepsAMinuteLess { newest: Arc<Mutex<Option<Timestamp>>> }
}

tenure_core::forward_store! {
    impl Store for HistoryKeepsAMinuteLess {
        forward self => self.inner;

        async fn history_add(&self, params: HistoryAddParams) -> Result<()> {
            let top = params.entries.iter().map(|e| e.minute).max();
            self.inner.history_add(params).await?;
            if let Ok(mut newest) = self.newest.lock() {
                *newest = (*newest).max(top);
            }
            Ok(())
        }

        async fn history(&self, params: HistoryParams) -> Result<Vec<HistoryPoint>> {
            let newest = self.newest.lock().ok().and_then(|n| *n);
            let mut points = self.inner.history(params).await?;
            if let Some(newest) = newest {
                points.retain(|p| p.minute > newest.saturating_sub(HISTORY_KEEP));
            }
            Ok(points)
        }
    }
}

flaw! {
    /// Adds a call's entries one by one, so the valid ones before a bad one are written
    /// before the call is refused.
    HistoryWritesBeforeRefusing
}

tenure_core::forward_store! {
    impl Store for HistoryWritesBeforeRefusing {
        forward self => self.inner;

        async fn history_add(&self, params: HistoryAddParams) -> Result<()> {
            for e in params.entries {
                self.inner.history_add(HistoryAddParams::new(vec![e])).await?;
            }
            Ok(())
        }
    }
}
