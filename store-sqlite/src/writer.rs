//! The writer thread: one connection per opened store, fed through a queue.
//!
//! Every call of a store handle (and of its clones) becomes a [`Job`] on the queue. The
//! thread takes the first job, drains whatever else is already queued (up to
//! `max_batch_jobs`), and runs them all in one `BEGIN IMMEDIATE` transaction, each
//! inside its own savepoint so a failing call rolls back alone. One commit (and, with
//! `synchronous=FULL`, one fsync) then serves the whole batch, and each caller gets its
//! own answer after the commit. Within a process the calls never fight over SQLite's
//! write lock; peers (other processes, other opens) wait for it through the busy
//! timeout, and a transaction that stays busy is retried a bounded number of times.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tenure_core::{Error, ErrorKind, Result};
use tokio::sync::oneshot;

use crate::config::SqliteConfig;
use crate::error::{self, Phase, STORE};
use crate::ops::{Cx, OpError, OpResult};
use crate::schema;

/// What running a job inside the batch did.
pub(crate) enum Step {
    /// Keep its writes.
    Done,
    /// Its answer is an error; undo its writes only.
    Failed,
    /// The transaction is in doubt (busy, I/O): roll the whole batch back.
    Abort(rusqlite::Error),
}

/// One queued call.
pub(crate) trait Job: Send {
    /// False when the caller stopped waiting (its future was dropped): skip the job.
    fn wanted(&self) -> bool;
    /// Runs the call on `conn` at the clock's current time.
    fn run(&mut self, conn: &Connection, config: &SqliteConfig) -> Step;
    /// Sends the answer; `instead` replaces it when the batch did not commit.
    fn finish(self: Box<Self>, instead: Option<Error>);
}

struct Call<T, F> {
    f: F,
    answer: Option<Result<T>>,
    tx: oneshot::Sender<Result<T>>,
}

impl<T, F> Job for Call<T, F>
where
    T: Send + 'static,
    F: FnMut(&Cx<'_>) -> OpResult<T> + Send + 'static,
{
    fn wanted(&self) -> bool {
        !self.tx.is_closed()
    }

    fn run(&mut self, conn: &Connection, config: &SqliteConfig) -> Step {
        let cx = Cx {
            conn,
            now: config.clock.now(),
            keep_done: config.keep_done,
        };
        match (self.f)(&cx) {
            Ok(v) => {
                self.answer = Some(Ok(v));
                Step::Done
            }
            Err(OpError::Store(e)) => {
                self.answer = Some(Err(e));
                Step::Failed
            }
            Err(OpError::Sql(e)) if error::breaks_transaction(&e) => Step::Abort(e),
            Err(OpError::Sql(e)) => {
                self.answer = Some(Err(error::map(&e, &config.path, Phase::Call)));
                Step::Failed
            }
        }
    }

    fn finish(self: Box<Self>, instead: Option<Error>) {
        let answer = match instead {
            Some(e) => Err(e),
            None => self
                .answer
                .unwrap_or_else(|| Err(Error::internal(STORE, "call finished without running"))),
        };
        // The caller may have gone away meanwhile; nothing to do then.
        let _ = self.tx.send(answer);
    }
}

/// The sending half, held by every handle of one opened store, and the connection the
/// writer thread shares with callers that find it free.
#[derive(Clone)]
pub(crate) struct Writer {
    tx: Sender<Box<dyn Job>>,
    shared: Arc<Mutex<WriterThread>>,
}

impl Writer {
    /// Starts the thread, which opens (creating or migrating) the database first and
    /// reports how that went.
    pub(crate) async fn start(config: SqliteConfig) -> Result<Writer> {
        let (tx, rx) = mpsc::channel::<Box<dyn Job>>();
        let (ready_tx, ready_rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("tenure-sqlite-writer".into())
            .spawn(move || {
                let opened = schema::open_and_migrate(&config, true);
                match opened {
                    Ok(conn) => {
                        let identity = identity(&config.path);
                        let shared = Arc::new(Mutex::new(WriterThread {
                            config,
                            conn: Some(conn),
                            identity,
                        }));
                        let _ = ready_tx.send(Ok(shared.clone()));
                        serve(&shared, &rx);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| Error::internal(STORE, format!("cannot start the writer thread: {e}")))?;
        let shared = ready_rx
            .await
            .map_err(|_| Error::internal(STORE, "the writer thread stopped while opening"))??;
        Ok(Writer { tx, shared })
    }

    /// Queues `f` and waits for its answer, given after the batch it ran in committed.
    pub(crate) async fn call<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&Cx<'_>) -> OpResult<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Box::new(Call {
                f,
                answer: None,
                tx,
            }))
            .map_err(|_| Error::internal(STORE, "the writer thread has stopped"))?;
        rx.await
            .map_err(|_| Error::internal(STORE, "the writer thread dropped the call"))?
    }

    /// The shared state, if it is free now or within [`INLINE_WAIT`]: another inline
    /// call holds it for tens of microseconds, less than the hop to the writer
    /// thread and back would cost; a batch of the writer thread may hold it longer,
    /// and then the call goes to the writer thread's queue behind it.
    fn lock_briefly(&self) -> Option<MutexGuard<'_, WriterThread>> {
        let start = Instant::now();
        loop {
            match self.shared.try_lock() {
                Ok(state) => return Some(state),
                Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
                Err(TryLockError::WouldBlock) if start.elapsed() < INLINE_WAIT => {
                    std::thread::yield_now()
                }
                Err(TryLockError::WouldBlock) => return None,
            }
        }
    }

    /// Runs `f` at once on the caller's thread when the connection is free, in a
    /// transaction of its own, without waiting for SQLite's lock; queues it to the
    /// writer thread (as [`Writer::call`]) when another call holds the connection or a
    /// peer holds the write lock. For the short hot calls (claim, complete, renew,
    /// release, fail), where the hop to the writer thread and back costs more than the
    /// call itself.
    pub(crate) async fn call_inline<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&Cx<'_>) -> OpResult<T> + Send + 'static,
    {
        let (tx, mut rx) = oneshot::channel();
        let mut job: Box<dyn Job> = Box::new(Call {
            f,
            answer: None,
            tx,
        });
        let ran = match self.lock_briefly() {
            Some(mut state) => state.run_inline(std::slice::from_mut(&mut job)),
            None => None,
        };
        match ran {
            Some(outcome) => {
                job.finish(outcome.err());
                rx.try_recv()
                    .map_err(|_| Error::internal(STORE, "an inline call left no answer"))?
            }
            None => {
                self.tx
                    .send(job)
                    .map_err(|_| Error::internal(STORE, "the writer thread has stopped"))?;
                rx.await
                    .map_err(|_| Error::internal(STORE, "the writer thread dropped the call"))?
            }
        }
    }
}

