//! The shared conformance suite against the SQLite store: every case on its own
//! database file in its own temporary directory.

use std::process::ExitCode;

use tempfile::TempDir;
use tenure_conformance::{Guarded, Unreachable};
use tenure_core::{async_trait, Error, ManualClock, Result};
use tenure_sqlite::{SqliteConfig, SqliteStore};

/// A store plus the directory of its file, removed when the last handle (the case's
/// store and its peers) is dropped.
type CaseStore = Guarded<SqliteStore>;

fn temp_dir() -> Result<TempDir> {
    TempDir::new().map_err(|e| Error::internal("sqlite", e))
}

struct SqliteHarness;

#[async_trait]
impl tenure_conformance::Harness for SqliteHarness {
    type Store = CaseStore;

    async fn open(&self, clock: ManualClock) -> Result<CaseStore> {
        let dir = temp_dir()?;
        let store =
            SqliteStore::open(SqliteConfig::new(dir.path().join("case.db")).clock(clock)).await?;
        Ok(Guarded::new(store, dir))
    }

    async fn open_peer(&self, store: &CaseStore, clock: ManualClock) -> Result<CaseStore> {
        // A second open of the same file: its own writer thread and connection, meeting
        // the first at SQLite's lock as another process would.
        let path = store.inner().path();
        let peer = SqliteStore::open(SqliteConfig::new(path).clock(clock)).await?;
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
}

fn main() -> ExitCode {
    tenure_conformance::main(SqliteHarness)
}
