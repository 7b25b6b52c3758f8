//! Embedded migrations, kept in our own bookkeeping table.
//!
//! Each migration is SQL with the schema name substituted (the name was validated with
//! [`tenure_core::validate_identifier`] before any statement runs). Applied versions are
//! recorded in `<schema>.tenure_migrations`, never in `_sqlx_migrations`, so an
//! application's own sqlx migrations and ours never see each other. Concurrent
//! migrators of one schema are serialised by a transaction-scoped advisory lock; the
//! whole run is one transaction, so a failed migration leaves nothing behind.

use sqlx::{Postgres, Transaction};
use tenure_core::{Error, Result};

use crate::error::map;

/// One embedded migration.
pub(crate) struct Migration {
    /// Applied in ascending order; never reused.
    pub(crate) version: i32,
    /// A short description, recorded with the version.
    pub(crate) name: &'static str,
    /// The SQL, with `__SCHEMA__` standing for the schema name.
    pub(crate) sql: &'static str,
}

/// Every migration this code knows, oldest first.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "items, streams, dedup keys, instances, leader leases",
        sql: include_str!("../migrations/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "complete in one round trip, stream heads included",
        sql: include_str!("../migrations/0002_complete_function.sql"),
    },
    Migration {
        version: 3,
        name: "partitioned claiming: partition hashes and stream pins",
        sql: include_str!("../migrations/0003_partitioned_claiming.sql"),
    },
    Migration {
        version: 4,
        name: "operators: the listing index and paused queues",
        sql: include_str!("../migrations/0004_operate.sql"),
    },
    Migration {
        version: 5,
        name: "stream heads: a finish writes its stream's row only when it empties it",
        sql: include_str!("../migrations/0005_stream_heads.sql"),
    },
    Migration {
        version: 6,
        name: "lease ids: every fence checks the lease a claim minted",
        sql: include_str!("../migrations/0006_lease_ids.sql"),
    },
];

/// The newest version this code knows.
pub(crate) fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// The SQL of migrations after `from` for `schema`, with the bookkeeping rows that
/// make [`run`] see them as applied. See [`crate::migration_script`].
pub(crate) fn script(schema: &str, from: i32) -> Result<String> {
    tenure_core::validate_identifier("schema", schema)?;
    if from < 0 || from > latest() {
        return Err(Error::invalid(
            "from",
            format!("{from} is not a migration version (0..={})", latest()),
        ));
    }
    let mut out = format!(
        "-- tenure-postgres: schema {schema}, migrations {} to {} (apply in one transaction)\n\
         CREATE SCHEMA IF NOT EXISTS {schema};\n\
         CREATE TABLE IF NOT EXISTS {schema}.tenure_migrations (\n    \
             version integer PRIMARY KEY,\n    \
             name text NOT NULL,\n    \
             applied_at timestamptz NOT NULL DEFAULT now()\n\
         );\n",
        from + 1,
        latest()
    );
    for m in MIGRATIONS.iter().filter(|m| m.version > from) {
        out.push_str(&format!(
            "\n-- migration {}: {}\n{}\nINSERT INTO {schema}.tenure_migrations (version, name) VALUES ({}, '{}');\n",
            m.version,
            m.name,
            m.sql.replace("__SCHEMA__", schema).trim_end(),
            m.version,
            m.name.replace('\'', "''"),
        ));
    }
    Ok(out)
}

/// Applies every missing migration to `schema` in `tx`, creating the schema if needed,
/// and commits.
pub(crate) async fn run(mut tx: Transaction<'static, Postgres>, schema: &str) -> Result<()> {
    // Unnamed statements throughout: migrations run rarely, and a named statement
    // would outlive the transaction on a server connection a proxy shares.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
        .persistent(false)
        .bind(format!("tenure-migrate:{schema}"))
        .execute(&mut *tx)
        .await
        .map_err(map)?;
    let bootstrap = format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.tenure_migrations (
             version integer PRIMARY KEY,
             name text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         );"
    );
    execute_script(&mut tx, &bootstrap).await?;
    let applied: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT version FROM {schema}.tenure_migrations ORDER BY version"
    ))
    .persistent(false)
    .fetch_all(&mut *tx)
    .await
    .map_err(map)?;
    if let Some(newest) = applied.last() {
        if *newest > latest() {
            return Err(Error::conflict(
                "schema",
                format!(
                    "schema {schema} is at migration {newest}, newer than this code ({})",
                    latest()
                ),
            ));
        }
    }
    let missing: Vec<&Migration> = MIGRATIONS
        .iter()
        .filter(|m| !applied.contains(&m.version))
        .collect();
    for m in missing {
        execute_script(&mut tx, &m.sql.replace("__SCHEMA__", schema)).await?;
        sqlx::query(&format!(
            "INSERT INTO {schema}.tenure_migrations (version, name) VALUES ($1, $2)"
        ))
        .persistent(false)
        .bind(m.version)
        .bind(m.name)
        .execute(&mut *tx)
        .await
        .map_err(map)?;
    }
    tx.commit().await.map_err(map)
}

/// Runs a multi-statement script inside `tx`: a query without arguments goes over the
/// simple query protocol, which accepts several statements.
async fn execute_script(tx: &mut sqlx::PgConnection, script: &str) -> Result<()> {
    sqlx::Executor::execute(tx, script).await.map_err(map)?;
    Ok(())
}
