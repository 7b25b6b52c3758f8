//! Shared test support: the server URL, skip-or-fail when it is missing, and a fresh
//! schema per test.
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tenure_core::ManualClock;
use tenure_postgres::{PgConfig, PgStore};

/// `TENURE_POSTGRES_URL`, or the local default.
pub fn url() -> String {
    std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// True when a missing server must fail the run (CI sets `TENURE_REQUIRE_STORES=1`).
pub fn required() -> bool {
    std::env::var("TENURE_REQUIRE_STORES").is_ok_and(|v| v == "1")
}

/// A direct connection, or `None` (after saying why) when the server is missing and
/// not required. Panics when it is required.
pub async fn admin() -> Option<PgConnection> {
    match PgConnection::connect(&url()).await {
        Ok(c) => Some(c),
        Err(e) if required() => panic!("PostgreSQL at {} is required: {e}", url()),
        Err(e) => {
            eprintln!(
                "skipped: PostgreSQL at {} is unreachable ({e}); set TENURE_POSTGRES_URL, \
                 or TENURE_REQUIRE_STORES=1 to fail instead",
                url()
            );
            None
        }
    }
}

/// A schema name no other run uses.
pub fn fresh_schema() -> String {
    format!("t_{}", uuid::Uuid::now_v7().simple())
}

/// The config every test starts from: a fresh schema, the given clock, a small pool.
pub fn config(schema: &str, clock: &ManualClock) -> PgConfig {
    PgConfig::new(url())
        .schema(schema)
        .clock(clock.clone())
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(10))
}

/// A store on a fresh schema, dropped again by [`Ctx::finish`].
pub struct Ctx {
    pub store: PgStore,
    pub schema: String,
    pub clock: ManualClock,
    pub admin: PgConnection,
}

impl Ctx {
    pub async fn new() -> Option<Ctx> {
        Ctx::with(|c| c).await
    }

    pub async fn with(f: impl FnOnce(PgConfig) -> PgConfig) -> Option<Ctx> {
        let admin = admin().await?;
        let schema = fresh_schema();
        let clock = ManualClock::starting_now();
        let store = PgStore::connect(f(config(&schema, &clock)))
            .await
            .expect("connect");
        Some(Ctx {
            store,
            schema,
            clock,
            admin,
        })
    }

    /// A second store on the same schema and clock.
    pub async fn peer(&self) -> PgStore {
        PgStore::connect(config(&self.schema, &self.clock))
            .await
            .expect("peer")
    }

    pub async fn finish(mut self) {
        self.store.close().await;
        drop_schema(&mut self.admin, &self.schema).await;
    }
}

pub async fn drop_schema(admin: &mut PgConnection, schema: &str) {
    sqlx::raw_sql(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(admin)
        .await
        .expect("drop schema");
}
