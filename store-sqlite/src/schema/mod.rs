//! The schema, its version, and opening a connection onto it.
//!
//! Every table name starts with `tenure_`, so the store can share a file with the
//! application's own tables (that is what transactional enqueue needs). The schema
//! version lives in `tenure_meta`, not in `PRAGMA user_version`, which belongs to the
//! application.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use tenure_core::{Error, Result};

use crate::config::SqliteConfig;
use crate::error::{self, Phase};

mod versions;

pub(crate) use versions::MIGRATIONS;
pub use versions::SCHEMA_VERSION;

/// The SQL that creates this crate's schema (version [`SCHEMA_VERSION`]) and records
/// its version, for an application that applies schema changes with its own tool.
/// Run it in one transaction on a database without the `tenure_` tables; opening the
/// file with [`SqliteStore::open`](crate::SqliteStore::open) then finds the schema
/// current and changes nothing. Upgrades of an existing file are not SQL alone
/// (version 2 back-fills a hash computed in Rust): open the file with this crate, or
/// run `tenure migrate`.
///
/// It is the statements SQLite itself records for a schema made by the migrations (so
/// it is exactly what opening a new file creates), in creation order.
///
/// # Errors
/// [`Error::Unavailable`] if SQLite cannot build the schema in memory.
pub fn schema_script() -> Result<String> {
    let path = Path::new(":memory:");
    let fail = |e: rusqlite::Error| error::map(&e, path, Phase::Open);
    let conn = Connection::open_in_memory().map_err(fail)?;
    migrate(&conn, path).map_err(fail)?;
    let mut read = conn
        .prepare("SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY rowid")
        .map_err(fail)?;
    let statements = read
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(fail)?
        .collect::<rusqlite::Result<Vec<String>>>()
        .map_err(fail)?;
    let mut out = format!(
        "-- tenure-sqlite schema version {SCHEMA_VERSION}, for a database without it \
         (apply in one transaction)\n"
    );
    for statement in statements {
        out.push_str(&statement);
        out.push_str(";\n");
    }
    out.push_str(&format!(
        "INSERT INTO tenure_meta (key, value) VALUES ('schema_version', {SCHEMA_VERSION});\n"
    ));
    Ok(out)
}

/// Creates the whole current schema on a fresh connection (the unit tests' plans).
#[cfg(test)]
pub(crate) fn create_all(conn: &Connection) -> rusqlite::Result<()> {
    MIGRATIONS.iter().try_for_each(|step| step(conn))
}

/// Opens a connection with the store's settings, without touching the schema.
/// `create` allows creating a missing file (the first open); a reopen after the file
/// went away must not silently start an empty database.
pub(crate) fn connect(config: &SqliteConfig, create: bool) -> Result<Connection> {
    let path = &config.path;
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let phase = if create { Phase::Open } else { Phase::Call };
    let conn = Connection::open_with_flags(path, flags).map_err(|e| error::map(&e, path, phase))?;
    // SQLite silently opens a file it may not write read-only.
    if conn
        .is_readonly(rusqlite::DatabaseName::Main)
        .map_err(|e| error::map(&e, path, phase))?
    {
        let reason = format!("{} cannot be written (opened read-only)", path.display());
        return Err(match phase {
            Phase::Open => Error::invalid("path", reason),
            Phase::Call => Error::unavailable(error::STORE, reason),
        });
    }
    conn.busy_timeout(config.busy_timeout)
        .map_err(|e| error::map(&e, path, phase))?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// Reads the schema version without writing anything: 0 for a file without the store's
/// tables. Fails with a path error for a file that is not a database.
pub(crate) fn read_version(conn: &Connection, path: &Path, phase: Phase) -> Result<i64> {
    let has_meta: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'tenure_meta'",
            [],
            |r| r.get(0),
        )
        .map_err(|e| error::map(&e, path, phase))?;
    if !has_meta {
        return Ok(0);
    }
    let version: Option<i64> = conn
        .query_row(
            "SELECT value FROM tenure_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| error::map(&e, path, phase))?;
    Ok(version.unwrap_or(0))
}

fn newer_error(path: &Path, found: i64) -> Error {
    Error::conflict(
        "schema",
        format!(
            "{} has tenure schema version {found}; this tenure-sqlite understands up to \
             {SCHEMA_VERSION}; upgrade tenure-sqlite",
            path.display()
        ),
    )
}

/// Sets the per-connection pragmas that write (journal mode) or tune (synchronous).
pub(crate) fn tune(conn: &Connection, config: &SqliteConfig, phase: Phase) -> Result<()> {
    let path = &config.path;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(|e| error::map(&e, path, phase))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::invalid(
            "path",
            format!("{} cannot use WAL journaling (got {mode})", path.display()),
        ));
    }
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA temp_store = MEMORY; PRAGMA cache_size = -16384;",
        config.synchronous.pragma()
    ))
    .map_err(|e| error::map(&e, path, phase))
}

