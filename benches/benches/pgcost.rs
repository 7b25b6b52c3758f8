//! Database cost per 1,000 items on PostgreSQL: the burn-down drain of the `postgres`
//! bench (N = 2,000 at B = 1, 20,000 at B = 100; W = 4), library and raw loop side by
//! side in the same run, read from `pg_stat_database` for the test database.
//!
//! Counters: `xact_commit`, `blks_hit + blks_read` (buffer accesses), and
//! `tup_inserted`, `tup_updated`, `tup_deleted`, `tup_fetched`, each as a delta around
//! the drain divided by N / 1,000.
//!
//! Getting a correct delta: a backend keeps its counters to itself and flushes them to
//! shared memory at a transaction's end at most once a second (or when it exits, or
//! after a while idle), so a read right after a drain misses part of it and a read
//! right before may still receive the seeding's. So every connection that works is
//! opened and warmed before the drain (the store's pool is filled to W connections, the
//! raw loop opens its W connections), and each of them, and the reading connection,
//! runs `SELECT pg_stat_force_next_flush()` (PostgreSQL 15) before the first read and
//! again after the drain: the flush happens when that statement's transaction ends,
//! before its answer is sent, so the next read sees everything. The reader calls
//! `pg_stat_clear_snapshot()` before each read. A third read 1.2 s later checks that
//! nothing more arrived; if it did (another session at work on the same database,
//! autovacuum), the line says so and the figures of that cell are not clean; so it does
//! when the delta holds an insert, which no drain makes. The delta
//! includes the few statements the measurement itself runs (the flushes and a read:
//! W + 3 commits per cell, 3.5 per 1,000 items at B = 1).
//!
//! A target of its own rather than part of `sustained`: it measures a drain, not a
//! latency distribution, its reads need a quiet database that a run of the `sustained`
//! bench next to it would disturb, and it runs in seconds on its own.
//!
//! Needs PostgreSQL 15 at `TENURE_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); without it the bench prints why and
//! measures nothing. It uses a fresh schema, dropped at the end. Run:
//! `cargo bench -p tenure-benches --bench pgcost`. Without `--bench` (as `cargo test
//! --benches` runs it) it measures nothing.

use std::fmt;
use std::ops::Sub;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, Postgres, Row};
use tenure_benches::raw::pg::{self as raw, PgRaw};
use tenure_benches::{bench_queue, drain, runtime, seed, DrainSpec, Items, OnEmpty};
use tenure_postgres::{PgConfig, PgStore};

/// The item counts of the `postgres` bench.
const ITEMS: Items = Items {
    single: 2_000,
    batched: 20_000,
};
const WORKERS: usize = 4;

fn url() -> String {
    std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The counters of `pg_stat_database` read for one database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Stat {
    commits: i64,
    blocks: i64,
    inserted: i64,
    updated: i64,
    deleted: i64,
    fetched: i64,
}

impl Sub for Stat {
    type Output = Stat;
    fn sub(self, o: Stat) -> Stat {
        Stat {
            commits: self.commits - o.commits,
            blocks: self.blocks - o.blocks,
            inserted: self.inserted - o.inserted,
            updated: self.updated - o.updated,
            deleted: self.deleted - o.deleted,
            fetched: self.fetched - o.fetched,
        }
    }
}

/// A delta per 1,000 of `items`.
struct PerK(Stat, usize);

impl fmt::Display for PerK {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = |v: i64| v as f64 * 1000.0 / self.1 as f64;
        let s = self.0;
        write!(
            f,
            "| {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            k(s.commits),
            k(s.blocks),
            k(s.inserted),
            k(s.updated),
            k(s.deleted),
            k(s.fetched)
        )
    }
}

async fn flush(conn: &mut PgConnection) {
    sqlx::query("SELECT pg_stat_force_next_flush()")
        .execute(conn)
        .await
        .expect("pg_stat_force_next_flush");
}

/// Flushes the reader's own counters, then reads the database's.
async fn read(reader: &mut PgConnection) -> Stat {
    flush(reader).await;
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut *reader)
        .await
        .expect("pg_stat_clear_snapshot");
    let r = sqlx::query(
        "SELECT xact_commit, blks_hit + blks_read, tup_inserted, tup_updated, tup_deleted, \
             tup_fetched \
         FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut *reader)
    .await
    .expect("pg_stat_database");
    let get = |i: usize| r.get::<i64, _>(i);
    Stat {
        commits: get(0),
        blocks: get(1),
        inserted: get(2),
        updated: get(3),
        deleted: get(4),
        fetched: get(5),
    }
}

/// One measured drain: its row name, its item count, and the reading connection.
struct Cell<'a> {
    name: String,
    items: usize,
    reader: &'a mut PgConnection,
}

