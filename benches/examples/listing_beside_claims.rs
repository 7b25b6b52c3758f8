//! Claims on PostgreSQL with and without an operator's listing loop beside them:
//! listings must not slow claims (they read through indexes and take no row locks).
//!
//! ```sh
//! cargo run --release -p tenure-benches --example listing_beside_claims -- [take] [rounds]
//! ```
//!
//! Seeds a queue with `take` ready items and 200 dead ones per round, then drains
//! `take` items with 4 workers claiming 10 at a time and completing each batch, once
//! alone and once while another task lists the queue without pause (ready, running
//! and dead pages of 100 followed by their cursors, the leases, the counts). Rounds
//! alternate the two so drift on a shared machine falls on both; prints items/s of
//! each and the ratio (with / without). Uses `TENURE_POSTGRES_URL` or the local
//! default, in a schema of its own that it drops at the end.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tenure_core::{
    ClaimParams, CompleteParams, DiscardParams, EnqueueParams, FailParams, Failure, ItemListParams,
    LeaseListParams, ListState, NewItem, OwnerId, QueueName, Store, SystemClock,
};
use tenure_postgres::{PgConfig, PgStore};

const WORKERS: usize = 4;
const BATCH: u32 = 10;
const LEASE: Duration = Duration::from_secs(30);

async fn seed(store: &PgStore, q: &QueueName, take: usize) {
    for chunk in (0..take).collect::<Vec<_>>().chunks(1000) {
        let items = chunk
            .iter()
            .map(|_| NewItem::new(q.clone(), vec![0u8; 16]))
            .collect();
        store
            .enqueue(EnqueueParams::new(items))
            .await
            .expect("seed");
    }
    // Dead items for the dead listing.
    let dead: Vec<NewItem> = (0..200)
        .map(|_| NewItem::new(q.clone(), vec![1u8]).priority(-1))
        .collect();
    store
        .enqueue(EnqueueParams::new(dead))
        .await
        .expect("seed dead");
    let w = OwnerId::new("killer").expect("owner");
    let leases = store
        .claim(ClaimParams::new(q.clone(), w, 200, LEASE))
        .await
        .expect("claim");
    let failures = leases
        .iter()
        .map(|l| Failure::permanent(l.token, "seeded"))
        .collect();
    store.fail(FailParams::new(failures)).await.expect("kill");
}

async fn drain(store: &PgStore, q: &QueueName, take: usize) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let (store, q, done) = (store.clone(), q.clone(), Arc::clone(&done));
        tasks.push(tokio::spawn(async move {
            let me = OwnerId::new(format!("w{w}")).expect("owner");
            while (done.load(Ordering::Relaxed) as usize) < take {
                let leases = store
                    .claim(ClaimParams::new(q.clone(), me.clone(), BATCH, LEASE))
                    .await
                    .expect("claim");
                if leases.is_empty() {
                    break;
                }
                let tokens: Vec<_> = leases.iter().map(|l| l.token).collect();
                store
                    .complete(CompleteParams::new(tokens))
                    .await
                    .expect("complete");
                done.fetch_add(leases.len() as u64, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.expect("worker");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

async fn list_until(store: PgStore, q: QueueName, stop: Arc<AtomicBool>) -> u64 {
    let mut calls = 0;
    while !stop.load(Ordering::Relaxed) {
        for state in [ListState::Ready, ListState::Running, ListState::Dead] {
            let mut p = ItemListParams::new(q.clone(), state);
            for _ in 0..3 {
                let page = store.item_list(p.clone()).await.expect("item_list");
                calls += 1;
                match page.next {
                    Some(c) => p = ItemListParams::new(q.clone(), state).after(c),
                    None => break,
                }
            }
        }
        store
            .lease_list(LeaseListParams::new(q.clone()))
            .await
            .expect("lease_list");
        store.queue_counts(&q).await.expect("queue_counts");
        calls += 2;
    }
    calls
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let take: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5_000);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let url = std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let schema = format!("bench_list_{}", uuid::Uuid::now_v7().simple());
    let store = PgStore::connect(
        PgConfig::new(&url)
            .schema(&schema)
            .clock(SystemClock)
            .max_connections(8),
    )
    .await
    .expect("connect");
    let (mut alone, mut beside, mut listed) = (Vec::new(), Vec::new(), 0);
    for round in 0..rounds {
        for with_listing in [round % 2 == 1, round % 2 == 0] {
            let q = QueueName::new(format!("r{round}{with_listing}")).expect("queue");
            seed(&store, &q, take).await;
            let stop = Arc::new(AtomicBool::new(false));
            let lister = with_listing
                .then(|| tokio::spawn(list_until(store.clone(), q.clone(), Arc::clone(&stop))));
            let rate = drain(&store, &q, take).await;
            stop.store(true, Ordering::Relaxed);
            if let Some(l) = lister {
                listed += l.await.expect("lister");
                beside.push(rate);
            } else {
                alone.push(rate);
            }
            let _ = store
                .dead_discard(DiscardParams::matching(tenure_core::DeadFilter::new(q)))
                .await;
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    println!("claims alone:          {alone:.0?} items/s");
    println!("claims beside listing: {beside:.0?} items/s ({listed} listing calls)");
    let (a, b) = (median(&mut alone), median(&mut beside));
    println!("median ratio (beside / alone): {:.2}", b / a);
    store.close().await;
    let mut admin: sqlx::PgConnection = sqlx::Connection::connect(&url).await.expect("admin");
    tenure_test_support::postgres::drop_schema(&mut admin, &schema).await;
}
