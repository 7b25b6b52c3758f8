//! Real failovers on throwaway servers: a primary with a replica and three sentinels,
//! and a 3-primary, 3-replica Redis Cluster. The store follows each failover by
//! itself, answers `Unavailable` meanwhile, and no finish of a superseded lease is
//! ever accepted: not in the middle of a Worker's drain, not for a claim the failover
//! lost, not from a primary that stalled and ran its queued calls after the failover.
//!
//! Sentinels decide the primary is down after 1 s (`down-after-milliseconds`) with a
//! 1 s `failover-timeout`; cluster nodes after 1 s (`cluster-node-timeout`), so each
//! case takes seconds.

// Test bodies: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{eventually, info_field, SentinelSet, TempCluster};
use tenure_core::{
    CompleteParams, EnqueueParams, ErrorKind, ItemId, ItemState, LeaseToken, ManualClock, NewItem,
    OwnerId, QueueName, Store, StoreExt, Timestamp, TokenOutcome, WakeHealth,
};
use tenure_redis::{RedisConfig, RedisStore};
use tenure_runtime::{Job, Worker};
use tenure_test_support::ledger::Ledger;
use tenure_test_support::redis as support;

const LEASE: Duration = Duration::from_secs(30);
const DOWN_AFTER: Duration = Duration::from_millis(1_000);
const FAILOVER_TIMEOUT: Duration = Duration::from_millis(1_000);
const NODE_TIMEOUT: Duration = Duration::from_millis(1_000);
/// Items in one drain.
const ITEMS: usize = 1_200;

fn queue() -> QueueName {
    QueueName::new("failover").unwrap()
}

fn prefix(kind: &str) -> String {
    format!("{kind}_{}", uuid::Uuid::now_v7().simple())
}

fn clock() -> ManualClock {
    ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000))
}

/// The settings of every store here: quick timeouts, the test's clock, no listener.
fn config(url: &str, prefix: &str, clock: &ManualClock) -> RedisConfig {
    RedisConfig::new(url)
        .prefix(prefix)
        .clock(clock.clone())
        .listen(false)
        .keep_done(true)
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_secs(2))
}

/// Calls `op` until it answers, checking that every error meanwhile is
/// `Unavailable`: during a failover the store never answers anything else.
async fn until_ok<T, F, Fut>(what: &str, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = tenure_core::Result<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match op().await {
            Ok(v) => return v,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Unavailable, "{what}: {e}");
                assert!(e.is_retryable(), "{what}: {e}");
            }
        }
        assert!(Instant::now() < deadline, "{what}: still unavailable");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What one `complete` of `token` was told.
async fn complete(store: &RedisStore, token: LeaseToken) -> tenure_core::Result<TokenOutcome> {
    let told = store.complete(CompleteParams::new(vec![token])).await?;
    Ok(told[0])
}

/// Every lease the handler ran, per item, with when it started.
type Runs = Arc<Mutex<HashMap<ItemId, Vec<(LeaseToken, Instant)>>>>;

/// `FCALL`s the server on `port` ran or refused (`INFO commandstats`).
async fn fcalls(port: u16) -> u64 {
    let line = info_field(port, "commandstats", "cmdstat_fcall")
        .await
        .unwrap_or_default();
    line.split(',')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| *k == "calls" || *k == "rejected_calls")
        .map(|(_, v)| v.parse::<u64>().unwrap())
        .sum()
}

/// A Worker draining [`ITEMS`] items through a [`Ledger`], with what its handler ran.
struct Drain {
    store: Ledger<RedisStore>,
    worker: Worker,
    ids: Vec<ItemId>,
    /// Every lease the handler ran, per item, with when it started.
    ran: Runs,
    clock: ManualClock,
}

