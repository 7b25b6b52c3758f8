//! Embedded migrations, kept in our own bookkeeping table.
//!
//! Each migration is SQL with the schema name substituted (the name was validated with
//! [`tenure_core::validate_identifier`] before any statement runs). Applied versions are
//! recorded in `<schema>.tenure_migrations`, never in `_sqlx_migrations`, so an
//! application's own sqlx migrations and ours never see each other. Concurrent
//! migrators of one schema are serialised by a transaction-scoped advisory lock; the
//! whole run is one transaction, so a failed migration leaves nothing behind.
//!
//! An index a migration adds to the hot table of an existing schema is built first,
//! with `CREATE INDEX CONCURRENTLY` outside any transaction ([`build_concurrently`]),
//! so claims and finalizes go on while it builds; the migration's own
//! `CREATE INDEX IF NOT EXISTS` then finds it. On a new schema (the table created in
//! the same run, empty) the plain statement builds it in the migration's transaction.
//! A concurrent build that was interrupted (a killed process, a cancelled statement)
//! leaves an INVALID index behind, which the next run drops and builds again; a build
//! in progress in another session (another migrator) is waited for instead.

use std::time::Duration;

use sqlx::{PgPool, Postgres, Transaction};
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

/// The indexes of `items` that a migration's SQL creates with
/// `CREATE INDEX IF NOT EXISTS` and that are built concurrently before that migration
/// when the table already exists, by migration version.
const CONCURRENT_INDEXES: &[(i32, ConcurrentIndex)] = &[
    (
        4,
        ConcurrentIndex {
            name: "items_list",
            on_items: "(queue, state, seq)",
        },
    ),
    (
        11,
        ConcurrentIndex {
            name: "items_running_limit",
            on_items: "(queue, limit_key) WHERE state = 'running' AND limit_key IS NOT NULL",
        },
    ),
    (
        14,
        ConcurrentIndex {
            name: "items_claim_key",
            on_items: "(queue, limit_key, priority, run_at, seq) \
                       WHERE state = 'ready' AND head AND (limit_key IS NOT NULL OR lq)",
        },
    ),
    (
        15,
        ConcurrentIndex {
            name: "items_claim_fair",
            on_items: "(queue, priority, ftag, run_at, seq) \
                       WHERE state = 'ready' AND head AND ftag IS NOT NULL",
        },
    ),
];

fn concurrent_index(version: i32) -> Option<ConcurrentIndex> {
    CONCURRENT_INDEXES
        .iter()
        .find(|(v, _)| *v == version)
        .map(|(_, ix)| *ix)
}

/// An index built with `CREATE INDEX CONCURRENTLY` ahead of its migration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConcurrentIndex {
    /// The index's name (in the store's schema).
    pub(crate) name: &'static str,
    /// What follows `ON <schema>.items`: the columns and any `WHERE`.
    pub(crate) on_items: &'static str,
}

/// What [`run`] did.
#[derive(Debug)]
pub(crate) enum Step {
    /// Every migration is applied.
    Done,
    /// The migrations before the one that needs this index are committed; build it
    /// with [`build_concurrently`] and run again.
    BuildFirst(ConcurrentIndex),
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
    Migration {
        version: 7,
        name: "stream order: a run's items complete in enqueue order",
        sql: include_str!("../migrations/0007_stream_order.sql"),
    },
    Migration {
        version: 8,
        name: "complete: heads first, the stream-order rule only for what is left",
        sql: include_str!("../migrations/0008_complete_heads_first.sql"),
    },
    Migration {
        version: 9,
        name: "claim cursors: a claim starts past the items claimed before it",
        sql: include_str!("../migrations/0009_claim_cursors.sql"),
    },
    Migration {
        version: 10,
        name: "queue limits: limit keys, limits, rate starts and deferrals",
        sql: include_str!("../migrations/0010_limits.sql"),
    },
    Migration {
        version: 11,
        name: "queue limits: the running items of a queue by limit key",
        sql: include_str!("../migrations/0011_running_limit_index.sql"),
    },
    Migration {
        version: 12,
        name: "claim cursors: the lease floor found without walking finished items",
        sql: include_str!("../migrations/0012_cursor_floor_bounded.sql"),
    },
    Migration {
        version: 13,
        name: "queue limits: the items of limited queues are marked",
        sql: include_str!("../migrations/0013_limited_marks.sql"),
    },
    Migration {
        version: 14,
        name: "queue limits: the ready heads of limited queues by limit key",
        sql: include_str!("../migrations/0014_claim_key_index.sql"),
    },
    Migration {
        version: 15,
        name: "fair shares: the tagged ready heads in fair order",
        sql: include_str!("../migrations/0015_claim_fair_index.sql"),
    },
    Migration {
        version: 16,
        name: "progress: what a holder reports with its renewals",
        sql: include_str!("../migrations/0016_progress.sql"),
    },
    Migration {
        version: 17,
        name: "work history: finished, failed and dead per queue and minute",
        sql: include_str!("../migrations/0017_history.sql"),
    },
];

