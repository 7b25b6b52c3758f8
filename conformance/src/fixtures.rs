//! Item builders and one-call wrappers that check the shape of every answer.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tenure_core::{
    ClaimParams, CompleteParams, DedupKey, EnqueueParams, Enqueued, FailOutcome, FailParams,
    Failure as AttemptFailure, ItemId, ItemListParams, ItemState, LeaderName, Lease, LeaseToken,
    ListState, NewItem, OwnerId, QueueCounts, QueueName, ReleaseParams, RenewOutcome, RenewParams,
    ScopeKey, Store, StreamKey, Timestamp, TokenOutcome,
};
use tokio::sync::Barrier;
use tokio::task::JoinSet;

use crate::case::Failure;
use crate::check::{ensure, ensure_eq, expect_counts, OrFail};

/// Where every case's clock starts (2023-11-14, a fixed instant so runs repeat).
pub(crate) const START: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);
/// The lease most cases claim with.
pub(crate) const LEASE: Duration = Duration::from_secs(30);
/// The smallest step of the clock.
pub(crate) const TICK: Duration = Duration::from_micros(1);
/// How many handles (the case's store plus peers) race cases spread their tasks over.
pub(crate) const HANDLES: usize = 4;
/// How many tasks most race cases start.
pub(crate) const RACERS: usize = 16;

fn key<T>(made: tenure_core::Result<T>, what: &str) -> Result<T, Failure> {
    made.or_fail(what)
}

/// A queue name.
pub(crate) fn queue(name: &str) -> Result<QueueName, Failure> {
    key(QueueName::new(name), "QueueName::new")
}

/// An owner id.
pub(crate) fn owner(name: &str) -> Result<OwnerId, Failure> {
    key(OwnerId::new(name), "OwnerId::new")
}

/// A stream key.
pub(crate) fn stream(name: &str) -> Result<StreamKey, Failure> {
    key(StreamKey::new(name), "StreamKey::new")
}

/// A scope key.
pub(crate) fn limit_key(name: &str) -> Result<tenure_core::LimitKey, Failure> {
    key(tenure_core::LimitKey::new(name), "a limit key")
}

/// Sets `queue`'s limits, which must succeed.
pub(crate) async fn set_limits<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
    limits: tenure_core::QueueLimits,
) -> Result<(), Failure> {
    store
        .limits_set(tenure_core::LimitsParams::new(queue.clone(), limits))
        .await
        .or_fail("limits_set")?;
    Ok(())
}

pub(crate) fn scope(name: &str) -> Result<ScopeKey, Failure> {
    key(ScopeKey::new(name), "ScopeKey::new")
}

/// A dedup key.
pub(crate) fn dedup(name: &str) -> Result<DedupKey, Failure> {
    key(DedupKey::new(name), "DedupKey::new")
}

/// A leader lease name.
pub(crate) fn leader(name: &str) -> Result<LeaderName, Failure> {
    key(LeaderName::new(name), "LeaderName::new")
}

/// A ready item with a small payload and every default.
pub(crate) fn item(queue: &QueueName) -> NewItem {
    NewItem::new(queue.clone(), b"conformance".to_vec())
}

/// Queue counts built positionally, for [`crate::check::expect_counts`].
pub(crate) fn counts(
    ready: u64,
    scheduled: u64,
    running: u64,
    dead: u64,
    done: u64,
) -> QueueCounts {
    QueueCounts::new(ready, scheduled, running, dead, done)
}

/// Enqueues new items (none a duplicate) and returns their ids, in order.
pub(crate) async fn enqueue<S: Store + ?Sized>(
    store: &S,
    items: Vec<NewItem>,
) -> Result<Vec<ItemId>, Failure> {
    let ids: Vec<ItemId> = items.iter().map(|i| i.id).collect();
    let answers = store
        .enqueue(EnqueueParams::new(items))
        .await
        .or_fail("enqueue")?;
    let expected: Vec<Enqueued> = ids
        .iter()
        .map(|&id| Enqueued {
            id,
            duplicate: false,
        })
        .collect();
    ensure(
        answers == expected,
        format!(
            "enqueue of {} new items to answer each new id, in order",
            ids.len()
        ),
        answers,
    )?;
    Ok(ids)
}

