//! The flaws that break G15, bad input: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_before_validating_fails_g15() {
    must_fail(
        broken::<WritesBeforeValidating>(),
        "g15_bad_input",
        "an_oversized_payload_names_payload_and_writes_nothing",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_a_run_at_outside_the_window_fails_g15() {
    must_fail(
        broken::<ClampsRunAtIntoTheWindow>(),
        "g15_bad_input",
        "a_run_at_beyond_the_schedule_window_names_run_at_and_writes_nothing",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_a_delay_beyond_the_window_fails_g15() {
    must_fail(
        broken::<ClampsLongDelays>(),
        "g15_bad_input",
        "a_delay_beyond_the_schedule_window_names_delay_and_writes_nothing",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncating_the_queue_list_fails_g15() {
    must_fail(
        broken::<TruncatesTheQueueList>(),
        "g15_bad_input",
        "a_claim_naming_more_queues_than_the_limit_names_queues_and_changes_nothing",
    )
    .await;
}

flaw! {
    /// Writes an enqueue item by item, so a bad item leaves earlier ones written (G15).
    WritesBeforeValidating
}

tenure_core::forward_store! {
    impl Store for WritesBeforeValidating {
        forward self => self.inner;

        async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
            if params.items.is_empty() {
                return self.inner.enqueue(params).await;
            }
            let mut answers = Vec::new();
            for item in params.items {
                answers.extend(self.inner.enqueue(EnqueueParams::one(item)).await?);
            }
            Ok(answers)
        }
    }
}

flaw! {
    /// Writes a `run_at` outside the schedule window, clamped to its edge (G15).
    ClampsRunAtIntoTheWindow
}

tenure_core::forward_store! {
    impl Store for ClampsRunAtIntoTheWindow {
        forward self => self.inner;

        async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
            let (window, now) = (self.limits().schedule_window, self.clock.now());
            for item in &mut params.items {
                if let Schedule::At(t) = item.schedule {
                    item.schedule = Schedule::At(t.clamp(now - window, now + window));
                }
            }
            self.inner.enqueue(params).await
        }
    }
}

flaw! {
    /// Writes a delay longer than the schedule window, clamped to it (G15).
    ClampsLongDelays
}

tenure_core::forward_store! {
    impl Store for ClampsLongDelays {
        forward self => self.inner;

        async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
            let window = self.limits().schedule_window;
            for item in &mut params.items {
                if let Schedule::After(d) = item.schedule {
                    item.schedule = Schedule::After(d.min(window));
                }
            }
            self.inner.enqueue(params).await
        }
    }
}

flaw! {
    /// Reads only as many queue names of a claim as the limit allows (G15).
    TruncatesTheQueueList
}

tenure_core::forward_store! {
    impl Store for TruncatesTheQueueList {
        forward self => self.inner;

        async fn claim(&self, mut params: ClaimParams) -> Result<Vec<Lease>> {
            params.queues.truncate(self.limits().max_claim_queues);
            self.inner.claim(params).await
        }
    }
}
