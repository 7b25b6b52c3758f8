//! Tests that need the store's private statements: the claim plan and the claim held
//! open in a transaction. They run against `TENURE_POSTGRES_URL` like the integration
//! tests (skipped with a message when the server is missing, unless
//! `TENURE_REQUIRE_STORES=1`).

use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tenure_core::{
    machine, ClaimParams, Clock, CompleteParams, ManualClock, NewItem, OwnerId, QueueName,
    ScopeKey, Store, StoreExt,
};

use crate::store::ClaimRun;
use crate::{PgConfig, PgStore};

const LEASE: Duration = Duration::from_secs(30);

fn url() -> String {
    std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

async fn admin() -> Option<PgConnection> {
    match PgConnection::connect(&url()).await {
        Ok(c) => Some(c),
        Err(e) if std::env::var("TENURE_REQUIRE_STORES").is_ok_and(|v| v == "1") => {
            panic!("PostgreSQL at {} is required: {e}", url())
        }
        Err(e) => {
            eprintln!("skipped: PostgreSQL at {} is unreachable ({e})", url());
            None
        }
    }
}

async fn open(keep_done: bool) -> Option<(PgStore, PgConnection, String, ManualClock)> {
    let admin = admin().await?;
    let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
    let clock = ManualClock::starting_now();
    let store = PgStore::connect(
        PgConfig::new(url())
            .schema(&schema)
            .clock(clock.clone())
            .max_connections(4)
            .keep_done(keep_done)
            .application_name(&schema),
    )
    .await
    .expect("connect");
    Some((store, admin, schema, clock))
}

async fn drop_schema(admin: &mut PgConnection, schema: &str) {
    sqlx::raw_sql(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(admin)
        .await
        .expect("drop schema");
}

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn owner(name: &str) -> OwnerId {
    OwnerId::new(name).unwrap()
}

/// The claim statement as a prepared statement with literal arguments, explained
/// under `plan_cache_mode` (`force_custom_plan` or `force_generic_plan`).
async fn explain_claim(
    store: &PgStore,
    conn: &mut PgConnection,
    mode: &str,
    now: i64,
    analyze: bool,
) -> String {
    let name = format!("claim_{}", mode.replace('_', ""));
    let prepare = format!(
        "PREPARE {name}(text[], int8, int8, text, int8, bool, int8) AS {}",
        store.sql().claim
    );
    let opts = if analyze {
        "(ANALYZE, BUFFERS, COSTS OFF)"
    } else {
        "(COSTS OFF)"
    };
    let mut tx = conn.begin().await.unwrap();
    sqlx::raw_sql(&format!("SET LOCAL plan_cache_mode = {mode}; {prepare}"))
        .execute(&mut *tx)
        .await
        .unwrap();
    let lines: Vec<String> = sqlx::query_scalar(&format!(
        "EXPLAIN {opts} EXECUTE {name}('{{q}}', {now}, 100, 'explainer', {}, true, 7)",
        now + 30_000_000
    ))
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    // Rolled back: an analyzed claim changes nothing, and the prepared statement goes
    // with the transaction's session state only for this connection.
    tx.rollback().await.unwrap();
    sqlx::raw_sql(&format!("DEALLOCATE {name}"))
        .execute(&mut *conn)
        .await
        .unwrap();
    lines.join("\n")
}

/// The lines of a plan that scan the pick's alias `p`.
fn pick_scans(plan: &str) -> Vec<&str> {
    plan.lines()
        .filter(|l| l.contains(" on items p") && l.contains("Scan"))
        .collect()
}

mod claim_plan;
mod finalize_plan;
mod g06_stalls;
mod g10_scope;
mod g14_partitioned;
mod large_table;
mod report;

/// Compile-time check: the inherent async methods can be spawned on a multi-threaded
/// runtime (their futures are `Send`).
#[allow(dead_code)]
fn futures_are_send(store: &PgStore, conn: &mut sqlx::PgConnection) {
    fn is_send<T: Send>(_: &T) {}
    is_send(&PgStore::connect(PgConfig::new("")));
    is_send(&store.migrate());
    is_send(&store.enqueue_in_tx(conn, tenure_core::EnqueueParams::new(Vec::new())));
    is_send(&store.complete_in_tx(conn, tenure_core::CompleteParams::new(Vec::new())));
    is_send(&store.fail_in_tx(conn, tenure_core::FailParams::new(Vec::new())));
    is_send(&store.release_in_tx(conn, tenure_core::ReleaseParams::new(Vec::new())));
}
