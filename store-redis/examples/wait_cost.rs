//! What `wait_replicas` costs: claims and completes on a throwaway primary with one
//! replica (both `redis-server` on loopback ports), with and without
//! `wait_replicas(1, 1 s)`, in one run.
//!
//! ```text
//! cargo run --release -p tenure-redis --example wait_cost [items] [workers]
//! ```
//!
//! Each cell drains `items` (default 10,000) ready items with `workers` tasks
//! (default 4) claiming B at a time and completing each batch in one call; B = 1 and
//! B = 100. The two settings take turns, three rounds each, so a busy machine slows
//! both alike; prints the median items/s of each and the ratio with `WAIT` to
//! without.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use tenure_test_support::redis as support;

use std::time::{Duration, Instant};

use tenure_core::{ClaimParams, CompleteParams, EnqueueParams, NewItem, OwnerId, QueueName, Store};
use tenure_redis::{RedisConfig, RedisStore};

async fn drain(url: &str, wait: bool, items: usize, workers: usize, batch: u32) -> f64 {
    let prefix = format!("wc_{}", uuid::Uuid::now_v7().simple());
    let mut config = RedisConfig::new(url).prefix(&prefix).listen(false);
    if wait {
        config = config.wait_replicas(1, Duration::from_secs(1));
    }
    let store = RedisStore::connect(config).await.unwrap();
    let queue = QueueName::new("q").unwrap();
    for chunk in (0..items).collect::<Vec<_>>().chunks(1_000) {
        let batch: Vec<NewItem> = chunk
            .iter()
            .map(|_| NewItem::new(queue.clone(), b"x".to_vec()))
            .collect();
        store.enqueue(EnqueueParams::new(batch)).await.unwrap();
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (store, queue) = (store.clone(), queue.clone());
        tasks.push(tokio::spawn(async move {
            let owner = OwnerId::new(format!("w{w}")).unwrap();
            loop {
                let leases = store
                    .claim(ClaimParams::new(
                        queue.clone(),
                        owner.clone(),
                        batch,
                        Duration::from_secs(30),
                    ))
                    .await
                    .unwrap();
                if leases.is_empty() {
                    return;
                }
                let tokens = leases.iter().map(|l| l.token).collect();
                store.complete(CompleteParams::new(tokens)).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rate = items as f64 / start.elapsed().as_secs_f64();
    store.remove_prefix().await.unwrap();
    rate
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let items: usize = args.next().map_or(10_000, |a| a.parse().unwrap());
    let workers: usize = args.next().map_or(4, |a| a.parse().unwrap());
    let Some(primary) = support::TempRedis::start(&["--appendonly", "no"]).await else {
        return;
    };
    let port = primary.port.to_string();
    let replica =
        support::TempRedis::start(&["--appendonly", "no", "--replicaof", "127.0.0.1", &port])
            .await
            .unwrap();
    support::wait_linked(replica.port).await;
    println!("{items} items, {workers} workers, primary + 1 replica on loopback");
    println!("| B | no WAIT, items/s | wait_replicas(1), items/s | ratio |");
    println!("|---|---|---|---|");
    for batch in [1, 100] {
        let (mut plain, mut waited) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            plain.push(drain(&primary.url(), false, items, workers, batch).await);
            waited.push(drain(&primary.url(), true, items, workers, batch).await);
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[1]
        };
        let (plain, waited) = (median(&mut plain), median(&mut waited));
        println!(
            "| {batch} | {plain:.0} | {waited:.0} | {:.2} |",
            waited / plain
        );
    }
}