impl Cell<'_> {
    /// Prints the delta per 1,000 items, flagged unless it looks like the drain's alone:
    /// no insert in it, and `late` (what the next read saw 1.2 s on) only the reader's
    /// own three statements (flush, clear, read).
    fn report(&self, delta: Stat, late: Stat) {
        let per_k = PerK(delta, self.items);
        // A drain inserts nothing: an insert in the delta is another session's.
        let clean = delta.inserted == 0
            && late.commits <= 3
            && late.inserted + late.updated + late.deleted == 0;
        let late = if clean {
            String::new()
        } else {
            format!("  (not clean: {late:?} arrived after the drain's flush)")
        };
        println!("| {} {per_k}{late}", self.name);
    }
}

async fn store(schema: &str) -> PgStore {
    PgStore::connect(
        PgConfig::new(url())
            .schema(schema)
            .max_connections(u32::try_from(WORKERS).expect("workers"))
            .listen(false),
    )
    .await
    .expect("store")
}

/// Holds every connection of the store's pool (opening them up to W) and flushes each.
async fn flush_pool(store: &PgStore) {
    let mut held: Vec<PoolConnection<Postgres>> = Vec::with_capacity(WORKERS);
    for _ in 0..WORKERS {
        held.push(store.pool().acquire().await.expect("acquire"));
    }
    for c in &mut held {
        flush(c).await;
    }
}

async fn seed_and_vacuum(store: &PgStore, admin: &mut PgConnection, n: usize) {
    seed(store, &bench_queue().expect("queue"), n)
        .await
        .expect("seed");
    for table in ["items", "streams"] {
        let sql = format!("VACUUM ANALYZE {}.{table}", store.schema());
        sqlx::Executor::execute(&mut *admin, sql.as_str())
            .await
            .expect("vacuum");
    }
}

async fn tenure_cell(cell: Cell<'_>, store: &PgStore, admin: &mut PgConnection, batch: usize) {
    let n = cell.items;
    seed_and_vacuum(store, admin, n).await;
    flush(admin).await;
    flush_pool(store).await;
    let before = read(cell.reader).await;
    // As in the `postgres` bench: a worker stops once every item has finished.
    let spec =
        DrainSpec::new(bench_queue().expect("queue"), n, batch, WORKERS).on_empty(OnEmpty::Retry {
            pause: Duration::from_millis(1),
            give_up_after: 1_000,
        });
    drain(store, &spec).await.expect("drain");
    flush_pool(store).await;
    let after = read(cell.reader).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let later = read(cell.reader).await;
    cell.report(after - before, later - after);
}

async fn raw_cell(cell: Cell<'_>, store: &PgStore, admin: &mut PgConnection, batch: usize) {
    let n = cell.items;
    seed_and_vacuum(store, admin, n).await;
    flush(admin).await;
    flush_pool(store).await;
    let mut conns = Vec::with_capacity(WORKERS);
    for _ in 0..WORKERS {
        let mut c = PgConnection::connect(&url()).await.expect("connect");
        flush(&mut c).await;
        conns.push(c);
    }
    let before = read(cell.reader).await;
    let (_, mut conns) = raw::drain(&PgRaw::new(store.schema()), conns, n, batch)
        .await
        .expect("raw drain");
    for c in &mut conns {
        flush(c).await;
    }
    let after = read(cell.reader).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let later = read(cell.reader).await;
    for c in conns {
        c.close().await.expect("close");
    }
    cell.report(after - before, later - after);
}

async fn run() {
    let mut admin = match PgConnection::connect(&url()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "pgcost skipped: PostgreSQL at {} is unreachable: {e}",
                url()
            );
            return;
        }
    };
    let mut reader = PgConnection::connect(&url()).await.expect("reader");
    let others: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND backend_type = 'client backend' \
             AND pid <> pg_backend_pid()",
    )
    .fetch_one(&mut reader)
    .await
    .expect("pg_stat_activity");
    let schema = format!("bench_{}", uuid::Uuid::now_v7().simple());
    let store = store(&schema).await;
    println!(
        "pgcost: per 1,000 items, W = {WORKERS}; {} other client sessions were connected to \
         the database at the start (the bench's own admin connection among them)",
        others
    );
    println!();
    println!("| cell | commits | buffer accesses | inserted | updated | deleted | fetched |");
    println!("|---|---|---|---|---|---|---|");
    for batch in [1usize, 100] {
        let n = ITEMS.for_batch(batch);
        let name = |side: &str| format!("{side} B={batch} (N={n})");
        let cell = Cell {
            name: name("tenure"),
            items: n,
            reader: &mut reader,
        };
        tenure_cell(cell, &store, &mut admin, batch).await;
        let cell = Cell {
            name: name("raw"),
            items: n,
            reader: &mut reader,
        };
        raw_cell(cell, &store, &mut admin, batch).await;
    }
    store.close().await;
    tenure_test_support::postgres::drop_schema(&mut admin, &schema).await;
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("pgcost: measures only under `cargo bench`");
        return;
    }
    runtime().expect("runtime").block_on(run());
}
