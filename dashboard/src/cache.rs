//! The one cache per router: the overview's counts, instances and leader, and the
//! listing pages (a queue's items, the leases), each read from the store at most once
//! per TTL however many requests ask, and never more than [`COUNT_BUDGET`] of the
//! time: a read that took 200 ms is reused for at least 10 s. Counting a queue is a
//! scan of its rows, and listing the due items of a queue behind a large scheduled
//! backlog walks past that backlog; tabs that poll must not repeat either.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tenure_core::HistoryPoint;
use tenure_core::{
    Instance, ItemPage, LeaderName, LeasePage, OwnerId, QueueCounts, QueueName, Store, Timestamp,
};
use tokio::sync::Mutex;
use tokio::time::Instant;

/// The most of the wall time the cache spends reading counts: a read that took `d`
/// is reused for at least `d / COUNT_BUDGET` (50 d).
pub(crate) const COUNT_BUDGET: f64 = 0.02;

/// How long a snapshot whose read took `took` is reused: the TTL, or longer when the
/// read was slow, so reads take at most [`COUNT_BUDGET`] of the time.
fn reuse_for(ttl: Duration, took: Duration) -> Duration {
    ttl.max(took.div_f64(COUNT_BUDGET))
}

/// Who holds the leader lease, as read without side effects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LeaderView {
    /// Held by `holder` with `term` until `expires_at`.
    Held {
        holder: OwnerId,
        term: u64,
        expires_at: Timestamp,
    },
    /// Nobody holds it (or the last lease expired).
    Free,
}

/// What the overview shows, as read at `as_of`.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) queues: Vec<(QueueName, QueueCounts)>,
    pub(crate) instances: Vec<Instance>,
    pub(crate) leader: LeaderView,
    pub(crate) as_of: Timestamp,
    read_at: Instant,
}

impl Snapshot {
    /// The counts of `queue`, when the store knows it.
    pub(crate) fn counts(&self, queue: &QueueName) -> Option<&QueueCounts> {
        self.queues.iter().find(|(q, _)| q == queue).map(|(_, c)| c)
    }

    /// How long ago the store was read.
    pub(crate) fn age(&self) -> Duration {
        self.read_at.elapsed()
    }
}

/// Listing pages kept at most, per kind; past it, the expired ones are dropped (and
/// all of them if none has expired).
const MAX_PAGES: usize = 256;

/// A page as read, when, and for how long it is reused.
type Pages<T> = Mutex<HashMap<String, (Instant, Duration, T)>>;

/// A snapshot and listing pages reused for `ttl` (or longer, see [`COUNT_BUDGET`]); one
/// read of each at a time while the others wait for it.
pub(crate) struct CountsCache {
    ttl: Duration,
    /// The overview's snapshot, under the one key `""`.
    snapshot: Pages<Arc<Snapshot>>,
    items: Pages<ItemPage>,
    leases: Pages<LeasePage>,
    /// Queues' history over a span, by queue, span and first minute.
    history: Pages<Vec<HistoryPoint>>,
}

impl CountsCache {
    pub(crate) fn new(ttl: Duration) -> Self {
        CountsCache {
            ttl,
            snapshot: Mutex::default(),
            items: Mutex::default(),
            leases: Mutex::default(),
            history: Mutex::default(),
        }
    }

    /// The item page `key` names (its queue, state, order and cursor), as `read`
    /// answers it, shared by every request within its reuse period.
    pub(crate) async fn item_page(
        &self,
        key: String,
        read: impl Future<Output = tenure_core::Result<ItemPage>>,
    ) -> tenure_core::Result<ItemPage> {
        shared(&self.items, self.ttl, key, read).await
    }

    /// The lease page `key` names (its queue, cursor and size), as `read` answers it,
    /// shared like [`CountsCache::item_page`].
    pub(crate) async fn lease_page(
        &self,
        key: String,
        read: impl Future<Output = tenure_core::Result<LeasePage>>,
    ) -> tenure_core::Result<LeasePage> {
        shared(&self.leases, self.ttl, key, read).await
    }

