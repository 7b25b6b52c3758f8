//! The flaws that break G18, fair shares: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_joining_the_longest_line_fails_the_starvation_bound_alone() {
    must_fail_only(
        broken::<ANewTenantJoinsTheLongestLine>(),
        "g18_fair_shares",
        "a_tenant_with_one_item_is_served_within_a_turn_beside_a_large_backlog",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_weights_fail_the_weight_ratio_alone() {
    must_fail_only(
        broken::<IgnoresConfiguredWeights>(),
        "g18_fair_shares",
        "busy_tenants_are_served_in_the_ratio_of_their_weights_over_ten_thousand_claims",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shares_by_limit_key_fail_the_many_keys_tenant_alone() {
    must_fail_only(
        broken::<FairSharesByLimitKey>(),
        "g18_fair_shares",
        "a_tenant_spreading_over_many_limit_keys_gains_nothing",
    )
    .await;
}

flaw! {
    /// Files the first item of a tenant that arrives while others wait under the
    /// tenant with the most items, so a newcomer waits out that backlog (G18).
    ANewTenantJoinsTheLongestLine {
        tenants: Shared<HashMap<(QueueName, Option<FairnessKey>), usize>>,
    }
}

tenure_core::forward_store! {
    impl Store for ANewTenantJoinsTheLongestLine {
        forward self => self.inner;

        async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
            {
            let mut tenants = lock(&self.tenants);
            for item in &mut params.items {
                let tenant = (item.queue.clone(), item.fairness_key.clone());
                let seen = tenants.contains_key(&tenant);
                let longest = tenants
                    .iter()
                    .filter(|((q, _), _)| *q == item.queue)
                    .max_by_key(|(_, n)| **n)
                    .map(|((_, t), n)| (t.clone(), *n));
                *tenants.entry(tenant).or_default() += 1;
                if let (false, Some((t, n))) = (seen, longest) {
                    if n > 1 {
                        item.fairness_key = t;
                    }
                }
            }
            }
            self.inner.enqueue(params).await
        }
    }
}

flaw! {
    /// Ignores the weights a queue configures, serving every tenant by the weight its
    /// items declare (G18).
    IgnoresConfiguredWeights { shown: Shared<HashMap<QueueName, QueueLimits>> }
}

impl IgnoresConfiguredWeights {
    fn alter(&self, limits: &mut QueueLimits) {
        limits.weights.clear();
    }
}

shows_the_limits_set!(IgnoresConfiguredWeights {});

flaw! {
    /// Keeps fair shares by limit key where an item has one, so a tenant spread over
    /// many limit keys gets a share per key (G18).
    FairSharesByLimitKey
}

tenure_core::forward_store! {
    impl Store for FairSharesByLimitKey {
        forward self => self.inner;

        async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
            for item in &mut params.items {
                if let Some(k) = &item.limit_key {
                    item.fairness_key = Some(FairnessKey::new(k.as_str())?);
                }
            }
            self.inner.enqueue(params).await
        }
    }
}