/// The newest schema version this crate migrates to.
pub fn schema_version() -> i32 {
    latest()
}

/// The SQL of every migration after version `from` (0 for a new schema) for
/// `schema`, for an application that applies migrations with its own tool. Each
/// migration is followed by the row that records it in `<schema>.tenure_migrations`,
/// so [`PgStore::migrate`](crate::PgStore::migrate) later sees it as applied; run the script in one
/// transaction. The schema name is validated first.
///
/// # Errors
/// [`Error::InvalidInput`](tenure_core::Error) naming `schema` or `from`.
pub fn migration_script(schema: &str, from: i32) -> tenure_core::Result<String> {
    script(schema, from)
}

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
/// and commits. Stops (committing the migrations before it) at a missing migration
/// whose index must first be built concurrently: the items table existed before this
/// run and the index is not there and valid ([`Step::BuildFirst`]).
pub(crate) async fn run(mut tx: Transaction<'static, Postgres>, schema: &str) -> Result<Step> {
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
    // The items table exists from migration 1 on; created in this run, it is empty.
    let existing_table = applied.contains(&1);
    for m in missing {
        if let Some(ix) = concurrent_index(m.version) {
            if existing_table && !index_valid(&mut tx, schema, ix.name).await? {
                tx.commit().await.map_err(map)?;
                return Ok(Step::BuildFirst(ix));
            }
        }
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
    tx.commit().await.map_err(map)?;
    Ok(Step::Done)
}

/// Whether `schema.name` exists as a valid index (`Some(true)`), exists INVALID (left by
/// a concurrent build that did not finish, or one still in progress: `Some(false)`), or
/// does not exist (`None`).
async fn index_state(
    conn: &mut sqlx::PgConnection,
    schema: &str,
    name: &str,
) -> Result<Option<bool>> {
    sqlx::query_scalar(
        "SELECT i.indisvalid FROM pg_index i \
         JOIN pg_class c ON c.oid = i.indexrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND c.relname = $2",
    )
    .persistent(false)
    .bind(schema)
    .bind(name)
    .fetch_optional(conn)
    .await
    .map_err(map)
}

async fn index_valid(conn: &mut sqlx::PgConnection, schema: &str, name: &str) -> Result<bool> {
    Ok(index_state(conn, schema, name).await? == Some(true))
}

/// How often a migrator looks again while another session builds an index.
const BUILD_POLL: Duration = Duration::from_millis(100);

/// Builds `ix` on `<schema>.items` with `CREATE INDEX CONCURRENTLY`, each statement in
/// autocommit on a pooled connection, so writes to the table go on meanwhile. Takes no
/// lock of its own (a session lock would not survive a transaction-pooling proxy):
///
/// - a valid index is there: done;
/// - an index build is in progress on the table in another session
///   (`pg_stat_progress_create_index`; another migrator): wait for it and look again;
/// - an INVALID index is there and nobody builds: an interrupted build's leftover,
///   dropped with `DROP INDEX CONCURRENTLY`;
/// - no index: `CREATE INDEX CONCURRENTLY IF NOT EXISTS`, and look again.
pub(crate) async fn build_concurrently(
    pool: &PgPool,
    schema: &str,
    ix: ConcurrentIndex,
) -> Result<()> {
    let mut conn = pool.acquire().await.map_err(map)?;
    loop {
        let state = index_state(&mut conn, schema, ix.name).await?;
        if state == Some(true) {
            return Ok(());
        }
        let building: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_progress_create_index \
             WHERE relid = to_regclass($1) AND pid <> pg_backend_pid())",
        )
        .persistent(false)
        .bind(format!("{schema}.items"))
        .fetch_one(&mut *conn)
        .await
        .map_err(map)?;
        if building {
            tokio::time::sleep(BUILD_POLL).await;
            continue;
        }
        let statement = match state {
            Some(_) => format!("DROP INDEX CONCURRENTLY IF EXISTS {schema}.{}", ix.name),
            None => format!(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {schema}.items {}",
                ix.name, ix.on_items
            ),
        };
        tracing::info!(%statement, "tenure-postgres: migrating");
        // A query without arguments goes over the simple protocol, outside any
        // transaction block, as CONCURRENTLY requires.
        sqlx::Executor::execute(&mut *conn, statement.as_str())
            .await
            .map_err(map)?;
    }
}

/// Runs a multi-statement script inside `tx`: a query without arguments goes over the
/// simple query protocol, which accepts several statements.
async fn execute_script(tx: &mut sqlx::PgConnection, script: &str) -> Result<()> {
    sqlx::Executor::execute(tx, script).await.map_err(map)?;
    Ok(())
}
