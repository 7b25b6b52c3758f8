//! The flaws that break G6, stalls: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_max_stalls_fails_g06() {
    must_fail(
        broken::<IgnoresMaxStalls>(),
        "g06_stalls",
        "dead_after_max_stalls_with_a_stalled_error",
    )
    .await;
}

flaw! {
    /// Raises every item's stall cap out of reach (breaks G6).
    IgnoresMaxStalls { caps: Shared<HashMap<ItemId, u32>> }
}

impl IgnoresMaxStalls {
    fn hide(&self, item: &mut NewItem) -> Result<()> {
        if item.max_stalls <= MAX_ATTEMPTS_LIMIT {
            lock(&self.caps).insert(item.id, item.max_stalls);
            item.max_stalls = MAX_ATTEMPTS_LIMIT;
        }
        Ok(())
    }

    fn show(&self, item: &mut Item) {
        if let Some(&n) = lock(&self.caps).get(&item.id) {
            item.max_stalls = n;
        }
    }
}

hidden_on_enqueue!(IgnoresMaxStalls);
