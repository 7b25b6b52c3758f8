//! The server-side cost of the `postgres_streams` cell (N items over S streams, B = 100,
//! W = 4): the store's drain and the raw head-marker loop (`PgRaw::with_stream_heads`)
//! side by side, round after round, on one schema.
//!
//! ```sh
//! cargo run --release -p tenure-benches --example stream_cost -- [rounds] [n] [streams] [tenure|raw]
//! ```
//!
//! Defaults: 3 rounds of 100,000 items over 1,000 streams, both sides. Each line gives,
//! per 1,000 items: the CPU time of the W server backends that did the work (from
//! `/proc/<pid>/schedstat`, so the server must run on this machine), this process's
//! CPU time, and the deltas of the schema's own counters (`pg_statio_user_tables` and
//! `_indexes` blocks, `pg_stat_user_tables` tuples and scans), read after
//! `pg_stat_force_next_flush()` on every working connection (PostgreSQL 15). Unlike
//! the items/s figure, none of these depends much on what else the machine runs, and
//! the schema's counters are its own whatever other sessions do.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, Postgres, Row};
use tenure_benches::raw::pg::{self as raw, PgRaw};
use tenure_benches::{bench_queue, drain, runtime, seed_streams, DrainSpec, OnEmpty};
use tenure_postgres::{PgConfig, PgStore};

const W: usize = 4;