/// Checks the version, then creates or migrates the schema. Nothing is written to a
/// file with a newer schema or to one that is not a database.
pub(crate) fn open_and_migrate(config: &SqliteConfig, create: bool) -> Result<Connection> {
    let path = &config.path;
    let phase = if create { Phase::Open } else { Phase::Call };
    if create {
        refuse_emptied(path)?;
    }
    let conn = connect(config, create)?;
    let found = read_version(&conn, path, phase)?;
    if found > SCHEMA_VERSION {
        return Err(newer_error(path, found));
    }
    if !create && found == 0 {
        // A reopen: this file held the store's schema when the store opened it, so a
        // file without it was emptied or replaced. Starting a fresh store here would
        // silently forget every item.
        return Err(Error::corrupt(
            error::STORE,
            format!(
                "database {} no longer holds the store's schema (the file was emptied or \
                 replaced while the store had it open); nothing was written: restore the \
                 file, or open it anew with SqliteStore::open to start an empty store",
                path.display()
            ),
        ));
    }
    tune(&conn, config, phase)?;
    if found == SCHEMA_VERSION {
        return Ok(conn);
    }
    let mut tries = 0;
    loop {
        tries += 1;
        match migrate(&conn, path) {
            Ok(()) => return Ok(conn),
            Err(e) if error::is_busy(&e) && tries < config.busy_retries => continue,
            Err(e) => return Err(error::map(&e, path, phase)),
        }
    }
}

/// Refuses a zero-byte database file beside a non-empty write-ahead log: the log holds
/// pages of a database whose file lost its contents, and opening it would start a
/// fresh store (or replay the log onto nothing). A zero-byte file alone cannot be told
/// from a newly created one, and is initialised as a fresh store.
fn refuse_emptied(path: &Path) -> Result<()> {
    let len = |p: &Path| std::fs::metadata(p).ok().map(|m| m.len());
    if len(path) != Some(0) {
        return Ok(());
    }
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal = Path::new(&wal);
    match len(wal) {
        Some(n) if n > 0 => Err(Error::corrupt(
            error::STORE,
            format!(
                "database {} is empty but its write-ahead log {} holds {n} bytes: the \
                 file lost its contents; nothing was written: restore it from a backup \
                 (or delete both files to start an empty store)",
                path.display(),
                wal.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// Runs the missing migrations in one `BEGIN IMMEDIATE` transaction, re-reading the
/// version under the write lock so two processes opening a new file at once do not
/// both create the tables.
fn migrate(conn: &Connection, path: &Path) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = (|| {
        let found = read_version(conn, path, Phase::Open).unwrap_or(0);
        if found >= SCHEMA_VERSION {
            return Ok(());
        }
        if found == 0 {
            conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS tenure_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
            )?;
        }
        let from = usize::try_from(found).unwrap_or(0);
        for step in &MIGRATIONS[from..] {
            step(conn)?;
        }
        conn.execute(
            "INSERT INTO tenure_meta (key, value) VALUES ('schema_version', ?1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [SCHEMA_VERSION],
        )?;
        Ok(())
    })();
    match result {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

#[cfg(test)]
mod script_tests {
    use super::*;

    fn schema_of(conn: &Connection) -> Vec<(String, String)> {
        let mut read = conn
            .prepare("SELECT name, sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY name")
            .unwrap();
        read.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    #[test]
    fn the_printed_script_makes_the_schema_a_new_file_gets_and_records_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let by_script = Connection::open(dir.path().join("script.db")).unwrap();
        by_script
            .execute_batch(&format!("BEGIN; {} COMMIT;", schema_script().unwrap()))
            .unwrap();
        let config = SqliteConfig::new(dir.path().join("opened.db"));
        let opened = open_and_migrate(&config, true).unwrap();
        assert_eq!(schema_of(&by_script), schema_of(&opened));
        let path = dir.path().join("script.db");
        assert_eq!(
            read_version(&by_script, &path, Phase::Open).unwrap(),
            SCHEMA_VERSION
        );
    }
}
