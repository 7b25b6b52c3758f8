//! A full server restart in the middle of a claim loop. Ignored by default: it needs a
//! server of its own that may be restarted, named by two variables:
//!
//! - `TENURE_CHAOS_URL`: the server's URL;
//! - `TENURE_CHAOS_RESTART`: a shell command that restarts it and returns when it is
//!   accepting connections again (for example `pg_ctl -D ... restart -m fast -w`).
//!
//! Run: `cargo test -p tenure-postgres --test chaos -- --ignored --nocapture`.
//! It prints how long claims took to resume after the restart command returned and
//! asserts it is under 10 s, with every item finalized exactly once.
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tenure_core::*;
use tenure_postgres::{PgConfig, PgStore};

const LEASE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "restarts a server: needs TENURE_CHAOS_URL and TENURE_CHAOS_RESTART"]
async fn claims_resume_within_seconds_after_a_server_restart() {
    let (Ok(url), Ok(restart)) = (
        std::env::var("TENURE_CHAOS_URL"),
        std::env::var("TENURE_CHAOS_RESTART"),
    ) else {
        panic!("set TENURE_CHAOS_URL and TENURE_CHAOS_RESTART");
    };
    let schema = format!("chaos_{}", uuid::Uuid::now_v7().simple());
    let clock = ManualClock::starting_now();
    let store = PgStore::connect(
        PgConfig::new(url.clone())
            .schema(&schema)
            .clock(clock.clone())
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let q = QueueName::new("q").unwrap();
    let total = 40_000;
    let mut ids = Vec::new();
    for _ in 0..4 {
        let items: Vec<NewItem> = (0..total / 4)
            .map(|_| NewItem::new(q.clone(), b"x".to_vec()))
            .collect();
        ids.extend(items.iter().map(|it| it.id));
        store.enqueue(EnqueueParams::new(items)).await.unwrap();
    }
    let accepted: Arc<Mutex<HashMap<ItemId, u32>>> = Arc::default();
    let done = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let last_ok: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..4 {
        let (store, q) = (store.clone(), q.clone());
        let (accepted, done, errors, last_ok, stop) = (
            accepted.clone(),
            done.clone(),
            errors.clone(),
            last_ok.clone(),
            stop.clone(),
        );
        workers.push(tokio::spawn(async move {
            let owner = OwnerId::new(format!("w{w}")).unwrap();
            while !stop.load(Ordering::SeqCst) {
                let leases = match store
                    .claim(ClaimParams::new(q.clone(), owner.clone(), 10, LEASE))
                    .await
                {
                    Ok(l) => l,
                    Err(e) => {
                        assert!(e.is_retryable(), "claim answered {e}");
                        errors.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if leases.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
                match store.complete(CompleteParams::new(tokens.clone())).await {
                    Ok(out) => {
                        let mut acc = accepted.lock().unwrap();
                        for (t, o) in tokens.iter().zip(out) {
                            if o == TokenOutcome::Accepted {
                                *acc.entry(t.id).or_default() += 1;
                                done.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        last_ok.lock().unwrap().push(Instant::now());
                    }
                    Err(e) => {
                        assert!(e.is_retryable(), "complete answered {e}");
                        errors.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }));
    }
    while done.load(Ordering::SeqCst) < 5_000 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = done.load(Ordering::SeqCst);
    let t0 = Instant::now();
    let status = tokio::task::spawn_blocking(move || {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(&restart)
            .status()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(status.success(), "the restart command failed");
    let back = Instant::now();
    println!("restart command took {:?}", back - t0);
    // The first finalize that succeeded after the server was back.
    let resumed = loop {
        if let Some(t) = last_ok.lock().unwrap().iter().find(|t| **t > back) {
            break *t - back;
        }
        assert!(
            back.elapsed() < Duration::from_secs(30),
            "claims never resumed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    println!(
        "claims resumed {resumed:?} after the server was back; {before} items were done \
         before the restart; {} calls answered Unavailable",
        errors.load(Ordering::SeqCst)
    );
    assert!(resumed < Duration::from_secs(10), "{resumed:?}");
    // Drain, recovering the claims whose answers were lost in the restart.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let acc = accepted.lock().unwrap().clone();
        let mut gone = 0;
        if acc.len() >= total - 100 {
            for id in &ids {
                if !acc.contains_key(id) && store.item_get(*id).await.unwrap().is_none() {
                    gone += 1;
                }
            }
            if acc.len() + gone == total {
                break;
            }
            clock.advance(LEASE);
        }
        assert!(Instant::now() < deadline, "items were lost");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }
    let acc = accepted.lock().unwrap().clone();
    assert!(acc.values().all(|n| *n == 1), "an item was finalized twice");
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    sqlx::Executor::execute(&mut admin, format!("DROP SCHEMA {schema} CASCADE").as_str())
        .await
        .unwrap();
}
