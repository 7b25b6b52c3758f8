//! The flaws that break G10, scope: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_scope_fails_g10() {
    must_fail(
        broken::<IgnoresScope>(),
        "g10_scope",
        "a_busy_scope_is_passed_over_for_the_next_eligible_item",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keying_scopes_by_queue_fails_g10_across_queues() {
    must_fail(
        broken::<ScopesPerQueue>(),
        "g10_scope",
        "a_busy_scope_is_passed_over_in_every_queue",
    )
    .await;
}

flaw! {
    /// Drops the scope key on enqueue, showing it again on reads (breaks G10).
    IgnoresScope { scopes: Shared<HashMap<ItemId, ScopeKey>> }
}

impl IgnoresScope {
    fn hide(&self, item: &mut NewItem) -> Result<()> {
        if let Some(s) = item.scope.take() {
            lock(&self.scopes).insert(item.id, s);
        }
        Ok(())
    }

    fn show(&self, item: &mut Item) {
        if let Some(s) = lock(&self.scopes).get(&item.id) {
            item.scope = Some(s.clone());
        }
    }
}

hidden_on_enqueue!(IgnoresScope);

flaw! {
    /// Keys scopes by queue and scope, so a busy scope is free in other queues (G10).
    ScopesPerQueue { scopes: Shared<HashMap<ItemId, ScopeKey>> }
}

impl ScopesPerQueue {
    fn hide(&self, item: &mut NewItem) -> Result<()> {
        if let Some(s) = item.scope.take() {
            item.scope = Some(ScopeKey::new(format!("{}/{s}", item.queue))?);
            lock(&self.scopes).insert(item.id, s);
        }
        Ok(())
    }

    fn show(&self, item: &mut Item) {
        if let Some(s) = lock(&self.scopes).get(&item.id) {
            item.scope = Some(s.clone());
        }
    }
}

hidden_on_enqueue!(ScopesPerQueue);
