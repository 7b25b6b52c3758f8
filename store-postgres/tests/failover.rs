//! Faults of the server under a running store, on throwaway servers the tests start
//! and kill themselves (`tenure_test_support::pg_cluster`; skipped without the PostgreSQL
//! server tools, failed instead under `TENURE_REQUIRE_STORES=1`):
//!
//! - a server stopped and started again, or killed and started again, under a running
//!   `Worker`: the time from "server ready" (`pg_ctl -w start` returned) to the first
//!   completion the store accepted, printed and held under [`BACK_WITHIN`];
//! - a primary that goes away from under a store: calls answer `Unavailable`, and the
//!   same store carries on once a primary (the promoted standby) listens at the
//!   address again;
//! - a claim the standby never received, lost in a failover: the promoted standby
//!   hands out the same attempt number again, and the fence still tells the two leases
//!   apart (G3).
//!
//! Run: `cargo test -p tenure-postgres --test failover -- --nocapture --test-threads 1`
//! (prints the recovery times).
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tenure_test_support::pg_cluster as cluster;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::PgServer;
use tenure_core::*;
use tenure_postgres::{PgConfig, PgStore};
use tenure_runtime::{Job, Worker};

/// The promise under test: a running worker completes again within this long of the
/// server accepting connections. The measured figure is printed; it is well under a
/// second on an idle machine.
const BACK_WITHIN: Duration = Duration::from_secs(5);
/// How long the server stays away in the outage variant: long enough for any backoff
/// of the worker to grow to its cap.
const OUTAGE: Duration = Duration::from_secs(3);
/// Items kept ready before each fault, so the resumed worker finds work at once.
const BACKLOG: usize = 20_000;

/// Runs blocking server control off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

fn schema() -> String {
    format!("f_{}", uuid::Uuid::now_v7().simple())
}