/// Enqueues one new item and returns its id.
pub(crate) async fn enqueue_one<S: Store + ?Sized>(
    store: &S,
    item: NewItem,
) -> Result<ItemId, Failure> {
    let ids = enqueue(store, vec![item]).await?;
    Ok(ids[0])
}

/// Enqueues `n` default items of `queue` in one call.
pub(crate) async fn enqueue_n<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
    n: usize,
) -> Result<Vec<ItemId>, Failure> {
    enqueue(store, (0..n).map(|_| item(queue)).collect()).await
}

/// Each keyed item's (key, position within its key) in a keyed race.
pub(crate) type KeyPositions = HashMap<ItemId, (usize, usize)>;

/// Items for a keyed race: `per_key` rounds, each one item for every one of `keys`
/// keys (`key` gives item and key number its stream or scope) then `loose` unkeyed
/// items; with each keyed item's (key, position), as [`drain_keyed`] takes them.
pub(crate) fn keyed_items(
    queue: &QueueName,
    keys: usize,
    per_key: usize,
    loose: usize,
    key: impl Fn(NewItem, usize) -> Result<NewItem, Failure>,
) -> Result<(Vec<NewItem>, KeyPositions), Failure> {
    let mut items = Vec::new();
    let mut positions = HashMap::new();
    for pos in 0..per_key {
        for k in 0..keys {
            let it = key(item(queue), k)?;
            positions.insert(it.id, (k, pos));
            items.push(it);
        }
        items.extend((0..loose).map(|_| item(queue)));
    }
    Ok((items, positions))
}

/// Checks that the leases a claim answered are well formed: at most `limit`, no item
/// twice in one answer (G1), each running for `owner` with a token matching its item.
pub(crate) fn check_leases(leases: &[Lease], owner: &OwnerId, limit: u32) -> Result<(), Failure> {
    ensure(
        leases.len() <= limit as usize,
        format!("a claim with limit {limit} to answer at most {limit} leases"),
        leases.len(),
    )?;
    let mut seen = HashSet::new();
    for lease in leases {
        ensure(
            seen.insert(lease.token.id),
            "one claim answer never to hold an item twice",
            lease.token,
        )?;
        let item = &lease.item;
        let consistent = item.state == ItemState::Running
            && lease.token == item.token()
            && &lease.owner == owner
            && item.owner.as_ref() == Some(owner)
            && item.lease_expires_at == Some(lease.expires_at);
        ensure(
            consistent,
            format!("a lease for {owner} to show its item running for {owner} with the lease's token and expiry"),
            lease,
        )?;
    }
    Ok(())
}

/// Claims up to `limit` items of `queue` for `owner`, leased for `lease_for`.
pub(crate) async fn claim_for<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
    owner: &OwnerId,
    limit: u32,
    lease_for: Duration,
) -> Result<Vec<Lease>, Failure> {
    let leases = store
        .claim(ClaimParams::new(
            queue.clone(),
            owner.clone(),
            limit,
            lease_for,
        ))
        .await
        .or_fail("claim")?;
    check_leases(&leases, owner, limit)?;
    Ok(leases)
}

/// Claims up to `limit` items of `queue` for `owner` with the default [`LEASE`].
pub(crate) async fn claim<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
    owner: &OwnerId,
    limit: u32,
) -> Result<Vec<Lease>, Failure> {
    claim_for(store, queue, owner, limit, LEASE).await
}

/// Claims exactly one item; `what` says which claim this is, for the failure message.
pub(crate) async fn claim_one<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
    owner: &OwnerId,
    what: &str,
) -> Result<Lease, Failure> {
    let mut leases = claim(store, queue, owner, 1).await?;
    match leases.pop() {
        Some(lease) => Ok(lease),
        None => Err(Failure::new(
            format!("{what} to claim an item"),
            "an empty claim",
        )),
    }
}

