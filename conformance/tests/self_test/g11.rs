//! The flaws that break G11, dedup: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_dedup_keys_fails_g11() {
    must_fail(
        broken::<IgnoresDedupKeys>(),
        "g11_dedup",
        "a_second_enqueue_within_the_window_is_a_duplicate_of_the_first",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discard_forgetting_dedup_keys_fails_g11_alone() {
    must_fail_only(
        broken::<DiscardForgetsDedupKeys>(),
        "g11_dedup",
        "a_discarded_dead_item_still_dedups_within_the_window",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_ignoring_keep_done_for_fails_g11_alone() {
    must_fail_only(
        broken::<PurgeIgnoresKeepDoneFor>(),
        "g11_dedup",
        "purge_keeps_finished_items_younger_than_keep_done_for_and_counts_those_it_deletes",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dedup_key_owned_by_the_last_queue_fails_g11_across_queues() {
    must_fail(
        broken::<DedupKeyOwnedByLastQueue>(),
        "g11_dedup",
        "each_queue_answers_its_own_earlier_item_for_a_shared_dedup_key",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_the_purge_limit_fails_g11() {
    must_fail(
        broken::<IgnoresPurgeLimit>(),
        "g11_dedup",
        "a_purge_pass_forgets_exactly_its_limit_of_expired_keys",
    )
    .await;
}

flaw! {
    /// Drops dedup keys on enqueue (breaks G11).
    IgnoresDedupKeys
}

tenure_core::forward_store! {
    impl Store for IgnoresDedupKeys {
        forward self => self.inner;

        async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
            for item in &mut params.items {
                item.dedup_key = None;
            }
            self.inner.enqueue(params).await
        }
    }
}

flaw! {
    /// Purges every expired key in one pass, whatever the limit (G11).
    IgnoresPurgeLimit
}

tenure_core::forward_store! {
    impl Store for IgnoresPurgeLimit {
        forward self => self.inner;

        async fn purge(&self, mut params: PurgeParams) -> Result<Purged> {
            params.limit = 1_000;
            self.inner.purge(params).await
        }
    }
}

flaw! {
    /// Purges every kept finished item, whatever its age (on a store keeping them).
    PurgeIgnoresKeepDoneFor; keep_done
}

tenure_core::forward_store! {
    impl Store for PurgeIgnoresKeepDoneFor {
        forward self => self.inner;

        async fn purge(&self, mut params: PurgeParams) -> Result<Purged> {
            params.keep_done_for = Duration::ZERO;
            self.inner.purge(params).await
        }
    }
}

flaw! {
    /// Records a dedup key for the last queue that used it, forgetting the other
    /// queue's item (G11 across queues).
    DedupKeyOwnedByLastQueue {
        keys: Shared<HashMap<ItemId, DedupKey>>,
        owners: Shared<HashMap<String, (QueueName, u32)>>,
    }
}

impl DedupKeyOwnedByLastQueue {
    fn hide(&self, item: &mut NewItem) -> Result<()> {
        if let Some(k) = item.dedup_key.take() {
            let mut owners = lock(&self.owners);
            let owner = owners
                .entry(k.to_string())
                .or_insert((item.queue.clone(), 0));
            if owner.0 != item.queue {
                *owner = (item.queue.clone(), owner.1 + 1);
            }
            item.dedup_key = Some(DedupKey::new(format!("{k}#{}", owner.1))?);
            lock(&self.keys).insert(item.id, k);
        }
        Ok(())
    }

    fn show(&self, item: &mut Item) {
        if let Some(k) = lock(&self.keys).get(&item.id) {
            item.dedup_key = Some(k.clone());
        }
    }
}

hidden_on_enqueue!(DedupKeyOwnedByLastQueue);

flaw! {
    /// Forgets the dedup keys of discarded dead items, as a store deleting an item's
    /// key with it would (G11).
    DiscardForgetsDedupKeys {
        keys: Shared<HashMap<ItemId, DedupKey>>,
        forgotten: Shared<HashMap<(QueueName, String), u32>>,
    }
}

impl DiscardForgetsDedupKeys {
    /// Gives the memory store the key renamed by how often it was forgotten.
    fn hide(&self, item: &mut NewItem) -> Result<()> {
        if let Some(k) = item.dedup_key.take() {
            let times = lock(&self.forgotten)
                .get(&(item.queue.clone(), k.to_string()))
                .copied()
                .unwrap_or(0);
            item.dedup_key = Some(if times == 0 {
                k.clone()
            } else {
                DedupKey::new(format!("{k}#{times}"))?
            });
            lock(&self.keys).insert(item.id, k);
        }
        Ok(())
    }

    fn show(&self, item: &mut Item) {
        if let Some(k) = lock(&self.keys).get(&item.id) {
            item.dedup_key = Some(k.clone());
        }
    }

    /// The dead items a discard may delete, read before it.
    async fn candidates(&self, params: &DiscardParams) -> Result<Vec<Item>> {
        if let Some(f) = &params.filter {
            let listed = ItemListParams::new(f.queue.clone(), ListState::Dead).limit(MAX_PAGE);
            return Ok(self.inner.item_list(listed).await?.items);
        }
        let mut out = Vec::new();
        for &id in &params.ids {
            out.extend(self.inner.item_get(id).await?);
        }
        Ok(out)
    }
}

tenure_core::forward_store! {
    impl Store for DiscardForgetsDedupKeys {
        forward self => self.inner;

        async fn enqueue(&self, mut params: EnqueueParams) -> Result<Vec<Enqueued>> {
            for item in &mut params.items {
                self.hide(item)?;
            }
            self.inner.enqueue(params).await
        }

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            let mut leases = self.inner.claim(params).await?;
            for lease in &mut leases {
                self.show(&mut lease.item);
            }
            Ok(leases)
        }

        async fn item_get(&self, id: ItemId) -> Result<Option<Item>> {
            let mut item = self.inner.item_get(id).await?;
            if let Some(item) = &mut item {
                self.show(item);
            }
            Ok(item)
        }

        async fn dead_discard(&self, params: DiscardParams) -> Result<u64> {
            let candidates = self.candidates(&params).await?;
            let n = self.inner.dead_discard(params).await?;
            for it in candidates {
                if self.inner.item_get(it.id).await?.is_some() {
                    continue;
                }
                let key = lock(&self.keys).get(&it.id).cloned();
                if let Some(k) = key {
                    *lock(&self.forgotten)
                        .entry((it.queue.clone(), k.to_string()))
                        .or_default() += 1;
                }
            }
            Ok(n)
        }
    }
}