async fn top_up(store: &PgStore, q: &QueueName, want: usize) {
    let ready = loop {
        match store.queue_counts(q).await {
            Ok(c) => break c.ready as usize,
            Err(e) if e.is_retryable() => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("{e}"),
        }
    };
    let mut missing = want.saturating_sub(ready);
    while missing > 0 {
        let n = missing.min(1_000);
        let items = (0..n)
            .map(|_| NewItem::new(q.clone(), b"x".to_vec()))
            .collect();
        let params = EnqueueParams::new(items);
        // Dead pooled connections of the last fault may still answer Unavailable.
        let mut tries = 0;
        while let Err(e) = store.enqueue(params.clone()).await {
            tries += 1;
            assert!(e.is_retryable() && tries < 100, "{e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        missing -= n;
    }
}

/// Connections in the store's pool: a process serving many handlers, whose pool is
/// full of idle connections when the server goes away.
const POOL: u32 = 30;

/// Opens every connection of the pool at once and leaves them idle.
async fn fill_pool(store: &PgStore) {
    let mut held = Vec::new();
    for _ in 0..POOL {
        if let Ok(c) = store.pool().try_acquire().ok_or(()) {
            held.push(c);
        } else {
            held.push(store.pool().acquire().await.unwrap());
        }
    }
    drop(held);
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// Waits until the worker's accepted completions pass `from`; answers when.
async fn completed_after(worker: &Worker, from: u64, within: Duration, what: &str) -> Instant {
    let deadline = Instant::now() + within;
    loop {
        if worker.metrics().completed > from {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "{what}: nothing completed within {within:?} ({:?})",
            worker.metrics()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_worker_completes_again_within_seconds_of_a_restarted_server_being_ready() {
    let Some(bin) = cluster::bindir_or_skip() else {
        return;
    };
    let server = Arc::new(blocking(move || PgServer::primary(&bin)).await.unwrap());
    // Every default of the store and the worker, as a user runs them.
    let store = PgStore::connect(
        PgConfig::new(server.url())
            .schema(&schema())
            .max_connections(POOL),
    )
    .await
    .unwrap();
    let q = QueueName::new("q").unwrap();
    top_up(&store, &q, BACKLOG).await;
    let worker = Worker::builder(store.clone())
        .queue(q.clone())
        .concurrency(64)
        .handler(|_job: Job| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(())
        })
        .spawn()
        .unwrap();
    completed_after(&worker, 0, Duration::from_secs(30), "the first drain").await;

    let mut figures = Vec::new();
    for fault in [
        "stop -m fast, 3 s outage, start",
        "stop -m fast, start",
        "SIGKILL, 1 s outage, start (crash recovery)",
        "SIGKILL, start (crash recovery)",
    ] {
        top_up(&store, &q, BACKLOG).await;
        let warm = worker.metrics().completed;
        completed_after(&worker, warm + 500, Duration::from_secs(30), "warm-up").await;
        fill_pool(&store).await;
        let s = server.clone();
        let kill = fault.starts_with("SIGKILL");
        blocking(move || if kill { s.kill() } else { s.stop() })
            .await
            .unwrap();
        // Nothing completes while the server is down.
        let before = worker.metrics().completed;
        if fault.contains("3 s outage") {
            tokio::time::sleep(OUTAGE).await;
        }
        if fault.contains("1 s outage") {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let s = server.clone();
        blocking(move || s.start()).await.unwrap();
        // pg_ctl polls: the server may have accepted connections a little earlier, and
        // the worker may be back before this (a figure of about 0).
        let ready = Instant::now();
        let health_at_ready = store.wake_signal().map(|w| w.health());
        let back = completed_after(&worker, before, Duration::from_secs(60), fault).await;
        let took = back - ready;
        println!(
            "{fault}: the worker completed again {took:?} after the server was ready \
             (its LISTEN connection {:?} then)",
            health_at_ready.unwrap_or(WakeHealth::Local),
        );
        figures.push((fault, took));
    }
    worker.shutdown(Duration::from_secs(5)).await;
    store.close().await;
    for (fault, took) in figures {
        assert!(
            took < BACK_WITHIN,
            "{fault}: completed again {took:?} after the server was ready, not within \
             {BACK_WITHIN:?}"
        );
    }
}

/// The pool after a restart: only the call that met a dead connection fails. Every
/// other idle connection, dead too, is tested before it is handed out (it has been
/// idle since before the loss was seen) and replaced, instead of failing one call
/// each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_only_the_call_that_met_the_loss_fails_not_one_per_pooled_connection() {
    let Some(bin) = cluster::bindir_or_skip() else {
        return;
    };
    let server = Arc::new(blocking(move || PgServer::primary(&bin)).await.unwrap());
    let store = PgStore::connect(
        PgConfig::new(server.url())
            .schema(&schema())
            .listen(false)
            .max_connections(POOL),
    )
    .await
    .unwrap();
    let q = QueueName::new("q").unwrap();
    fill_pool(&store).await;
    assert_eq!(
        store.pool().num_idle(),
        POOL as usize,
        "every connection idle"
    );
    let s = server.clone();
    blocking(move || s.restart()).await.unwrap();
    let mut failed = 0;
    for _ in 0..POOL {
        match store.queue_counts(&q).await {
            Ok(_) => {}
            Err(e) if e.is_retryable() => failed += 1,
            Err(e) => panic!("{e}"),
        }
    }
    println!("{failed} of {POOL} calls after the restart failed");
    assert!(
        failed <= 1,
        "{failed} of {POOL} calls failed after a restart: dead pooled connections were \
         handed out one call at a time"
    );
    store.close().await;
}

/// A primary with a streaming standby that has replayed everything so far, and a store
/// on a fresh schema of the primary, `items` enqueued in queue `q`.
async fn replicated(items: usize) -> Option<(Arc<PgServer>, Arc<PgServer>, PgStore, String)> {
    let bin = cluster::bindir_or_skip()?;
    let (primary, standby) = blocking(move || {
        let primary = PgServer::primary(&bin)?;
        let standby = PgServer::standby_of(&primary)?;
        primary.wait_streaming(1, Duration::from_secs(30))?;
        Ok::<_, std::io::Error>((primary, standby))
    })
    .await
    .unwrap();
    let schema = schema();
    let store = PgStore::connect(
        PgConfig::new(primary.url())
            .schema(&schema)
            .listen(false)
            .acquire_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let q = QueueName::new("q").unwrap();
    let batch = (0..items)
        .map(|i| NewItem::new(q.clone(), vec![u8::try_from(i % 256).unwrap()]))
        .collect();
    store.enqueue(EnqueueParams::new(batch)).await.unwrap();
    let (primary, standby) = (Arc::new(primary), Arc::new(standby));
    let (p, s) = (primary.clone(), standby.clone());
    blocking(move || p.wait_replayed(&s, Duration::from_secs(30)))
        .await
        .unwrap();
    Some((primary, standby, store, schema))
}

/// Claims one item of `q` with `store`, retrying while it answers Unavailable (up to
/// `within`).
async fn claim_when_back(store: &PgStore, owner: &str, within: Duration) -> Lease {
    let q = QueueName::new("q").unwrap();
    let me = OwnerId::new(owner).unwrap();
    let deadline = Instant::now() + within;
    loop {
        match store.claim_one(q.clone(), me.clone(), LEASE).await {
            Ok(Some(lease)) => return lease,
            Ok(None) => panic!("nothing to claim"),
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("claim: {e}"),
        }
    }
}

const LEASE: Duration = Duration::from_secs(30);

/// The store is pointed at an address, not at a server: when the primary there is
/// lost its calls answer `Unavailable`, and once a primary listens at that address
/// again (here the promoted standby, moved to it) the same store carries on, without
/// a restart, with the data the standby had received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_primary_is_lost_answers_unavailable_and_carries_on_with_the_next_primary_at_its_address(
) {
    let Some((primary, standby, store, _)) = replicated(3).await else {
        return;
    };
    let first = claim_when_back(&store, "w1", Duration::ZERO).await;
    store.complete_one(first.token).await.unwrap();
    let p = primary.clone();
    blocking(move || p.kill()).await.unwrap();
    let q = QueueName::new("q").unwrap();
    let me = OwnerId::new("w1").unwrap();
    for _ in 0..3 {
        let answer = store.claim_one(q.clone(), me.clone(), LEASE).await;
        assert!(
            matches!(answer, Err(Error::Unavailable { .. })),
            "a claim while no server listens: {answer:?}"
        );
    }
    // Fail over: the standby is promoted and takes the lost primary's address.
    let port = primary.port();
    let standby = Arc::try_unwrap(standby).unwrap();
    let standby = blocking(move || {
        let mut s = standby;
        s.promote()?;
        s.stop()?;
        s.set_port(port)?;
        s.start()?;
        Ok::<_, std::io::Error>(s)
    })
    .await
    .unwrap();
    let ready = Instant::now();
    let again = claim_when_back(&store, "w1", Duration::from_secs(10)).await;
    println!(
        "the store claimed on the promoted standby {:?} after it was ready",
        ready.elapsed()
    );
    assert_eq!(again.token.attempt, 1, "an item the standby had received");
    store.complete_one(again.token).await.unwrap();
    store.close().await;
    drop(standby);
}

/// The lost claim (G3): the primary acknowledged a claim its standby never received,
/// then died; the promoted standby hands the same item out again with the same
/// attempt number. The first owner's token is refused all the same, and the new
/// owner's finish is accepted: a token names its lease, not only its attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_lost_in_a_failover_hands_its_attempt_out_again_and_the_old_token_is_refused() {
    let Some((primary, standby, store, schema)) = replicated(1).await else {
        return;
    };
    // The standby stops before the claim, so it never receives it.
    let s = standby.clone();
    blocking(move || s.stop()).await.unwrap();
    let old = claim_when_back(&store, "w-old", Duration::ZERO).await;
    assert_eq!(old.token.attempt, 1);
    let p = primary.clone();
    blocking(move || p.kill()).await.unwrap();
    store.close().await;
    let s = standby.clone();
    blocking(move || {
        s.start()?;
        s.promote()
    })
    .await
    .unwrap();

    let promoted = PgStore::connect(
        PgConfig::new(standby.url())
            .schema(&schema)
            .listen(false)
            .migrate_on_connect(false),
    )
    .await
    .unwrap();
    let new = claim_when_back(&promoted, "w-new", Duration::from_secs(10)).await;
    assert_eq!(new.token.id, old.token.id, "the same item");
    assert_eq!(
        new.token.attempt, old.token.attempt,
        "the promoted standby never saw the first claim: the same attempt number"
    );
    let late = promoted
        .complete(CompleteParams::new(vec![old.token]))
        .await
        .unwrap();
    assert_eq!(
        late,
        vec![TokenOutcome::LeaseLost],
        "the superseded owner's complete, with the token of the lost claim"
    );
    let item = promoted.item_get(new.token.id).await.unwrap().unwrap();
    assert_eq!(
        (item.state, item.owner.as_ref().map(OwnerId::as_str)),
        (ItemState::Running, Some("w-new")),
        "the refused complete changed nothing"
    );
    let finish = promoted
        .complete(CompleteParams::new(vec![new.token]))
        .await
        .unwrap();
    assert_eq!(
        finish,
        vec![TokenOutcome::Accepted],
        "the new owner's complete"
    );
    promoted.close().await;
}