/// A claim must find nothing; `why` says why nothing is claimable.
pub(crate) async fn claim_none<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
    owner: &OwnerId,
    why: &str,
) -> Result<(), Failure> {
    let leases = claim(store, queue, owner, 10).await?;
    let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
    ensure(
        leases.is_empty(),
        format!("a claim to find nothing: {why}"),
        tokens,
    )
}

fn single<T: std::fmt::Debug>(mut answers: Vec<T>, call: &str) -> Result<T, Failure> {
    if answers.len() == 1 {
        if let Some(a) = answers.pop() {
            return Ok(a);
        }
    }
    Err(Failure::new(
        format!("`{call}` of one token to answer exactly once"),
        format!("{answers:?}"),
    ))
}

/// Completes one token and returns the store's answer.
pub(crate) async fn complete<S: Store + ?Sized>(
    store: &S,
    token: LeaseToken,
) -> Result<TokenOutcome, Failure> {
    let answers = store
        .complete(CompleteParams::new(vec![token]))
        .await
        .or_fail("complete")?;
    single(answers, "complete")
}

/// Releases one token and returns the store's answer.
pub(crate) async fn release<S: Store + ?Sized>(
    store: &S,
    token: LeaseToken,
) -> Result<TokenOutcome, Failure> {
    let answers = store
        .release(ReleaseParams::new(vec![token]))
        .await
        .or_fail("release")?;
    single(answers, "release")
}

/// Renews one token for `lease_for` and returns the store's answer.
pub(crate) async fn renew<S: Store + ?Sized>(
    store: &S,
    token: LeaseToken,
    lease_for: Duration,
) -> Result<RenewOutcome, Failure> {
    let answers = store
        .renew(RenewParams::new(vec![token], lease_for))
        .await
        .or_fail("renew")?;
    single(answers, "renew")
}

/// Records one failure and returns the store's answer.
pub(crate) async fn fail<S: Store + ?Sized>(
    store: &S,
    failure: AttemptFailure,
) -> Result<FailOutcome, Failure> {
    let answers = store.fail(FailParams::one(failure)).await.or_fail("fail")?;
    single(answers, "fail")
}

/// A retryable failure of `token`, due again after `delay`.
pub(crate) fn retry(token: LeaseToken, delay: Duration, error: &str) -> AttemptFailure {
    AttemptFailure::retry_after(token, delay, error)
}

/// A permanent failure of `token`.
pub(crate) fn permanent(token: LeaseToken, error: &str) -> AttemptFailure {
    AttemptFailure::permanent(token, error)
}

/// Claims the one ready item of `queue` and fails it permanently, so it is dead.
pub(crate) async fn kill_next<S: Store + ?Sized>(
    store: &S,
    queue: &QueueName,
    owner: &OwnerId,
) -> Result<LeaseToken, Failure> {
    let lease = claim_one(store, queue, owner, "the claim of the item to kill").await?;
    let outcome = fail(store, permanent(lease.token, "permanent")).await?;
    ensure(
        outcome == FailOutcome::Dead,
        "a permanent failure to answer Dead",
        outcome,
    )?;
    Ok(lease.token)
}

/// Starts `racers` tasks spread over `handles`; all wait on one barrier, then run
/// `task(index, handle)` at once. Returns each racer's result by index; a racer that
/// panicked is a failure. Tasks still running when this returns early are aborted.
pub(crate) async fn race<S, T, F, Fut>(
    handles: &[Arc<S>],
    racers: usize,
    task: F,
) -> Result<Vec<T>, Failure>
where
    S: Store,
    T: Send + 'static,
    F: Fn(usize, Arc<S>) -> Fut,
    Fut: Future<Output = Result<T, Failure>> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(racers));
    let mut set = JoinSet::new();
    for i in 0..racers {
        let handle = Arc::clone(&handles[i % handles.len()]);
        let work = task(i, handle);
        let barrier = Arc::clone(&barrier);
        set.spawn(async move {
            barrier.wait().await;
            (i, work.await)
        });
    }
    let mut results: Vec<Option<T>> = (0..racers).map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        let (i, result) = joined
            .map_err(|e| Failure::new("every racer to finish without a panic", format!("{e}")))?;
        results[i] = Some(result?);
    }
    Ok(results.into_iter().flatten().collect())
}

