//! [`SqliteStore`]: the type, its own calls (open, close, connection, ...), and its
//! [`Base`] impl.
//!
//! Each group of the contract is implemented in the file of that group ([`claim`],
//! [`finalize`], [`recovery`], [`instances`], [`inspect`], [`limits`]); [`Store`] comes
//! from core, which validates the params first. Each method runs its SQL (in `ops`) on
//! the writer's connection: the hot calls through [`Writer::call_inline`], the rest
//! through [`Writer::call`].

mod claim;
mod finalize;
mod history;
mod inspect;
mod instances;
mod limits;
mod recovery;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use tenure_core::contract::Base;
use tenure_core::{Capabilities, Limits, Result, WakeSignal};

// The docs name it.
#[cfg(doc)]
use tenure_core::Store;

// The docs name it.
#[cfg(doc)]
use tenure_core::Error;

use crate::error::{Phase, STORE};
use crate::writer::Writer;
use crate::{schema, SqliteConfig};

struct Inner {
    config: SqliteConfig,
    writer: Writer,
    wake: WakeSignal,
    /// Limits were set, read or listed through this handle (G16): a finish may free a
    /// slot a worker waits for, so finishes fire the wake signal.
    limited: std::sync::atomic::AtomicBool,
}

/// A Tenure store in an SQLite file.
///
/// Cloning gives another handle onto the same store: the same writer thread and the
/// same wake signal. A second [`SqliteStore::open`] of the same path is a separate
/// store (a peer) with its own writer, meeting the first at SQLite's lock, exactly as
/// another process would.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.config.path)
            .field("synchronous", &self.inner.config.synchronous)
            .field("keep_done", &self.inner.config.keep_done)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if missing) the database file, creates or migrates the schema,
    /// and starts the writer thread.
    ///
    /// Async: the file work happens on the writer thread, so opening never blocks the
    /// runtime. It needs no particular runtime.
    ///
    /// # Errors
    /// - [`Error::InvalidInput`] naming `path`: the file cannot be opened for writing
    ///   (missing directory, a directory, no permission) or is not an SQLite database.
    /// - [`Error::Conflict`] (`schema`): the file's schema is newer than this crate.
    /// - [`Error::Unavailable`]: the database stayed busy, or the disk failed.
    /// - [`Error::Corrupt`]: the file is damaged (naming it and what `PRAGMA
    ///   quick_check` finds), or it is empty beside a non-empty `-wal` log (see the
    ///   crate docs, "Damaged and emptied files").
    ///
    /// In each error case nothing was written to the file.
    pub async fn open(config: SqliteConfig) -> Result<SqliteStore> {
        let writer = Writer::start(config.clone()).await?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                config,
                writer,
                wake: WakeSignal::new(),
                limited: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.config.path
    }

    /// Checkpoints the write-ahead log into the database file and truncates it, then
    /// closes the store's connection, so a stopped program leaves the database in one
    /// file (SQLite removes an empty `-wal` and the `-shm` when the last connection to
    /// the file closes). Waits for the calls in flight. Call it when the program is
    /// done with the store: the writer thread otherwise holds its connection until the
    /// process exits, which leaves the log (up to about 4 MB) beside the file.
    ///
    /// Any handle may close; a later call on any handle opens the file again (without
    /// creating it).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when another connection to the file (a peer, or one of
    /// [`SqliteStore::connection`]) was reading, so the log could not be truncated;
    /// the connection is closed all the same. Other errors as for any call.
    pub async fn close(&self) -> Result<()> {
        self.inner.writer.close().await
    }

    /// The configuration this store was opened with.
    pub fn config(&self) -> &SqliteConfig {
        &self.inner.config
    }

    /// Opens a new connection to the same file with the store's settings (WAL, busy
    /// timeout, synchronous level), for the application's own transactions, such as
    /// the ones [`SqliteStore::enqueue_in_tx`] and [`SqliteStore::complete_in_tx`]
    /// join. Blocking (a file open).
    ///
    /// Start write transactions on it with
    /// `conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)`: a
    /// deferred transaction that reads first and writes later can fail with a busy
    /// error at once instead of waiting.
    pub fn connection(&self) -> Result<rusqlite::Connection> {
        let conn = schema::connect(&self.inner.config, false)?;
        schema::tune(&conn, &self.inner.config, Phase::Call)?;
        Ok(conn)
    }

    /// Fires the wake signal, as an enqueue through this handle does. Call it after
    /// committing a transaction that used [`SqliteStore::enqueue_in_tx`].
    pub fn notify_enqueued(&self) {
        self.inner.wake.notify();
    }

    fn limits_ref(&self) -> &Limits {
        &self.inner.config.limits
    }
}

impl Base for SqliteStore {
    fn name(&self) -> &'static str {
        STORE
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
            .with_partitioned_claiming()
            .with_stream_runs()
            .with_limits()
            .with_fair_shares()
    }

    fn limits(&self) -> Limits {
        self.inner.config.limits
    }

    /// Enqueues through this handle and its clones fire it. Its health is always
    /// [`WakeHealth::Local`](tenure_core::WakeHealth::Local): it never goes down, but
    /// other processes (or other [`SqliteStore::open`]s) writing the same file do not
    /// fire it, so workers keep their tight poll.
    fn wake_signal(&self) -> Option<WakeSignal> {
        Some(self.inner.wake.clone())
    }
}
