//! The conformance harness of the PostgreSQL store: every case on a fresh schema
//! (random suffix), peers as second pools on that schema, unreachable as a pool aimed
//! at a closed port. The schemas are dropped when the run ends.
//!
//! The server comes from `TENURE_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`). When it is missing the run fails if
//! `TENURE_REQUIRE_STORES=1` and is otherwise skipped with a message.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tenure_conformance::{Guarded, Restore, Snapshot, Unreachable};
use tenure_core::{async_trait, ManualClock, Result};
use tenure_postgres::{PgConfig, PgStore};
use tokio::sync::Semaphore;

use crate::postgres::url;

/// Cases whose stores may be alive at once, whatever the test thread count: each holds
/// up to 3 + 2 per peer pooled connections (opened lazily) and one listener, and the
/// server allows 100 connections in all.
const CONCURRENT_CASES: usize = 6;

/// With `TENURE_POSTGRES_PROXY=1` the URL points at a transaction-pooling proxy: no
/// statement cache, no LISTEN. Finished items are kept as `done` rows when the run
/// keeps them ([`run`]).
fn behind_proxy(config: PgConfig) -> PgConfig {
    let on = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
    let config = config.keep_done(KEEP_DONE.load(Ordering::Relaxed));
    if on("TENURE_POSTGRES_PROXY") {
        config.statement_cache(false).listen(false)
    } else {
        config
    }
}

/// A case's store; its permit is given back when the case's last handle is dropped.
type CaseStore = Guarded<PgStore>;

struct PgHarness {
    slots: Arc<Semaphore>,
    schemas: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl tenure_conformance::Harness for PgHarness {
    type Store = CaseStore;

    async fn open(&self, clock: ManualClock) -> Result<CaseStore> {
        let permit = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| tenure_core::Error::internal("postgres", e))?;
        let schema = format!("c_{}", uuid::Uuid::now_v7().simple());
        if let Ok(mut s) = self.schemas.lock() {
            s.push(schema.clone());
        }
        let store = PgStore::connect(behind_proxy(
            PgConfig::new(url())
                .schema(&schema)
                .clock(clock)
                .max_connections(3)
                .acquire_timeout(Duration::from_secs(20)),
        ))
        .await?;
        Ok(Guarded::new(store, permit))
    }

    async fn open_peer(&self, store: &CaseStore, clock: ManualClock) -> Result<CaseStore> {
        let peer = PgStore::connect(behind_proxy(
            PgConfig::new(url())
                .schema(store.inner().schema())
                .clock(clock)
                .max_connections(2)
                .acquire_timeout(Duration::from_secs(20))
                .listen(false)
                .migrate_on_connect(false),
        ))
        .await?;
        Ok(Guarded::sharing(peer, store))
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<CaseStore>> {
        // Port 1 refuses connections; construction is lazy, every call answers
        // Unavailable within the acquire timeout.
        let store = PgStore::connect(
            PgConfig::new("postgres://postgres@127.0.0.1:1/test")
                .clock(clock)
                .acquire_timeout(Duration::from_millis(500))
                .listen(false)
                .migrate_on_connect(false),
        )
        .await?;
        let permit = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| tenure_core::Error::internal("postgres", e))?;
        Ok(Unreachable::Store(Guarded::new(store, permit)))
    }

    async fn snapshot(&self, store: &CaseStore) -> Result<Snapshot> {
        // Every table of the schema copied into a schema of its own.
        let schema = store.inner().schema().to_owned();
        let snap = format!("{schema}_snap");
        if let Ok(mut s) = self.schemas.lock() {
            s.push(snap.clone());
        }
        run_script(&format!(
            "DO $$ DECLARE t text; BEGIN
                 CREATE SCHEMA {snap};
                 FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = '{schema}' LOOP
                     EXECUTE format('CREATE TABLE %I.%I AS TABLE %I.%I',
                         '{snap}', t, '{schema}', t);
                 END LOOP;
             END $$"
        ))
        .await?;
        Ok(Snapshot::taken(Rewind { schema, snap }))
    }
}

fn internal(e: impl std::fmt::Display) -> tenure_core::Error {
    tenure_core::Error::internal("postgres", e.to_string())
}

/// Runs an SQL script on a connection of its own (the snapshot and its restore).
async fn run_script(sql: &str) -> Result<()> {
    // A pool of one: `&PgPool` is an executor for every lifetime, as the async trait's
    // `Send` future needs.
    let conn = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url())
        .await
        .map_err(internal)?;
    sqlx::raw_sql(sql).execute(&conn).await.map_err(internal)?;
    conn.close().await;
    Ok(())
}

/// Puts a schema's rows back as its snapshot schema holds them, in one transaction.
struct Rewind {
    schema: String,
    snap: String,
}

#[async_trait]
impl Restore for Rewind {
    async fn restore(self: Box<Self>) -> Result<()> {
        let (schema, snap) = (&self.schema, &self.snap);
        run_script(&format!(
            "DO $$ DECLARE t text; BEGIN
                 EXECUTE (SELECT 'TRUNCATE ' || string_agg(format('%I.%I', '{schema}', tablename), ', ')
                          FROM pg_tables WHERE schemaname = '{snap}');
                 FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = '{snap}' LOOP
                     EXECUTE format('INSERT INTO %I.%I OVERRIDING SYSTEM VALUE SELECT * FROM %I.%I',
                         '{schema}', t, '{snap}', t);
                 END LOOP;
             END $$"
        ))
        .await?;
        Ok(())
    }
}

/// Runs `f` with a direct connection on a small runtime of its own.
fn with_admin<T>(f: impl AsyncFnOnce(&mut PgConnection) -> T) -> std::result::Result<T, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut conn = PgConnection::connect(&url())
            .await
            .map_err(|e| e.to_string())?;
        Ok(f(&mut conn).await)
    })
}

/// Whether finished items are kept as `done` instead of deleted: the
/// `conformance_keep_done` target runs the suite again with them kept.
static KEEP_DONE: AtomicBool = AtomicBool::new(false);

/// Runs the suite, keeping finished items when `keep_done`.
pub fn run(keep_done: bool) -> ExitCode {
    KEEP_DONE.store(keep_done, Ordering::Relaxed);
    if let Err(e) = with_admin(async |_| ()) {
        return super::server_missing("PostgreSQL", &url(), "TENURE_POSTGRES_URL", &e);
    }
    let schemas = Arc::new(Mutex::new(Vec::new()));
    let code = tenure_conformance::main(PgHarness {
        slots: Arc::new(Semaphore::new(CONCURRENT_CASES)),
        schemas: schemas.clone(),
    });
    let names = schemas.lock().map(|s| s.clone()).unwrap_or_default();
    let dropped = with_admin(async |conn| {
        for chunk in names.chunks(50) {
            let sql = chunk
                .iter()
                .map(|s| format!("DROP SCHEMA IF EXISTS {s} CASCADE;"))
                .collect::<String>();
            sqlx::Executor::execute(&mut *conn, sql.as_str()).await?;
        }
        Ok::<(), sqlx::Error>(())
    });
    match dropped {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("could not drop the case schemas: {e}"),
        Err(e) => eprintln!("could not drop the case schemas: {e}"),
    }
    code
}