impl Writer {
    /// Waits for the batch in flight, checkpoints the write-ahead log into the
    /// database file and truncates it (`PRAGMA wal_checkpoint(TRUNCATE)`), and closes
    /// the connection. A later call opens the file again. Runs on a thread of its own,
    /// so the caller's runtime never waits for the lock.
    pub(crate) async fn close(&self) -> Result<()> {
        let shared = self.shared.clone();
        let (tx, rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("tenure-sqlite-close".into())
            .spawn(move || {
                let _ = tx.send(lock(&shared).close());
            })
            .map_err(|e| Error::internal(STORE, format!("cannot start the closing thread: {e}")))?;
        rx.await
            .map_err(|_| Error::internal(STORE, "the closing thread stopped"))?
    }
}

/// The file's identity, to notice that it was deleted or replaced under an open
/// connection (SQLite would go on writing to the unlinked file).
#[cfg(unix)]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|_| (0, 0))
}

struct WriterThread {
    config: SqliteConfig,
    conn: Option<Connection>,
    identity: Option<(u64, u64)>,
}

/// A fresh copy of an error, for answering every job of a failed batch.
fn replicate(e: &Error) -> Error {
    match e {
        Error::InvalidInput { field, reason } => Error::invalid(field, reason.clone()),
        Error::Conflict { what, reason } => Error::conflict(what, reason.clone()),
        Error::Config { store, reason } => Error::config(store, reason.clone()),
        Error::Corrupt { store, reason } => Error::corrupt(store, reason.clone()),
        _ if e.kind() == ErrorKind::Unavailable => Error::unavailable(STORE, e.to_string()),
        _ => Error::internal(STORE, e.to_string()),
    }
}

/// How long an inline call waits, yielding its core, for the connection another call
/// holds before it queues to the writer thread instead.
const INLINE_WAIT: Duration = Duration::from_micros(200);

/// How long the writer keeps looking for the next call, yielding its core, before it
/// sleeps on the channel.
const LINGER: Duration = Duration::from_micros(100);

/// The next call, or `None` once every sender is gone.
///
/// A caller that gets its answer usually sends its next call within microseconds (a
/// claim loop: claim, complete, claim). Parking the thread on the channel and waking it
/// again costs two context switches per call, which measured as most of a one-item
/// call's time, so the writer lingers briefly first (yielding, so on a busy machine the
/// caller's thread gets the core).
fn next_job(rx: &Receiver<Box<dyn Job>>) -> Option<Box<dyn Job>> {
    let start = Instant::now();
    loop {
        match rx.try_recv() {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) if start.elapsed() < LINGER => std::thread::yield_now(),
            Err(TryRecvError::Empty) => return rx.recv().ok(),
        }
    }
}