fn url() -> String {
    std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn cpu_ns(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap_or_default();
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn self_cpu_ns() -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir("/proc/self/task") {
        for t in rd.flatten() {
            let p = t.path().join("schedstat");
            if let Ok(s) = std::fs::read_to_string(p) {
                total += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    total
}

async fn pid(c: &mut PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(c)
        .await
        .expect("stream_cost")
}

async fn flush(c: &mut PgConnection) {
    sqlx::query("SELECT pg_stat_force_next_flush()")
        .execute(c)
        .await
        .expect("stream_cost");
}

type Stats = BTreeMap<String, i64>;

async fn read(reader: &mut PgConnection, schema: &str) -> Stats {
    flush(reader).await;
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut *reader)
        .await
        .expect("stream_cost");
    let mut out = Stats::new();
    let rows = sqlx::query(
        "SELECT relname, coalesce(heap_blks_hit,0)+coalesce(heap_blks_read,0), \
             coalesce(idx_blks_hit,0)+coalesce(idx_blks_read,0) \
         FROM pg_statio_user_tables WHERE schemaname = $1",
    )
    .bind(schema)
    .fetch_all(&mut *reader)
    .await
    .expect("stream_cost");
    for r in rows {
        let n: String = r.get(0);
        out.insert(format!("heapblk {n}"), r.get(1));
        out.insert(format!("idxblk {n}"), r.get(2));
    }
    let rows = sqlx::query(
        "SELECT relname, n_tup_upd, n_tup_hot_upd, n_tup_del, seq_scan, coalesce(idx_scan,0) \
         FROM pg_stat_user_tables WHERE schemaname = $1",
    )
    .bind(schema)
    .fetch_all(&mut *reader)
    .await
    .expect("stream_cost");
    for r in rows {
        let n: String = r.get(0);
        out.insert(format!("upd {n}"), r.get(1));
        out.insert(format!("hotupd {n}"), r.get(2));
        out.insert(format!("del {n}"), r.get(3));
        out.insert(format!("seqscan {n}"), r.get(4));
        out.insert(format!("idxscan {n}"), r.get(5));
    }
    let rows = sqlx::query(
        "SELECT indexrelname, coalesce(idx_blks_hit,0)+coalesce(idx_blks_read,0) \
         FROM pg_statio_user_indexes WHERE schemaname = $1",
    )
    .bind(schema)
    .fetch_all(&mut *reader)
    .await
    .expect("stream_cost");
    for r in rows {
        let n: String = r.get(0);
        out.insert(format!("blk {n}"), r.get(1));
    }
    out
}

fn report(
    name: &str,
    n: usize,
    before: &Stats,
    after: &Stats,
    server: u64,
    client: u64,
    wall: Duration,
) {
    let k = 1000.0 / n as f64;
    print!(
        "{name}: {:.0} items/s, server cpu {:.2} ms/1k, client cpu {:.2} ms/1k;",
        n as f64 / wall.as_secs_f64(),
        server as f64 / 1e6 * k,
        client as f64 / 1e6 * k
    );
    for (key, v) in after {
        let d = v - before.get(key).copied().unwrap_or(0);
        if d != 0 {
            print!(" {key}={:.0}", d as f64 * k);
        }
    }
    println!();
}

async fn vacuum(admin: &mut PgConnection, schema: &str) {
    for t in ["items", "streams"] {
        sqlx::Executor::execute(&mut *admin, format!("VACUUM ANALYZE {schema}.{t}").as_str())
            .await
            .expect("stream_cost");
    }
}

async fn run() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args
        .get(1)
        .map(|a| a.parse().expect("stream_cost"))
        .unwrap_or(3);
    let n: usize = args
        .get(2)
        .map(|a| a.parse().expect("stream_cost"))
        .unwrap_or(100_000);
    let streams: usize = args
        .get(3)
        .map(|a| a.parse().expect("stream_cost"))
        .unwrap_or(1_000);
    let only: Option<String> = args.get(4).cloned();
    let mut admin = PgConnection::connect(&url()).await.expect("stream_cost");
    let mut reader = PgConnection::connect(&url()).await.expect("stream_cost");
    let schema = format!("bench_{}", uuid::Uuid::now_v7().simple());
    let store = PgStore::connect(
        PgConfig::new(url())
            .schema(&schema)
            .max_connections(W as u32)
            .listen(false),
    )
    .await
    .expect("stream_cost");
    let q = bench_queue().expect("stream_cost");
    if let Ok(f) = std::env::var("VARIANT") {
        let sql = std::fs::read_to_string(f)
            .expect("stream_cost")
            .replace("__SCHEMA__", &schema);
        sqlx::Executor::execute(&mut admin, sql.as_str())
            .await
            .expect("stream_cost");
    }
    for round in 0..rounds {
        if only.as_deref() != Some("raw") {
            if std::env::var("VARIANT").is_ok() {
                sqlx::Executor::execute(
                    &mut admin,
                    format!("DELETE FROM {schema}.streams").as_str(),
                )
                .await
                .expect("stream_cost");
            }
            seed_streams(&store, &q, n, streams)
                .await
                .expect("stream_cost");
            vacuum(&mut admin, &schema).await;
            let mut held: Vec<PoolConnection<Postgres>> = Vec::new();
            for _ in 0..W {
                held.push(store.pool().acquire().await.expect("stream_cost"));
            }
            let mut pids = Vec::new();
            for c in &mut held {
                flush(c).await;
                pids.push(pid(c).await);
            }
            drop(held);
            let before = read(&mut reader, &schema).await;
            let cpu0: u64 = pids.iter().map(|p| cpu_ns(*p)).sum();
            let me0 = self_cpu_ns();
            let spec = DrainSpec::new(q.clone(), n, 100, W).on_empty(OnEmpty::Retry {
                pause: Duration::from_millis(1),
                give_up_after: 1_000,
            });
            let t = Instant::now();
            drain(&store, &spec).await.expect("stream_cost");
            let wall = t.elapsed();
            let me1 = self_cpu_ns();
            let cpu1: u64 = pids.iter().map(|p| cpu_ns(*p)).sum();
            let mut held: Vec<PoolConnection<Postgres>> = Vec::new();
            for _ in 0..W {
                held.push(store.pool().acquire().await.expect("stream_cost"));
            }
            let mut pids2 = Vec::new();
            for c in &mut held {
                flush(c).await;
                pids2.push(pid(c).await);
            }
            drop(held);
            pids2.sort();
            let mut p1 = pids.clone();
            p1.sort();
            if p1 != pids2 {
                println!("(pool changed connections)");
            }
            let after = read(&mut reader, &schema).await;
            report(
                &format!("r{round} tenure"),
                n,
                &before,
                &after,
                cpu1 - cpu0,
                me1 - me0,
                wall,
            );
        }
        if only.as_deref() != Some("tenure") {
            seed_streams(&store, &q, n, streams)
                .await
                .expect("stream_cost");
            vacuum(&mut admin, &schema).await;
            let mut conns = Vec::new();
            let mut pids = Vec::new();
            for _ in 0..W {
                let mut c = PgConnection::connect(&url()).await.expect("stream_cost");
                flush(&mut c).await;
                pids.push(pid(&mut c).await);
                conns.push(c);
            }
            let before = read(&mut reader, &schema).await;
            let cpu0: u64 = pids.iter().map(|p| cpu_ns(*p)).sum();
            let me0 = self_cpu_ns();
            let t = Instant::now();
            let (_, mut conns) = raw::drain(&PgRaw::with_stream_heads(&schema), conns, n, 100)
                .await
                .expect("stream_cost");
            let wall = t.elapsed();
            let me1 = self_cpu_ns();
            let cpu1: u64 = pids.iter().map(|p| cpu_ns(*p)).sum();
            for c in &mut conns {
                flush(c).await;
            }
            let after = read(&mut reader, &schema).await;
            report(
                &format!("r{round} raw"),
                n,
                &before,
                &after,
                cpu1 - cpu0,
                me1 - me0,
                wall,
            );
            for c in conns {
                c.close().await.expect("stream_cost");
            }
            sqlx::Executor::execute(&mut admin, format!("DELETE FROM {schema}.streams").as_str())
                .await
                .expect("stream_cost");
        }
    }
    store.close().await;
    tenure_test_support::postgres::drop_schema(&mut admin, &schema).await;
}

fn main() {
    runtime().expect("stream_cost").block_on(run());
}