/// Calls `call` until it answers something other than [`Error::Unavailable`]
/// (contention under a race is allowed to be retried), at most 200 times.
///
/// [`Error::Unavailable`]: tenure_core::Error::Unavailable
pub(crate) async fn retrying<T, F, Fut>(what: &str, mut call: F) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = tenure_core::Result<T>>,
{
    let mut tries = 0;
    loop {
        match call().await {
            Err(e) if e.is_retryable() && tries < 200 => {
                tries += 1;
                tokio::task::yield_now().await;
            }
            other => return other.or_fail(what),
        }
    }
}

/// What [`drain_keyed`] saw: the positions claimed per key, in claim order, and every
/// moment two items of one key were running at once.
#[derive(Debug, Default)]
pub(crate) struct KeyedRun {
    /// Per key, the positions of its items in the order they were claimed.
    pub(crate) order: HashMap<usize, Vec<usize>>,
    /// Two items of one key held at once: (key, position of the second one claimed).
    pub(crate) overlaps: Vec<(usize, usize)>,
    /// Tokens completed, with the answer each claimer was told.
    pub(crate) completed: Vec<(LeaseToken, TokenOutcome)>,
}

impl KeyedRun {
    /// Checks that every claimer's complete of its own lease was accepted and that all
    /// `total` items of `queue` ended finished, none lost or left running.
    pub(crate) async fn expect_all_finished<S: Store + ?Sized>(
        &self,
        store: &S,
        queue: &QueueName,
        total: usize,
    ) -> Result<(), Failure> {
        let lost: Vec<_> = self
            .completed
            .iter()
            .filter(|(_, told)| *told != TokenOutcome::Accepted)
            .collect();
        ensure(
            lost.is_empty(),
            "every claimer's complete of its own lease to be Accepted",
            lost,
        )?;
        ensure_eq(self.completed.len(), total, "items completed")?;
        expect_counts(
            store,
            queue,
            counts(0, 0, 0, 0, total as u64),
            "after the race",
        )
        .await?;
        Ok(())
    }
}

#[derive(Default)]
struct KeyedShared {
    running: HashSet<usize>,
    run: KeyedRun,
}

/// How long a keyed drain may go without any item finishing before it fails.
const STALL_LIMIT: Duration = Duration::from_secs(30);