    /// A queue's history over the span `key` names, as `read` answers it, shared like
    /// [`CountsCache::item_page`]. An action does not clear it: it changes no history.
    pub(crate) async fn history(
        &self,
        key: String,
        read: impl Future<Output = tenure_core::Result<Vec<HistoryPoint>>>,
    ) -> tenure_core::Result<Vec<HistoryPoint>> {
        shared(&self.history, self.ttl, key, read).await
    }

    /// The cached snapshot, or a fresh one when it is older than the TTL. Requests that
    /// arrive during a refresh wait for it and share its answer.
    pub(crate) async fn get(
        &self,
        store: &dyn Store,
        leader: &str,
        now: Timestamp,
    ) -> tenure_core::Result<Arc<Snapshot>> {
        let read = async { read(store, leader, now).await.map(Arc::new) };
        shared(&self.snapshot, self.ttl, String::new(), read).await
    }

    /// Forgets the snapshot and the pages, so the next request reads the store (after
    /// an action).
    pub(crate) async fn invalidate(&self) {
        self.snapshot.lock().await.clear();
        self.items.lock().await.clear();
        self.leases.lock().await.clear();
    }
}

/// The page `key` from `pages` while it is fresh, else `read` (once, the other
/// requests waiting for it) and kept for [`reuse_for`] of the time it took.
async fn shared<T: Clone>(
    pages: &Pages<T>,
    ttl: Duration,
    key: String,
    read: impl Future<Output = tenure_core::Result<T>>,
) -> tenure_core::Result<T> {
    let mut pages = pages.lock().await;
    if let Some((at, keep, page)) = pages.get(&key) {
        if at.elapsed() < *keep {
            return Ok(page.clone());
        }
    }
    let started = Instant::now();
    let page = read.await?;
    if pages.len() >= MAX_PAGES {
        pages.retain(|_, (at, keep, _)| at.elapsed() < *keep);
        if pages.len() >= MAX_PAGES {
            pages.clear();
        }
    }
    pages.insert(
        key,
        (started, reuse_for(ttl, started.elapsed()), page.clone()),
    );
    Ok(page)
}

async fn read(store: &dyn Store, leader: &str, now: Timestamp) -> tenure_core::Result<Snapshot> {
    let names = store.queue_list().await?;
    let mut queues = Vec::with_capacity(names.len());
    for q in names {
        let counts = store.queue_counts(&q).await?;
        queues.push((q, counts));
    }
    let instances = store.instance_list().await?;
    let leader = read_leader(store, leader).await?;
    Ok(Snapshot {
        queues,
        instances,
        leader,
        as_of: now,
        read_at: Instant::now(),
    })
}

/// The leader, read without taking it (`Store::leader_get` writes nothing, so polling
/// it never raises the term).
async fn read_leader(store: &dyn Store, name: &str) -> tenure_core::Result<LeaderView> {
    let name = LeaderName::new(name)?;
    Ok(match store.leader_get(&name).await? {
        Some(info) => LeaderView::Held {
            holder: info.holder,
            term: info.term,
            expires_at: info.expires_at,
        },
        None => LeaderView::Free,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_count_is_reused_long_enough_to_stay_within_the_budget() {
        let ttl = Duration::from_secs(2);
        // Fast reads: the TTL the user chose.
        assert_eq!(reuse_for(ttl, Duration::from_millis(5)), ttl);
        // A 200 ms count over a large backlog: 10 s, so 2% of the time.
        assert_eq!(
            reuse_for(ttl, Duration::from_millis(200)),
            Duration::from_secs(10)
        );
        let took = Duration::from_millis(730);
        let share = took.as_secs_f64() / reuse_for(ttl, took).as_secs_f64();
        assert!(share <= COUNT_BUDGET + 1e-9, "{share}");
    }
}
