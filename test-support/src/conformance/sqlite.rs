//! The conformance harness of the SQLite store: every case on its own
//! database file in its own temporary directory.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use tempfile::TempDir;
use tenure_conformance::{Guarded, Restore, Snapshot, Unreachable};
use tenure_core::{async_trait, Error, ManualClock, Result};
use tenure_sqlite::{SqliteConfig, SqliteStore};

/// A store plus the directory of its file, removed when the last handle (the case's
/// store and its peers) is dropped.
type CaseStore = Guarded<SqliteStore>;

fn temp_dir() -> Result<TempDir> {
    TempDir::new().map_err(|e| Error::internal("sqlite", e))
}

/// Finished items are kept as `done` rows when the run keeps them ([`run`]).
fn configured(config: SqliteConfig) -> SqliteConfig {
    config.keep_done(KEEP_DONE.load(Ordering::Relaxed))
}

struct SqliteHarness;

#[async_trait]
impl tenure_conformance::Harness for SqliteHarness {
    type Store = CaseStore;

    async fn open(&self, clock: ManualClock) -> Result<CaseStore> {
        let dir = temp_dir()?;
        let store = SqliteStore::open(configured(
            SqliteConfig::new(dir.path().join("case.db")).clock(clock),
        ))
        .await?;
        Ok(Guarded::new(store, dir))
    }

    async fn open_peer(&self, store: &CaseStore, clock: ManualClock) -> Result<CaseStore> {
        // A second open of the same file: its own writer thread and connection, meeting
        // the first at SQLite's lock as another process would.
        let path = store.inner().path();
        let peer = SqliteStore::open(configured(SqliteConfig::new(path).clock(clock))).await?;
        Ok(Guarded::sharing(peer, store))
    }

    async fn open_unreachable(&self, clock: ManualClock) -> Result<Unreachable<CaseStore>> {
        // A store whose file (and directory) was taken away after it opened.
        let dir = temp_dir()?;
        let store =
            SqliteStore::open(SqliteConfig::new(dir.path().join("gone.db")).clock(clock)).await?;
        dir.close().map_err(|e| Error::internal("sqlite", e))?;
        Ok(Unreachable::Store(Guarded::new(store, ())))
    }

    async fn snapshot(&self, store: &CaseStore) -> Result<Snapshot> {
        // A copy of the file beside it (`VACUUM INTO`), read back table by table.
        let path = store.inner().path().to_path_buf();
        let copy = path.with_extension("snapshot.db");
        let conn = rusqlite::Connection::open(&path).map_err(internal)?;
        conn.execute("VACUUM INTO ?1", [copy.to_string_lossy().as_ref()])
            .map_err(internal)?;
        Ok(Snapshot::taken(Rewind { path, copy }))
    }
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::internal("sqlite", e.to_string())
}

/// Puts a database file's rows back as a copy of it holds them, in one transaction.
struct Rewind {
    path: std::path::PathBuf,
    copy: std::path::PathBuf,
}

#[async_trait]
impl Restore for Rewind {
    async fn restore(self: Box<Self>) -> Result<()> {
        let mut conn = rusqlite::Connection::open(&self.path).map_err(internal)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(internal)?;
        conn.execute("ATTACH ?1 AS snap", [self.copy.to_string_lossy().as_ref()])
            .map_err(internal)?;
        let tables: Vec<String> = conn
            .prepare(
                "SELECT name FROM snap.sqlite_schema WHERE type = 'table' \
                 AND name NOT LIKE 'sqlite_%'",
            )
            .and_then(|mut s| {
                s.query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()
            })
            .map_err(internal)?;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(internal)?;
        for t in &tables {
            tx.execute_batch(&format!(
                "DELETE FROM main.\"{t}\"; INSERT INTO main.\"{t}\" SELECT * FROM snap.\"{t}\";"
            ))
            .map_err(internal)?;
        }
        tx.commit().map_err(internal)
    }
}

/// Whether finished items are kept as `done` instead of deleted: the
/// `conformance_keep_done` target runs the suite again with them kept.
static KEEP_DONE: AtomicBool = AtomicBool::new(false);

/// Runs the suite, keeping finished items when `keep_done`.
pub fn run(keep_done: bool) -> ExitCode {
    KEEP_DONE.store(keep_done, Ordering::Relaxed);
    tenure_conformance::main(SqliteHarness)
}
