//! Does the dashboard slow the work? Claims on PostgreSQL with a 1,000,000-item
//! backlog, alone and beside a dashboard that ten tabs refresh every second, in
//! alternating rounds of one run; prints claims/s of each and their ratio.
//!
//! ```text
//! cargo run --release -p tenure-dashboard --example claims_beside_dashboard
//! ```
//!
//! The store is a fresh schema at `TENURE_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), dropped at the end. Sizes from the
//! environment: `TENURE_DASH_BENCH_BACKLOG` (default 1,000,000 items scheduled a week
//! out, never claimed, but counted by every refresh), `TENURE_DASH_BENCH_ITEMS` (ready
//! items drained per round, default 100,000: rounds of several seconds, so a tab's
//! once-a-second refresh happens many times in each), `TENURE_DASH_BENCH_ROUNDS` (rounds of each
//! kind, default 3), `TENURE_DASH_BENCH_WORKERS` (default 4) and
//! `TENURE_DASH_BENCH_BATCH` (items per claim, default 10).
//!
//! The ten tabs are ten tasks that each fetch their page through the router every
//! second (no socket: the HTML is rendered, the store is read as a browser would make
//! it): four on the overview, three on the queue's ready items, three on the leases.
//! The dashboard runs with its defaults (counts shared for 2 s, pages of 50).
#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use sqlx::{Connection, PgConnection};
use tenure::{DynStore, QueueName};
use tenure_benches::{drain, seed, seed_backlog, DrainSpec};
use tenure_dashboard::{router, DashboardConfig};
use tower::ServiceExt;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// Ten tabs refreshing every second until `stop`; answers how many pages they loaded.
fn tabs(
    app: &axum::Router,
    queue: &QueueName,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<u64>> {
    let pages = [
        "/".to_owned(),
        format!("/queues/{queue}?state=ready"),
        "/leases".to_owned(),
    ];
    (0..10)
        .map(|i| {
            let app = app.clone();
            let path = pages[[0, 0, 0, 0, 1, 1, 1, 2, 2, 2][i]].clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                // Tabs opened at different moments: spread over the second.
                tokio::time::sleep(Duration::from_millis(100 * i as u64)).await;
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                let mut loaded = 0;
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    let req = Request::get(&path).body(Body::empty()).expect("request");
                    match app.clone().oneshot(req).await {
                        Ok(res) if res.status().is_success() => {
                            let _ = axum::body::to_bytes(res.into_body(), usize::MAX).await;
                            loaded += 1;
                        }
                        Ok(res) => eprintln!("tab {i}: {path} answered {}", res.status()),
                        Err(e) => eprintln!("tab {i}: {e}"),
                    }
                }
                loaded
            })
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backlog = env_usize("TENURE_DASH_BENCH_BACKLOG", 1_000_000);
    let items = env_usize("TENURE_DASH_BENCH_ITEMS", 100_000);
    let rounds = env_usize("TENURE_DASH_BENCH_ROUNDS", 3);
    let workers = env_usize("TENURE_DASH_BENCH_WORKERS", 4);
    let batch = env_usize("TENURE_DASH_BENCH_BATCH", 10);
    let pg = std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let schema = format!("tdb_{}", uuid::Uuid::now_v7().simple());
    let store: DynStore = tenure::open(&format!("{pg}?tenure_schema={schema}")).await?;
    let queue = QueueName::new("bench")?;

    let started = Instant::now();
    seed_backlog(&store, &queue, backlog).await?;
    println!(
        "backlog: {backlog} items scheduled a week out, seeded in {:.1?}",
        started.elapsed()
    );
    let app = router(store.clone(), DashboardConfig::new());
    let loaded = Arc::new(AtomicU64::new(0));

    let mut alone = Vec::new();
    let mut beside = Vec::new();
    for round in 0..rounds * 2 {
        let with_dashboard = round % 2 == 1;
        seed(&store, &queue, items).await?;
        // Every round starts from a vacuumed table (not timed), as the store benches
        // do: the rows the last round deleted would otherwise slow each round more
        // than the one before, and the comparison with them.
        let mut admin = PgConnection::connect(&pg).await?;
        sqlx::query(&format!("VACUUM ANALYZE {schema}.items"))
            .execute(&mut admin)
            .await?;
        drop(admin);
        let stop = Arc::new(AtomicBool::new(false));
        let open = if with_dashboard {
            tabs(&app, &queue, &stop)
        } else {
            Vec::new()
        };
        let spec = DrainSpec::new(queue.clone(), items, batch, workers);
        let d = drain(&store, &spec).await?;
        stop.store(true, Ordering::Relaxed);
        for t in open {
            loaded.fetch_add(t.await.unwrap_or(0), Ordering::Relaxed);
        }
        let rate = items as f64 / d.elapsed.as_secs_f64();
        println!(
            "round {}: {} {:>9.0} claims/s ({items} items in {:.2?})",
            round + 1,
            if with_dashboard {
                "beside the dashboard"
            } else {
                "alone               "
            },
            rate,
            d.elapsed
        );
        if with_dashboard {
            beside.push(rate);
        } else {
            alone.push(rate);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (a, b) = (median(&mut alone), median(&mut beside));
    println!(
        "claims/s: alone {a:.0}, beside a dashboard with 10 tabs refreshing every second {b:.0}; ratio {:.3} (goal >= 0.95); {} pages loaded",
        b / a,
        loaded.load(Ordering::Relaxed)
    );

    drop(app);
    drop(store);
    let mut admin = PgConnection::connect(&pg).await?;
    tenure_test_support::postgres::drop_schema(&mut admin, &schema).await;
    Ok(())
}