/// `racers` claimers drain `total` items of `queue` in batches of `batch`, completing
/// each batch, while recording, for items listed in `keys` (id -> (key, position)),
/// the claim order per key and any two items of one key running at once.
pub(crate) async fn drain_keyed<S: Store>(
    handles: &[Arc<S>],
    queue: &QueueName,
    keys: Arc<KeyPositions>,
    total: usize,
    racers: usize,
    batch: u32,
) -> Result<KeyedRun, Failure> {
    let shared = Arc::new(Mutex::new(KeyedShared::default()));
    let done = Arc::new(AtomicUsize::new(0));
    race(handles, racers, |i, store| {
        let (q, keys, shared, done) = (
            queue.clone(),
            Arc::clone(&keys),
            Arc::clone(&shared),
            Arc::clone(&done),
        );
        async move {
            let me = owner(&format!("drainer-{i}"))?;
            // Empty claims are not counted: near the end of a drain most racers find
            // nothing while one holds the last head, however long it is descheduled.
            // Only a drain in which nobody finishes anything for STALL_LIMIT fails.
            let mut batches = 0usize;
            let mut last_seen = (usize::MAX, std::time::Instant::now());
            loop {
                let finished = done.load(Ordering::SeqCst);
                if finished >= total {
                    return Ok(());
                }
                if finished != last_seen.0 {
                    last_seen = (finished, std::time::Instant::now());
                } else if last_seen.1.elapsed() > STALL_LIMIT {
                    return Err(Failure::new(
                        format!("{total} items drained"),
                        format!("{finished} finished, then none for {STALL_LIMIT:?}"),
                    ));
                }
                let leases = retrying("claim", || {
                    store.claim(ClaimParams::new(q.clone(), me.clone(), batch, LEASE))
                })
                .await?;
                check_leases(&leases, &me, batch)?;
                if leases.is_empty() {
                    tokio::task::yield_now().await;
                    continue;
                }
                batches += 1;
                if batches > total {
                    return Err(Failure::new(
                        format!("{total} items drained in at most {total} batches"),
                        format!("{me} claimed its batch number {batches}"),
                    ));
                }
                let held: Vec<(usize, usize)> = leases
                    .iter()
                    .filter_map(|l| keys.get(&l.token.id).copied())
                    .collect();
                lock(&shared)?.hold(&held);
                // Let the other claimers try the same keys while these are running.
                tokio::task::yield_now().await;
                lock(&shared)?.drop_keys(&held);
                let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
                let told = retrying("complete", || {
                    store.complete(CompleteParams::new(tokens.clone()))
                })
                .await?;
                ensure(told.len() == tokens.len(), "one answer per token", &told)?;
                lock(&shared)?
                    .run
                    .completed
                    .extend(tokens.iter().copied().zip(told));
                done.fetch_add(tokens.len(), Ordering::SeqCst);
            }
        }
    })
    .await?;
    let mut shared = lock(&shared)?;
    Ok(std::mem::take(&mut shared.run))
}

impl KeyedShared {
    fn hold(&mut self, held: &[(usize, usize)]) {
        for &(key, pos) in held {
            if !self.running.insert(key) {
                self.run.overlaps.push((key, pos));
            }
            self.run.order.entry(key).or_default().push(pos);
        }
    }

    fn drop_keys(&mut self, held: &[(usize, usize)]) {
        for (key, _) in held {
            self.running.remove(key);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>, Failure> {
    m.lock()
        .map_err(|_| Failure::new("the suite's shared log to be usable", "a poisoned lock"))
}

/// Lease lengths on both sides of the suite's usual 30 s.
pub(crate) const SHORT: Duration = Duration::from_secs(7);
pub(crate) const LONG: Duration = Duration::from_secs(95);

/// The item and attempt of each lease's token (its lease id is random).
pub(crate) fn tokens(leases: &[Lease]) -> Vec<(ItemId, u32)> {
    leases.iter().map(|l| l.token.item_attempt()).collect()
}

/// Claims from several queues at once.
pub(crate) async fn claim_from<S: Store + ?Sized>(
    store: &S,
    queues: &[&QueueName],
    who: &str,
    limit: u32,
) -> Result<Vec<Lease>, Failure> {
    let me = owner(who)?;
    let params = ClaimParams::new(queues[0].clone(), me.clone(), limit, LEASE)
        .queues(queues.iter().map(|q| (*q).clone()).collect());
    let leases = store.claim(params).await.or_fail("claim")?;
    check_leases(&leases, &me, limit)?;
    Ok(leases)
}

/// The ids of one listing's first page of up to 1000 items.
pub(crate) async fn listed<S: Store + ?Sized>(
    store: &S,
    queue: &tenure_core::QueueName,
    state: ListState,
) -> Result<Vec<ItemId>, Failure> {
    let page = store
        .item_list(ItemListParams::new(queue.clone(), state).limit(1000))
        .await
        .or_fail("item_list")?;
    Ok(page.items.iter().map(|i| i.id).collect())
}
