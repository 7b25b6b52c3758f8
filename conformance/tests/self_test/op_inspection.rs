//! The flaws that break the operator's inspection: each broken store must fail the cases named with it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_the_cursor_fails_op_inspection() {
    must_fail(
        broken::<ListingIgnoresTheCursor>(),
        "op_inspection",
        "pages_show_every_item_once_in_enqueue_order_either_way",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_scheduled_items_as_ready_fails_op_inspection() {
    must_fail(
        broken::<ListsScheduledAsReady>(),
        "op_inspection",
        "listings_split_items_by_state_and_carry_attempt_owner_expiry_and_error",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_without_pause_or_age_fail_op_inspection() {
    must_fail(
        broken::<CountsWithoutPauseOrAge>(),
        "op_inspection",
        "queue_counts_report_the_oldest_due_wait_and_the_pause",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measuring_the_oldest_wait_from_the_enqueue_fails_op_inspection_alone() {
    must_fail_only(
        broken::<OldestAgeFromEnqueue>(),
        "op_inspection",
        "the_oldest_due_wait_of_a_delayed_or_retried_item_counts_from_its_run_at",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_queues_by_name_prefix_fails_op_inspection_alone() {
    must_fail_only(
        broken::<ListsQueuesByNamePrefix>(),
        "op_inspection",
        "a_queue_shows_nothing_of_the_queues_whose_names_it_begins",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hiding_expired_unrecovered_leases_fails_op_inspection_alone() {
    must_fail_only(
        broken::<LeaseListHidesExpired>(),
        "op_inspection",
        "lease_list_shows_an_expired_lease_until_it_is_recovered",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_list_missing_scheduled_and_running_queues_fails_op_inspection_alone() {
    must_fail_only(
        broken::<QueueListSkipsScheduledAndRunningQueues>(),
        "op_inspection",
        "queue_list_names_a_queue_whose_only_items_are_scheduled_running_or_kept_done",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_cursor_holding_only_the_expiry_fails_op_inspection_alone() {
    must_fail_only(
        broken::<LeaseCursorByExpiryOnly>(),
        "op_inspection",
        "lease_pages_show_leases_of_one_expiry_each_once",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_a_due_delayed_item_as_scheduled_fails_op_inspection_alone() {
    must_fail_only(
        broken::<ListsDelayedItemsAsScheduledOnceDue>(),
        "op_inspection",
        "a_delayed_item_is_listed_ready_from_the_instant_it_is_due",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_without_kept_finished_items_fail_op_inspection_alone() {
    must_fail_only(
        broken::<CountsNoFinishedItems>(),
        "op_inspection",
        "queue_counts_count_kept_finished_items_as_done",
    )
    .await;
}

flaw! {
    /// Lists from the start whatever cursor it is given (breaks paging).
    ListingIgnoresTheCursor
}

tenure_core::forward_store! {
    impl Store for ListingIgnoresTheCursor {
        forward self => self.inner;

        async fn item_list(&self, mut params: ItemListParams) -> Result<ItemPage> {
            params.cursor = None;
            self.inner.item_list(params).await
        }
    }
}

flaw! {
    /// Lists scheduled items with the ready ones (breaks the split by state).
    ListsScheduledAsReady
}

tenure_core::forward_store! {
    impl Store for ListsScheduledAsReady {
        forward self => self.inner;

        async fn item_list(&self, params: ItemListParams) -> Result<ItemPage> {
            if params.state != ListState::Ready {
                return self.inner.item_list(params).await;
            }
            let mut page = self.inner.item_list(params.clone()).await?;
            let later = self
                .inner
                .item_list(ItemListParams::new(params.queue, ListState::Scheduled))
                .await?;
            page.items.extend(later.items);
            Ok(page)
        }
    }
}

flaw! {
    /// Reports no pause flag and no oldest age in the counts.
    CountsWithoutPauseOrAge
}

tenure_core::forward_store! {
    impl Store for CountsWithoutPauseOrAge {
        forward self => self.inner;

        async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
            let c = self.inner.queue_counts(queue).await?;
            Ok(c.with_paused(false).with_oldest_ready_age(None))
        }
    }
}

flaw! {
    /// Measures the oldest due wait from the enqueue, not from `run_at`.
    OldestAgeFromEnqueue
}

tenure_core::forward_store! {
    impl Store for OldestAgeFromEnqueue {
        forward self => self.inner;

        async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
            let c = self.inner.queue_counts(queue).await?;
            let due = self
                .inner
                .item_list(ItemListParams::new(queue.clone(), ListState::Ready).limit(MAX_PAGE))
                .await?;
            let now = self.clock.now();
            let oldest = due.items.iter().map(|i| i.created_at).min();
            Ok(c.with_oldest_ready_age(oldest.map(|t| now.duration_since(t))))
        }
    }
}

flaw! {
    /// Lists a queue's items with those of every queue whose name begins with its name.
    ListsQueuesByNamePrefix
}

tenure_core::forward_store! {
    impl Store for ListsQueuesByNamePrefix {
        forward self => self.inner;

        async fn item_list(&self, params: ItemListParams) -> Result<ItemPage> {
            let mut page = self.inner.item_list(params.clone()).await?;
            for other in self.inner.queue_list().await? {
                if other != params.queue && other.as_str().starts_with(params.queue.as_str()) {
                    let more = self
                        .inner
                        .item_list(ItemListParams::new(other, params.state).order(params.order))
                        .await?;
                    page.items.extend(more.items);
                }
            }
            Ok(page)
        }
    }
}

flaw! {
    /// Leaves expired leases that nobody recovered out of the lease listing.
    LeaseListHidesExpired
}

tenure_core::forward_store! {
    impl Store for LeaseListHidesExpired {
        forward self => self.inner;

        async fn lease_list(&self, params: LeaseListParams) -> Result<LeasePage> {
            let mut page = self.inner.lease_list(params).await?;
            let as_of = page.as_of;
            page.leases.retain(|l| l.expires_at > as_of);
            Ok(page)
        }
    }
}

flaw! {
    /// Lists only the queues with a ready (due) or dead item, and the paused ones, as a
    /// store reading only its ready and dead indexes would: a queue whose items are all
    /// scheduled or running is missing.
    QueueListSkipsScheduledAndRunningQueues
}

tenure_core::forward_store! {
    impl Store for QueueListSkipsScheduledAndRunningQueues {
        forward self => self.inner;

        async fn queue_list(&self) -> Result<Vec<QueueName>> {
            let mut out = Vec::new();
            for q in self.inner.queue_list().await? {
                let c = self.inner.queue_counts(&q).await?;
                if c.ready > 0 || c.dead > 0 || c.paused {
                    out.push(q);
                }
            }
            Ok(out)
        }
    }
}

flaw! {
    /// Continues a lease listing strictly after the last expiry of the page, as a
    /// cursor holding the expiry alone would: leases sharing that expiry are skipped.
    LeaseCursorByExpiryOnly
}

tenure_core::forward_store! {
    impl Store for LeaseCursorByExpiryOnly {
        forward self => self.inner;

        async fn lease_list(&self, params: LeaseListParams) -> Result<LeasePage> {
            params.validate(&self.limits())?;
            let after = match &params.cursor {
                Some(c) => Some(
                    c.as_str()
                        .strip_prefix("x.")
                        .and_then(|s| s.parse::<i64>().ok())
                        .ok_or_else(|| Error::invalid("cursor", "not a cursor of this store"))?,
                ),
                None => None,
            };
            let all = self
                .inner
                .lease_list(LeaseListParams::new(params.queue).limit(MAX_PAGE))
                .await?;
            let mut leases: Vec<_> = all
                .leases
                .into_iter()
                .filter(|l| after.is_none_or(|a| l.expires_at.as_micros() > a))
                .collect();
            let more = leases.len() > params.limit as usize;
            leases.truncate(params.limit as usize);
            let next = match (more, leases.last()) {
                (true, Some(l)) => Some(Cursor::new(format!("x.{}", l.expires_at.as_micros()))?),
                _ => None,
            };
            Ok(LeasePage::new(leases, next, all.as_of))
        }
    }
}

flaw! {
    /// Keeps listing an item enqueued with a delay as scheduled once it is due, until a
    /// claim takes it, as a store listing scheduled items from a set that only a claim
    /// moves them out of would.
    ListsDelayedItemsAsScheduledOnceDue { delayed: Shared<HashSet<ItemId>> }
}

tenure_core::forward_store! {
    impl Store for ListsDelayedItemsAsScheduledOnceDue {
        forward self => self.inner;

        async fn enqueue(&self, params: EnqueueParams) -> Result<Vec<Enqueued>> {
            for item in &params.items {
                let later = match item.schedule {
                    Schedule::After(d) => d > Duration::ZERO,
                    Schedule::At(t) => t > self.clock.now(),
                    Schedule::Now => false,
                };
                if later {
                    lock(&self.delayed).insert(item.id);
                }
            }
            self.inner.enqueue(params).await
        }

        async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
            let leases = self.inner.claim(params).await?;
            let mut delayed = lock(&self.delayed);
            for l in &leases {
                delayed.remove(&l.token.id);
            }
            Ok(leases)
        }

        async fn item_list(&self, params: ItemListParams) -> Result<ItemPage> {
            match params.state {
                ListState::Ready => {
                    let mut page = self.inner.item_list(params).await?;
                    let delayed = lock(&self.delayed).clone();
                    page.items.retain(|i| !delayed.contains(&i.id));
                    Ok(page)
                }
                ListState::Scheduled => {
                    let mut page = self.inner.item_list(params.clone()).await?;
                    let due = self
                        .inner
                        .item_list(
                            ItemListParams::new(params.queue, ListState::Ready).limit(MAX_PAGE),
                        )
                        .await?;
                    let delayed = lock(&self.delayed).clone();
                    page.items
                        .extend(due.items.into_iter().filter(|i| delayed.contains(&i.id)));
                    Ok(page)
                }
                _ => self.inner.item_list(params).await,
            }
        }
    }
}

flaw! {
    /// Counts no finished items, though it keeps them as `done`.
    CountsNoFinishedItems; keep_done
}

tenure_core::forward_store! {
    impl Store for CountsNoFinishedItems {
        forward self => self.inner;

        async fn queue_counts(&self, queue: &QueueName) -> Result<QueueCounts> {
            let mut c = self.inner.queue_counts(queue).await?;
            c.done = 0;
            Ok(c)
        }
    }
}