/// The writer thread's loop: each batch of queued calls runs with the shared state
/// locked (waiting for an inline call to finish first).
fn serve(shared: &Mutex<WriterThread>, rx: &Receiver<Box<dyn Job>>) {
    while let Some(first) = next_job(rx) {
        let mut batch = vec![first];
        let mut state = lock(shared);
        while batch.len() < state.config.max_batch_jobs {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        // A caller that gave up is not served: a dropped claim must not lease items
        // nobody will work on.
        batch.retain(|j| j.wanted());
        if batch.is_empty() {
            continue;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| state.execute(&mut batch)));
        let outcome = match outcome {
            Ok(o) => o,
            Err(_) => Err(state.after_panic()),
        };
        drop(state);
        match outcome {
            Ok(()) => batch.into_iter().for_each(|j| j.finish(None)),
            Err(e) => batch
                .into_iter()
                .for_each(|j| j.finish(Some(replicate(&e)))),
        }
    }
}

fn lock(shared: &Mutex<WriterThread>) -> MutexGuard<'_, WriterThread> {
    // Every batch runs under catch_unwind and leaves no transaction open, so a
    // poisoned lock holds nothing half done.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WriterThread {
    /// A bug panicked inside a call: leave no transaction open and answer everyone
    /// with an internal error.
    fn after_panic(&mut self) -> Error {
        if let Some(conn) = &self.conn {
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
        }
        Error::internal(STORE, "a store operation panicked")
    }

    /// Runs `batch` on the caller's thread with the busy handler off: `None` when a
    /// peer holds SQLite's write lock (nothing was kept; the caller queues the batch
    /// to the writer thread, which waits for the lock), else how it ended, as
    /// [`WriterThread::execute`].
    fn run_inline(&mut self, batch: &mut [Box<dyn Job>]) -> Option<Result<()>> {
        let ran = catch_unwind(AssertUnwindSafe(|| {
            let conn = match Self::connection(&mut self.conn, &mut self.identity, &self.config) {
                Ok(c) => c,
                Err(e) => return Some(Err(e)),
            };
            if conn.busy_timeout(Duration::ZERO).is_err() {
                return None;
            }
            let outcome = run_batch(conn, &self.config, batch);
            let restored = conn.busy_timeout(self.config.busy_timeout);
            match outcome {
                Ok(()) => {
                    Some(restored.map_err(|e| error::map(&e, &self.config.path, Phase::Call)))
                }
                Err(e) if error::is_busy(&e) => None,
                Err(e) => {
                    if error::breaks_transaction(&e) {
                        self.conn = None;
                    }
                    Some(Err(error::map(&e, &self.config.path, Phase::Call)))
                }
            }
        }));
        match ran {
            Ok(r) => r,
            Err(_) => Some(Err(self.after_panic())),
        }
    }

    /// See [`Writer::close`].
    fn close(&mut self) -> Result<()> {
        let Some(conn) = self.conn.take() else {
            return Ok(());
        };
        let path = &self.config.path;
        let map = |e: &rusqlite::Error| error::map(e, path, Phase::Call);
        let busy: i64 = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .map_err(|e| map(&e))?;
        conn.close().map_err(|(_, e)| map(&e))?;
        if busy != 0 {
            return Err(Error::unavailable(
                STORE,
                format!(
                    "database {}: another connection was reading, so the write-ahead log \
                     was not truncated (the connection is closed; close again later)",
                    path.display()
                ),
            ));
        }
        Ok(())
    }

    /// The connection, reopened if the file was replaced or the last batch broke it.
    fn connection<'a>(
        conn: &'a mut Option<Connection>,
        known: &mut Option<(u64, u64)>,
        config: &SqliteConfig,
    ) -> Result<&'a Connection> {
        let now = identity(&config.path);
        if now.is_none() || now != *known {
            *conn = None;
        }
        match conn {
            Some(c) => Ok(c),
            None => {
                let fresh = schema::open_and_migrate(config, false)?;
                *known = identity(&config.path);
                Ok(conn.insert(fresh))
            }
        }
    }

    /// Runs the batch in one transaction, retrying it whole while the database is busy.
    /// `Ok` means it committed and every job holds its own answer.
    fn execute(&mut self, batch: &mut [Box<dyn Job>]) -> Result<()> {
        let mut tries = 0;
        loop {
            tries += 1;
            let retry_left = tries < self.config.busy_retries;
            let conn = Self::connection(&mut self.conn, &mut self.identity, &self.config)?;
            match run_batch(conn, &self.config, batch) {
                Ok(()) => return Ok(()),
                Err(e) if error::is_busy(&e) && retry_left => continue,
                Err(e) => {
                    if error::breaks_transaction(&e) && !error::is_busy(&e) {
                        // Reconnect before the next batch: the file may be gone.
                        self.conn = None;
                    }
                    return Err(error::map(&e, &self.config.path, Phase::Call));
                }
            }
        }
    }
}