impl Drain {
    /// Enqueues the items and starts the worker. No `WAIT`: with one replica, the
    /// new primary has none left to wait for.
    async fn start(url: &str, kind: &str) -> Drain {
        let clock = clock();
        let store = RedisStore::connect(config(url, &prefix(kind), &clock).listen(true))
            .await
            .unwrap();
        let mut ids = Vec::with_capacity(ITEMS);
        for chunk in (0..ITEMS).collect::<Vec<_>>().chunks(300) {
            let items: Vec<NewItem> = chunk
                .iter()
                .map(|n| NewItem::new(queue(), n.to_string().into_bytes()))
                .collect();
            ids.extend(items.iter().map(|i| i.id));
            until_ok("enqueue", || {
                store.enqueue(EnqueueParams::new(items.clone()))
            })
            .await;
        }
        let store = Ledger::new(store);
        let ran: Runs = Arc::default();
        let seen = ran.clone();
        let worker = Worker::builder(store.clone())
            .queue(queue())
            .concurrency(8)
            .claim_batch(16)
            .lease_duration(LEASE)
            .clock(clock.clone())
            .handler(move |job: Job| {
                let seen = seen.clone();
                async move {
                    seen.lock()
                        .unwrap()
                        .entry(job.item().id)
                        .or_default()
                        .push((job.token(), Instant::now()));
                    // Spread the drain over a few seconds so the fault lands in it.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Ok(())
                }
            })
            .spawn()
            .unwrap();
        Drain {
            store,
            worker,
            ids,
            ran,
            clock,
        }
    }

    /// Waits until the wake-up listener is subscribed on the server on `port`.
    async fn wait_listening_on(&self, port: u16) {
        let signal = self.store.inner.wake_signal().unwrap();
        let channel = format!("{{{}}}:wake", self.store.inner.prefix());
        eventually(
            Duration::from_secs(30),
            &format!("the wake-up listener to subscribe on {port}"),
            || async {
                let subscribers: (String, i64) =
                    support::ask(port, redis::cmd("PUBSUB").arg("SHARDNUMSUB").arg(&channel))
                        .await?;
                (signal.health() == WakeHealth::Healthy && subscribers.1 >= 1).then_some(())
            },
        )
        .await;
    }

