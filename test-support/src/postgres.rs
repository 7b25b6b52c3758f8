//! PostgreSQL fixtures: the server's URL, skip-or-fail when it is missing, a fresh
//! schema per test (dropped on drop) and a store on it.

use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tenure_core::ManualClock;
use tenure_postgres::{PgConfig, PgStore};

/// `TENURE_POSTGRES_URL`, or the local default.
pub fn url() -> String {
    std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// `url` with `tenure_schema=<schema>` added, as `tenure::open` and the CLI read it.
pub fn url_with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}tenure_schema={schema}")
}

/// A direct connection, or `None` (after saying why) when the server is missing and
/// not required. Panics when it is required.
pub async fn admin() -> Option<PgConnection> {
    match PgConnection::connect(&url()).await {
        Ok(c) => Some(c),
        Err(e) => crate::skip(
            &format!("PostgreSQL at {}", url()),
            format!(
                "unreachable ({e}); set TENURE_POSTGRES_URL, or TENURE_REQUIRE_STORES=1 \
                 to fail instead"
            ),
        ),
    }
}

/// A schema name no other run uses.
pub fn fresh_schema() -> String {
    crate::fresh_name("t")
}

/// Drops `schema` and everything in it, if it exists.
pub async fn drop_schema(admin: &mut PgConnection, schema: &str) {
    sqlx::raw_sql(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(admin)
        .await
        .expect("drop schema");
}

/// A fresh schema name on the shared server, dropped (with everything in it) when the
/// value is dropped, also when the test panics. Nothing is created: the store's
/// migrations create the schema on connect.
#[derive(Debug)]
pub struct PgSchema {
    name: String,
    dropped: bool,
}

impl PgSchema {
    /// A fresh schema, or `None` (after saying why) when the server is unreachable and
    /// not required.
    pub async fn new() -> Option<PgSchema> {
        admin().await?;
        Some(PgSchema::named(fresh_schema()))
    }

    /// A schema of a given name, dropped on drop; the server is not asked.
    pub fn named(name: String) -> PgSchema {
        PgSchema {
            name,
            dropped: false,
        }
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's URL naming this schema (`tenure_schema=`).
    pub fn url(&self) -> String {
        url_with_schema(&url(), &self.name)
    }

    /// Drops the schema now.
    pub async fn drop_now(mut self) {
        self.dropped = true;
        if let Ok(mut admin) = PgConnection::connect(&url()).await {
            drop_schema(&mut admin, &self.name).await;
        }
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        let name = std::mem::take(&mut self.name);
        crate::block_on_thread(move || async move {
            if let Ok(mut admin) = PgConnection::connect(&url()).await {
                let sql = format!("DROP SCHEMA IF EXISTS {name} CASCADE");
                if let Err(e) = sqlx::raw_sql(&sql).execute(&mut admin).await {
                    eprintln!("could not drop schema {name}: {e}");
                }
            }
        });
    }
}

/// The config every test starts from: the schema, the given clock, a small pool.
pub fn config(schema: &str, clock: &ManualClock) -> PgConfig {
    PgConfig::new(url())
        .schema(schema)
        .clock(clock.clone())
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(10))
}

/// A store on a fresh schema with a manual clock and a direct connection; the schema
/// is dropped by [`Ctx::finish`], or on drop.
pub struct Ctx {
    /// The store under test.
    pub store: PgStore,
    /// The schema's name.
    pub schema: String,
    /// The store's clock.
    pub clock: ManualClock,
    /// A direct connection to the server, for the test's own statements.
    pub admin: PgConnection,
    guard: PgSchema,
}

impl Ctx {
    /// A store on a fresh schema, or `None` when the server is missing (see [`admin`]).
    pub async fn new() -> Option<Ctx> {
        Ctx::with(|c| c).await
    }

    /// [`Ctx::new`], with the config changed by `f` first.
    pub async fn with(f: impl FnOnce(PgConfig) -> PgConfig) -> Option<Ctx> {
        let admin = admin().await?;
        let guard = PgSchema::named(fresh_schema());
        let schema = guard.name().to_owned();
        let clock = ManualClock::starting_now();
        let store = PgStore::connect(f(config(&schema, &clock)))
            .await
            .expect("connect");
        Some(Ctx {
            store,
            schema,
            clock,
            admin,
            guard,
        })
    }

    /// A second store on the same schema and clock.
    pub async fn peer(&self) -> PgStore {
        PgStore::connect(config(&self.schema, &self.clock))
            .await
            .expect("peer")
    }

    /// Closes the store and drops the schema.
    pub async fn finish(mut self) {
        self.store.close().await;
        drop_schema(&mut self.admin, &self.schema).await;
        self.guard.dropped = true;
    }
}