/// Runs one of the transaction-control statements, prepared once per connection.
fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

fn run_batch(
    conn: &Connection,
    config: &SqliteConfig,
    batch: &mut [Box<dyn Job>],
) -> rusqlite::Result<()> {
    control(conn, "BEGIN IMMEDIATE")?;
    let single = batch.len() == 1;
    let mut any_done = false;
    for job in batch.iter_mut() {
        if !single {
            control(conn, "SAVEPOINT tenure_call")?;
        }
        match job.run(conn, config) {
            Step::Done => {
                any_done = true;
                if !single {
                    control(conn, "RELEASE tenure_call")?;
                }
            }
            Step::Failed => {
                if !single {
                    control(conn, "ROLLBACK TO tenure_call")?;
                    control(conn, "RELEASE tenure_call")?;
                }
            }
            Step::Abort(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e);
            }
        }
    }
    let end = if any_done { "COMMIT" } else { "ROLLBACK" };
    if let Err(e) = control(conn, end) {
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queued call for the tests: `f` run against the batch's connection.
    fn call<F>(f: F) -> (Box<dyn Job>, oneshot::Receiver<Result<()>>)
    where
        F: FnMut(&Cx<'_>) -> OpResult<()> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job = Call {
            f,
            answer: None,
            tx,
        };
        (Box::new(job), rx)
    }

    fn insert(n: i64) -> impl FnMut(&Cx<'_>) -> OpResult<()> + Send + 'static {
        move |cx: &Cx<'_>| {
            cx.conn.execute("INSERT INTO t (n) VALUES (?1)", [n])?;
            Ok(())
        }
    }

    fn rows(conn: &Connection) -> Vec<i64> {
        let mut stmt = conn.prepare("SELECT n FROM t ORDER BY n").unwrap();
        let rows = stmt.query_map([], |r| r.get(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    }

    fn setup() -> (tempfile::TempDir, Connection, SqliteConfig) {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("batch.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (n INTEGER NOT NULL)")
            .unwrap();
        (dir, conn, SqliteConfig::new(path))
    }

    /// The savepoint path, forced: three calls in one batch, the middle one writes and
    /// then fails. Its write is undone alone; the others commit, and each caller gets
    /// its own answer.
    #[test]
    fn a_call_that_fails_inside_a_batch_is_undone_alone_and_the_batch_commits() {
        let (_dir, conn, config) = setup();
        let (a, a_rx) = call(insert(1));
        let mut write_then_fail = insert(2);
        let (b, b_rx) = call(move |cx: &Cx<'_>| {
            write_then_fail(cx)?;
            Err(OpError::Store(Error::conflict(
                "item",
                "refused on purpose",
            )))
        });
        let (c, c_rx) = call(insert(3));
        let mut batch = vec![a, b, c];
        run_batch(&conn, &config, &mut batch).unwrap();
        batch.into_iter().for_each(|j| j.finish(None));
        assert!(a_rx.blocking_recv().unwrap().is_ok());
        let e = b_rx.blocking_recv().unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
        assert!(c_rx.blocking_recv().unwrap().is_ok());
        assert_eq!(rows(&conn), vec![1, 3]);
        assert!(conn.is_autocommit(), "no transaction is left open");
    }

    /// A batch in which every call failed commits nothing, also on the one-call path
    /// that skips the savepoint.
    #[test]
    fn a_batch_whose_calls_all_failed_writes_nothing() {
        let (_dir, conn, config) = setup();
        for size in [1, 2] {
            let mut batch = Vec::new();
            let mut answers = Vec::new();
            for n in 0..size {
                let mut write = insert(n);
                let (job, rx) = call(move |cx: &Cx<'_>| {
                    write(cx)?;
                    Err(OpError::Store(Error::conflict(
                        "item",
                        "refused on purpose",
                    )))
                });
                batch.push(job);
                answers.push(rx);
            }
            run_batch(&conn, &config, &mut batch).unwrap();
            batch.into_iter().for_each(|j| j.finish(None));
            for rx in answers {
                assert!(rx.blocking_recv().unwrap().is_err());
            }
            assert_eq!(rows(&conn), Vec::<i64>::new(), "batch of {size}");
            assert!(conn.is_autocommit());
        }
    }
}