    /// Waits until the store answers a write again after a fault at `fault`, and
    /// answers how long that took.
    async fn store_answers_again(&self, fault: Instant) -> Duration {
        let owner = OwnerId::new("probe").unwrap();
        let probe = tenure_core::LeaderName::new("probe").unwrap();
        loop {
            let answer = self
                .store
                .inner
                .leader_acquire(tenure_core::LeaderParams::new(
                    probe.clone(),
                    owner.clone(),
                    LEASE,
                ))
                .await;
            if answer.is_ok() {
                return fault.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn accepted(&self) -> usize {
        self.store.told.lock().unwrap().accepted.len()
    }

    async fn wait_accepted(&self, n: usize, within: Duration) {
        eventually(within, &format!("{n} accepted completions"), || async {
            (self.accepted() >= n).then_some(())
        })
        .await;
    }

    /// Waits until the store takes completions again after a fault at `fault`, and
    /// answers how long that took.
    async fn back_at_work(&self, fault: Instant) -> Duration {
        let before = self.accepted();
        self.wait_accepted(before + 20, Duration::from_secs(30))
            .await;
        fault.elapsed()
    }

    /// Lets the drain finish: whenever it stalls, the store clock moves a lease on so
    /// that leases whose claim answer the failover swallowed expire and are
    /// recovered. Then stops the worker and checks every item against the fault at
    /// `fault`.
    async fn finish(self, fault: Instant) {
        let mut last = (self.accepted(), Instant::now());
        loop {
            let q = queue();
            let counts = until_ok("queue_counts", || self.store.inner.queue_counts(&q)).await;
            if counts.done == ITEMS as u64 {
                break;
            }
            let now = self.accepted();
            if now != last.0 {
                last = (now, Instant::now());
            } else if last.1.elapsed() > Duration::from_millis(500) {
                self.clock.advance(LEASE + Duration::from_secs(1));
                last = (now, Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let report = self.worker.shutdown(Duration::from_secs(10)).await;
        let told = std::mem::take(&mut *self.store.told.lock().unwrap());
        let ran = self.ran.lock().unwrap().clone();
        let twice =
            check_no_superseded_finish(&self.store.inner, &self.ids, &told, &ran, fault).await;
        println!(
            "{} accepted ({twice} items finished again after the failover lost an acknowledged \
             complete), {} refused as lease lost, {} unanswered; {} runs for {} items; {:?}",
            told.accepted.len(),
            told.lost.len(),
            told.unanswered.len(),
            ran.values().map(Vec::len).sum::<usize>(),
            ITEMS,
            report.metrics
        );
    }
}

/// Every item is done, and no finish of a superseded lease was accepted:
///
/// - no completion was accepted after another lease of its item began running (a
///   newer lease existed when it was accepted);
/// - the lease that finished the item ran its handler, and its completion was the
///   last one accepted, or its answer was lost (sent, no answer);
/// - any earlier accepted completion was answered before the fault: the failover lost
///   it with the old primary (replication is asynchronous), so the item ran again.
///
/// Answers how many items were finished twice that way.
async fn check_no_superseded_finish(
    store: &RedisStore,
    ids: &[ItemId],
    told: &tenure_test_support::ledger::Told,
    ran: &HashMap<ItemId, Vec<(LeaseToken, Instant)>>,
    fault: Instant,
) -> usize {
    let mut accepted: HashMap<ItemId, Vec<(LeaseToken, Instant)>> = HashMap::new();
    for (t, at) in &told.accepted {
        accepted.entry(t.id).or_default().push((*t, *at));
    }
    let mut twice = 0;
    for id in ids {
        let item = until_ok("item_get", || store.item_get(*id))
            .await
            .unwrap_or_else(|| panic!("item {id} was lost"));
        assert_eq!(item.state, ItemState::Done, "item {id}");
        let finished_by = item.token();
        let runs = ran.get(id).map(Vec::as_slice).unwrap_or_default();
        let started = |t: &LeaseToken| runs.iter().find(|(r, _)| r == t).map(|(_, at)| *at);
        assert!(
            started(&finished_by).is_some(),
            "item {id}: the lease that finished it never ran its handler"
        );
        let acks = accepted.get(id).map(Vec::as_slice).unwrap_or_default();
        for (t, at) in acks {
            let began =
                started(t).unwrap_or_else(|| panic!("item {id}: {t:?} accepted, never ran"));
            if let Some((newer, _)) = runs
                .iter()
                .find(|(r, start)| r != t && *start > began && start < at)
            {
                panic!("item {id}: {t:?} was accepted after {newer:?} began running");
            }
        }
        match acks.last() {
            Some((t, _)) if *t == finished_by => {}
            _ => assert!(
                told.unanswered.contains(&finished_by),
                "item {id}: finished by {finished_by:?}, whose complete was neither accepted \
                 last nor sent without an answer; accepted: {acks:?}"
            ),
        }
        let earlier = acks.iter().filter(|(t, _)| *t != finished_by);
        for (t, at) in earlier {
            assert!(
                *at < fault,
                "item {id}: {t:?} was accepted after the fault, yet another lease finished it"
            );
            twice += 1;
        }
    }
    twice
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sentinel_a_primary_killed_mid_drain_is_followed_and_no_item_is_finished_twice() {
    let Some(mut set) = SentinelSet::start(&[], DOWN_AFTER, FAILOVER_TIMEOUT).await else {
        return;
    };
    let drain = Drain::start(&set.url(), "sf").await;
    drain
        .wait_accepted(ITEMS / 3, Duration::from_secs(60))
        .await;
    let primary = set.primary_port().await.unwrap();
    assert_eq!(primary, set.first_primary);
    let at_fault = drain.accepted();
    let fault = Instant::now();
    set.node(primary).kill();
    let promoted = set.first_replica;
    let (back, failed_over, answers) = tokio::join!(
        drain.back_at_work(fault),
        async {
            set.wait_primary(promoted, Duration::from_secs(30)).await;
            fault.elapsed()
        },
        drain.store_answers_again(fault)
    );
    // The wake-ups follow the failover too.
    drain.wait_listening_on(promoted).await;
    println!(
        "sentinel: primary killed; the sentinels named the new primary {failed_over:?} after \
         the kill, the store answered a write {answers:?} after it and completed items again \
         {back:?} after it (down-after \
         {DOWN_AFTER:?}, failover-timeout {FAILOVER_TIMEOUT:?})"
    );
    assert!(
        answers <= failed_over + 2 * FAILOVER_TIMEOUT,
        "the store answered {answers:?} after the kill, the failover was done after \
         {failed_over:?}"
    );
    assert!(
        back < 2 * (DOWN_AFTER + FAILOVER_TIMEOUT) + Duration::from_secs(4),
        "the Worker took {back:?} to complete items again"
    );
    assert!(
        at_fault < ITEMS,
        "the fault came in the middle of the drain ({at_fault} of {ITEMS} done)"
    );
    drain.finish(fault).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_the_primary_of_the_prefix_killed_mid_drain_is_followed_and_no_item_is_finished_twice(
) {
    let Some(mut cluster) = TempCluster::start(3, 1, NODE_TIMEOUT, &[]).await else {
        return;
    };
    let drain = Drain::start(&cluster.url(), "cf").await;
    let root = format!("{{{}}}", drain.store.inner.prefix());
    let slot = cluster.keyslot(&root).await;
    let owner = cluster.primary_of(slot).await.unwrap();
    let replicas = cluster.replicas_of(owner).await;
    assert_eq!(replicas.len(), 1, "the slot's primary has one replica");
    drain
        .wait_accepted(ITEMS / 3, Duration::from_secs(60))
        .await;
    let at_fault = drain.accepted();
    let fault = Instant::now();
    cluster.node(owner).kill();
    let (back, failed_over) = tokio::join!(drain.back_at_work(fault), async {
        eventually(
            Duration::from_secs(30),
            "the replica to take the slot",
            || async { (cluster.primary_of(slot).await == Some(replicas[0])).then_some(()) },
        )
        .await;
        fault.elapsed()
    });
    println!(
        "cluster: the slot's primary killed; its replica had the slot {failed_over:?} after the \
         kill, and the store completed items again {back:?} after it (cluster-node-timeout \
         {NODE_TIMEOUT:?})"
    );
    assert!(
        back < 4 * NODE_TIMEOUT + Duration::from_secs(6),
        "the store took {back:?} to work again"
    );
    assert_eq!(
        cluster.primary_of(slot).await,
        Some(replicas[0]),
        "the replica took the slot over"
    );
    drain.wait_listening_on(replicas[0]).await;
    assert!(
        at_fault < ITEMS,
        "the fault came in the middle of the drain ({at_fault} of {ITEMS} done)"
    );
    drain.finish(fault).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_the_failover_lost_leaves_its_token_refused_and_the_new_owners_finish_accepted() {
    let Some(mut set) = SentinelSet::start(&[], DOWN_AFTER, FAILOVER_TIMEOUT).await else {
        return;
    };
    let clock = clock();
    let prefix = prefix("lost");
    // The item reaches the replica before anything else happens.
    let producer = RedisStore::connect(
        config(&set.url(), &prefix, &clock).wait_replicas(1, Duration::from_secs(2)),
    )
    .await
    .unwrap();
    let item = NewItem::new(queue(), b"x".to_vec());
    let id = item.id;
    producer.enqueue_one(item).await.unwrap();
    let a = RedisStore::connect(config(&set.url(), &prefix, &clock))
        .await
        .unwrap();
    let b = RedisStore::connect(config(&set.url(), &prefix, &clock))
        .await
        .unwrap();
    b.ping().await.unwrap();

    // Cut the replica's link: point it at a port where nothing listens. It keeps its
    // data and stays a replica, and the primary now answers alone.
    let (primary, replica) = (set.first_primary, set.first_replica);
    let nowhere = support::free_port(false);
    let _: () = support::ask(
        replica,
        redis::cmd("REPLICAOF").arg("127.0.0.1").arg(nowhere),
    )
    .await
    .unwrap();
    eventually(
        Duration::from_secs(10),
        "the primary to lose its replica",
        || async {
            (info_field(primary, "replication", "connected_slaves")
                .await
                .as_deref()
                == Some("0"))
            .then_some(())
        },
    )
    .await;
    let old = a
        .claim_one(queue(), OwnerId::new("a").unwrap(), LEASE)
        .await
        .unwrap()
        .expect("the primary hands the item out");

    // The primary dies with the claim; the replica, which never saw it, is promoted.
    set.node(primary).kill();
    let _: Option<String> = support::ask(
        set.sentinels[0].port,
        redis::cmd("SENTINEL").arg("FAILOVER").arg(&set.master_name),
    )
    .await;
    set.wait_primary(replica, Duration::from_secs(30)).await;

    // The store finds the new primary by itself; the item is claimable there, and
    // is handed out with the very attempt number the lost claim had.
    let new = until_ok("claim on the new primary", || {
        b.claim_one(queue(), OwnerId::new("b").unwrap(), LEASE)
    })
    .await
    .expect("the lost claim left the item ready on the new primary");
    assert_eq!(new.token.id, id);
    assert_eq!(
        new.token.attempt, old.token.attempt,
        "the failover handed the same attempt out again"
    );
    let told_old = until_ok("the old owner's complete", || complete(&a, old.token)).await;
    assert_eq!(
        told_old,
        TokenOutcome::LeaseLost,
        "the lost claim's token finished an item another owner holds"
    );
    let told_new = until_ok("the new owner's complete", || complete(&b, new.token)).await;
    assert_eq!(told_new, TokenOutcome::Accepted);
    let item = b.item_get(id).await.unwrap().unwrap();
    assert_eq!((item.state, item.token()), (ItemState::Done, new.token));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_primarys_queued_finish_run_after_the_failover_is_never_accepted() {
    let Some(mut set) = SentinelSet::start(&[], DOWN_AFTER, FAILOVER_TIMEOUT).await else {
        return;
    };
    let clock = clock();
    let prefix = prefix("stall");
    // The old owner waits for a replica after every write, and for answers longer
    // than the failover takes, so its queued call is still awaited when the stalled
    // primary runs it.
    // One connection, so the late call goes down the one already open to the
    // primary instead of asking the sentinels first.
    let a = RedisStore::connect(
        config(&set.url(), &prefix, &clock)
            .connections(1)
            .wait_replicas(1, Duration::from_millis(500))
            .response_timeout(Duration::from_secs(20)),
    )
    .await
    .unwrap();
    let item = NewItem::new(queue(), b"x".to_vec());
    let id = item.id;
    a.enqueue_one(item).await.unwrap();
    let old = a
        .claim_one(queue(), OwnerId::new("a").unwrap(), LEASE)
        .await
        .unwrap()
        .unwrap();

    let (primary, replica) = (set.first_primary, set.first_replica);
    let fcalls_before = fcalls(primary).await;
    set.node(primary).pause();
    let late = tokio::spawn({
        let a = a.clone();
        async move { complete(&a, old.token).await }
    });
    set.wait_primary(replica, Duration::from_secs(30)).await;

    // On the new primary the old lease runs out and another owner takes the item.
    let b = RedisStore::connect(config(&set.url(), &prefix, &clock))
        .await
        .unwrap();
    clock.advance(LEASE + Duration::from_secs(1));
    let new = until_ok("claim on the new primary", || {
        b.claim_one(queue(), OwnerId::new("b").unwrap(), LEASE)
    })
    .await
    .expect("the expired lease made the item claimable");
    assert!(new.token.attempt > old.token.attempt);
    let told_new = until_ok("the new owner's complete", || complete(&b, new.token)).await;
    assert_eq!(told_new, TokenOutcome::Accepted);

    // The stalled primary runs its queued complete now, still believing it leads.
    set.node(primary).resume();
    let told_old = tokio::time::timeout(Duration::from_secs(30), late)
        .await
        .expect("the queued complete answers")
        .unwrap();
    println!("the stalled primary's queued complete was told {told_old:?}");
    assert!(
        fcalls(primary).await > fcalls_before,
        "the queued complete reached the old primary"
    );
    match told_old {
        Ok(TokenOutcome::Accepted) => {
            panic!("a superseded lease's finish was accepted by the stalled primary")
        }
        Ok(TokenOutcome::LeaseLost | TokenOutcome::OutOfOrder) => {}
        Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}"),
    }
    // The sentinels demote the old primary: it follows the new one and takes no
    // writes.
    eventually(
        Duration::from_secs(30),
        "the old primary to be demoted",
        || async {
            (info_field(primary, "replication", "master_link_status")
                .await
                .as_deref()
                == Some("up"))
            .then_some(())
        },
    )
    .await;
    let item = until_ok("item_get", || b.item_get(id)).await.unwrap();
    assert_eq!((item.state, item.token()), (ItemState::Done, new.token));
    let err = RedisStore::connect(config(&set.node(primary).url(), &prefix, &clock))
        .await
        .unwrap()
        .complete(CompleteParams::new(vec![new.token]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
}
