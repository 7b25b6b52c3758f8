//! The flaws that break the operator's control by leaving a stream stuck behind an item
//! taken out of it: each broken store must fail the case named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_discard_leaving_the_stream_blocked_fails_op_control_alone() {
    must_fail_only(
        broken::<FilteredDiscardLeavesTheStreamBlocked>(),
        "op_control",
        "a_dead_head_discarded_or_requeued_by_filter_lets_its_stream_move_on",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_leaving_a_hole_in_its_stream_fails_op_control_alone() {
    must_fail_only(
        broken::<CancelLeavesAHoleInItsStream>(),
        "op_control",
        "cancelling_an_item_behind_its_stream_head_leaves_the_rest_of_the_stream_in_order",
    )
    .await;
}

/// Every stream's items in enqueue order, and the items a claim never takes because
/// their stream is stuck behind an item that left it.
#[derive(Clone, Debug, Default)]
struct Stuck {
    order: Shared<HashMap<StreamKey, Vec<ItemId>>>,
    held_back: Shared<HashSet<ItemId>>,
}

impl Stuck {
    /// Notes the stream order of the items enqueued.
    fn enqueued(&self, params: &EnqueueParams) {
        let mut order = lock(&self.order);
        for item in &params.items {
            if let Some(s) = &item.stream {
                order.entry(s.clone()).or_default().push(item.id);
            }
        }
    }

    /// The items of `stream` enqueued after `id` are never claimed again.
    fn hold_back_behind(&self, stream: &StreamKey, id: ItemId) {
        let later: Vec<ItemId> = lock(&self.order)
            .get(stream)
            .map(|order| {
                order
                    .iter()
                    .skip_while(|&&i| i != id)
                    .skip(1)
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        lock(&self.held_back).extend(later);
    }

    /// A claim that puts back the items held back.
    async fn claim(&self, inner: &MemoryStore, params: ClaimParams) -> Result<Vec<Lease>> {
        let mut leases = inner.claim(params).await?;
        let held: Vec<LeaseToken> = {
            let held_back = lock(&self.held_back);
            leases
                .iter()
                .filter(|l| held_back.contains(&l.token.id))
                .map(|l| l.token)
                .collect()
        };
        if !held.is_empty() {
            inner.release(ReleaseParams::new(held.clone())).await?;
            leases.retain(|l| !held.contains(&l.token));
        }
        Ok(leases)
    }
}

flaw! {
    /// Discards dead items by filter without letting their streams move on, as a
    /// store deleting the matching rows without promoting the next head would.
    FilteredDiscardLeavesTheStreamBlocked { stuck: Stuck }
}

tenure_core::forward_store! {
    impl Store for FilteredDiscardLeavesTheStreamBlocked {
        forward self => self.inner;

        async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
            self.stuck.enqueued(&params);
            self.inner.enqueue(params).await
        }

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            self.stuck.claim(&self.inner, params).await
        }

        async fn dead_discard(&self, params: DiscardParams) -> Result<u64> {
            let Some(f) = &params.filter else {
                return self.inner.dead_discard(params).await;
            };
            let listed = ItemListParams::new(f.queue.clone(), ListState::Dead).limit(MAX_PAGE);
            let dead = self.inner.item_list(listed).await?.items;
            let n = self.inner.dead_discard(params).await?;
            for it in dead {
                if let Some(s) = &it.stream {
                    if self.inner.item_get(it.id).await?.is_none() {
                        self.stuck.hold_back_behind(s, it.id);
                    }
                }
            }
            Ok(n)
        }
    }
}

flaw! {
    /// Cancels an item behind its stream's head without taking it out of the stream,
    /// so the stream stops where it was.
    CancelLeavesAHoleInItsStream { stuck: Stuck }
}

impl CancelLeavesAHoleInItsStream {
    /// The stream of `id` when it is behind an unfinished earlier item of its stream.
    async fn behind_its_head(&self, id: ItemId) -> Result<Option<StreamKey>> {
        let Some(s) = self.inner.item_get(id).await?.and_then(|it| it.stream) else {
            return Ok(None);
        };
        let order = lock(&self.stuck.order).get(&s).cloned().unwrap_or_default();
        for &e in order.iter().take_while(|&&e| e != id) {
            if self
                .inner
                .item_get(e)
                .await?
                .is_some_and(|i| i.state != ItemState::Done)
            {
                return Ok(Some(s));
            }
        }
        Ok(None)
    }
}

tenure_core::forward_store! {
    impl Store for CancelLeavesAHoleInItsStream {
        forward self => self.inner;

        async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
            self.stuck.enqueued(&params);
            self.inner.enqueue(params).await
        }

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            self.stuck.claim(&self.inner, params).await
        }

        async fn item_cancel(&self, params: CancelParams) -> Result<Vec<CancelOutcome>> {
            let mut behind = Vec::new();
            for &id in &params.ids {
                behind.push(self.behind_its_head(id).await?);
            }
            let out = self.inner.item_cancel(params.clone()).await?;
            for ((o, s), &id) in out.iter().zip(behind).zip(&params.ids) {
                if let (CancelOutcome::Cancelled, Some(s)) = (o, s) {
                    self.stuck.hold_back_behind(&s, id);
                }
            }
            Ok(out)
        }
    }
}
