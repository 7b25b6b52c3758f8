//! The flaws that break G17, rate limits: each broken store must fail the cases named with it.

use super::*;
use crate::g16::limited;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_rate_windows_fail_the_window_edges_case_alone() {
    must_fail_only(
        broken::<RatesInFixedWindows>(),
        "g17_rate_limits",
        "a_key_rate_holds_in_every_window_probed_at_its_edges",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rate_counted_over_the_queue_fails_the_other_keys_case_alone() {
    must_fail_only(
        broken::<KeyRateCountsTheWholeQueue>(),
        "g17_rate_limits",
        "a_key_at_its_rate_holds_up_no_other_key_and_its_items_use_no_attempt",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_queue_rate_fails_the_queue_rate_case_alone() {
    must_fail_only(
        broken::<IgnoresQueueRate>(),
        "g17_rate_limits",
        "a_queue_rate_caps_starts_across_keys",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_deferrals_fail_the_deferral_case_alone() {
    must_fail_only(
        broken::<IgnoresDeferrals>(),
        "g17_rate_limits",
        "a_deferred_key_starts_nothing_until_its_time_and_holds_up_no_other_key",
    )
    .await;
}

flaw! {
    /// Forgets a rate's starts at every multiple of its period, as a counter in fixed
    /// windows does: up to twice the rate in a window that straddles two (G17).
    RatesInFixedWindows { windows: Shared<HashMap<QueueName, u64>> }
}

tenure_core::forward_store! {
    impl Store for RatesInFixedWindows {
        forward self => self.inner;

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            let now = self.clock.now();
            if let Some((q, c)) = limited(&self.inner, &params.queues).await? {
                if let Some(per) = c.key_rate.map(|r| r.per) {
                    let window = (now.as_micros() / per.as_micros() as i64) as u64;
                    let last = lock(&self.windows).insert(q.clone(), window);
                    if last.is_some_and(|w| w != window) {
                        self.inner.limits_clear(&q).await?;
                        self.inner.limits_set(LimitsParams::new(q, c)).await?;
                    }
                }
            }
            self.inner.claim(params).await
        }
    }
}

flaw! {
    /// Counts a per-key rate over the whole queue (G17).
    KeyRateCountsTheWholeQueue { shown: Shared<HashMap<QueueName, QueueLimits>> }
}

impl KeyRateCountsTheWholeQueue {
    fn alter(&self, limits: &mut QueueLimits) {
        if let Some(r) = limits.key_rate.take() {
            limits.rate = Some(r);
        }
    }
}

shows_the_limits_set!(KeyRateCountsTheWholeQueue {});

flaw! {
    /// Ignores the queue-wide rate (G17).
    IgnoresQueueRate { shown: Shared<HashMap<QueueName, QueueLimits>> }
}

impl IgnoresQueueRate {
    fn alter(&self, limits: &mut QueueLimits) {
        limits.rate = None;
    }
}

shows_the_limits_set!(IgnoresQueueRate {});

flaw! {
    /// Answers a deferral and forgets it (G17).
    IgnoresDeferrals
}

tenure_core::forward_store! {
    impl Store for IgnoresDeferrals {
        forward self => self.inner;

        async fn limits_defer(&self, params: DeferParams) -> Result<()> {
            params.validate(&self.limits())
        }
    }
}
