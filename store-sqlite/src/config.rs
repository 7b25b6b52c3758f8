//! How a [`SqliteStore`](crate::SqliteStore) is opened: [`SqliteConfig`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tenure_core::{Clock, Error, Limits, Result, SharedClock, SystemClock};

/// The URL scheme of a SQLite store: [`SqliteConfig::from_url`] reads it, and
/// `tenure::open` routes it here.
pub const URL_SCHEMES: &[&str] = &["sqlite"];

/// Default time a connection waits for SQLite's write lock before one try counts as busy.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Default number of tries of one transaction that found the database busy before the
/// call answers [`Error::Unavailable`].
pub const DEFAULT_BUSY_RETRIES: u32 = 3;

/// How hard SQLite works to make a commit durable (`PRAGMA synchronous`).
///
/// The store always runs in WAL mode. The default is [`Synchronous::Normal`]: in WAL
/// mode a commit is written to the log without an fsync, and the log is synced at each
/// checkpoint. A crash of the *process* loses nothing committed (the log is in the
/// operating system's cache); a power loss or kernel crash may lose the last
/// transactions, never corrupt the file. [`Synchronous::Full`] syncs the log on every
/// commit, which on the measured machine cut per-item throughput from ~25k to ~4.5k
/// items/s (`shared/research/limits.md`); choose it when a lost completion after a power
/// loss matters more than throughput (a lost completion only means the item runs again).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Synchronous {
    /// `synchronous=NORMAL`: durable across process crashes; the last transactions may
    /// be lost on power loss. The default.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is synced to disk before it returns.
    Full,
    /// `synchronous=EXTRA`: as `Full`, and the directory is synced too.
    Extra,
}

impl Synchronous {
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
            Synchronous::Extra => "EXTRA",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "normal" => Some(Synchronous::Normal),
            "full" => Some(Synchronous::Full),
            "extra" => Some(Synchronous::Extra),
            _ => None,
        }
    }
}

/// Everything [`SqliteStore::open`](crate::SqliteStore::open) needs: the file and the
/// knobs, each with a default.
///
/// ```
/// use std::time::Duration;
/// use tenure_sqlite::{SqliteConfig, Synchronous};
///
/// let config = SqliteConfig::new("work.db")
///     .busy_timeout(Duration::from_secs(2))
///     .synchronous(Synchronous::Full)
///     .keep_done(true);
/// assert_eq!(config.path().to_str(), Some("work.db"));
/// ```
#[derive(Clone)]
pub struct SqliteConfig {
    pub(crate) path: PathBuf,
    pub(crate) clock: SharedClock,
    pub(crate) limits: Limits,
    pub(crate) busy_timeout: Duration,
    pub(crate) busy_retries: u32,
    pub(crate) synchronous: Synchronous,
    pub(crate) keep_done: bool,
    pub(crate) max_batch_jobs: usize,
}

impl fmt::Debug for SqliteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteConfig")
            .field("path", &self.path)
            .field("clock", &self.clock)
            .field("limits", &self.limits)
            .field("busy_timeout", &self.busy_timeout)
            .field("busy_retries", &self.busy_retries)
            .field("synchronous", &self.synchronous)
            .field("keep_done", &self.keep_done)
            .field("max_batch_jobs", &self.max_batch_jobs)
            .finish()
    }
}

impl SqliteConfig {
    /// A store in the database file at `path` (created if missing; its directory must
    /// exist), with the system clock, default limits, a 5 s busy timeout,
    /// `synchronous=NORMAL` and finished items deleted at once.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SqliteConfig {
            path: path.into(),
            clock: Arc::new(SystemClock),
            limits: Limits::default(),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            busy_retries: DEFAULT_BUSY_RETRIES,
            synchronous: Synchronous::default(),
            keep_done: false,
            max_batch_jobs: 128,
        }
    }

    /// Parses `sqlite://PATH?OPTIONS`: `sqlite://data/work.db` is relative to the
    /// current directory, `sqlite:///var/lib/work.db` is absolute. The prefix `sqlite:`
    /// without slashes is accepted too, and the scheme in any case (`SQLite://`).
    ///
    /// Options (all optional): `busy_timeout_ms=N`, `busy_retries=N`,
    /// `synchronous=normal|full|extra`, `keep_done=true|false`. Anything else is an
    /// [`Error::InvalidInput`] naming `url`. The path is taken literally (no
    /// percent-decoding).
    ///
    /// ```
    /// use tenure_sqlite::{SqliteConfig, Synchronous};
    /// let c = SqliteConfig::from_url("sqlite:///tmp/work.db?synchronous=full&keep_done=true")?;
    /// assert_eq!(c.path().to_str(), Some("/tmp/work.db"));
    /// assert_eq!(c.synchronous_level(), Synchronous::Full);
    /// # Ok::<(), tenure_core::Error>(())
    /// ```
    pub fn from_url(url: &str) -> Result<Self> {
        // The scheme is case-insensitive (`SQLite://`); the path is taken as written.
        let rest = url
            .split_once(':')
            .filter(|(scheme, _)| URL_SCHEMES.iter().any(|s| scheme.eq_ignore_ascii_case(s)))
            .map(|(_, rest)| rest.strip_prefix("//").unwrap_or(rest))
            .ok_or_else(|| {
                Error::invalid("url", format!("{url:?} does not start with sqlite://"))
            })?;
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (rest, None),
        };
        if path.is_empty() {
            return Err(Error::invalid("url", format!("{url:?} names no file")));
        }
        let mut config = SqliteConfig::new(path);
        for pair in query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter(|p| !p.is_empty())
        {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let bad = || Error::invalid("url", format!("option {key}={value:?} is not valid"));
            match key {
                "busy_timeout_ms" => {
                    let ms: u64 = value.parse().map_err(|_| bad())?;
                    config.busy_timeout = Duration::from_millis(ms);
                }
                "busy_retries" => {
                    config.busy_retries = value.parse().map_err(|_| bad())?;
                }
                "synchronous" => {
                    config.synchronous = Synchronous::parse(value).ok_or_else(bad)?;
                }
                "keep_done" => {
                    config.keep_done = value.parse().map_err(|_| bad())?;
                }
                _ => {
                    return Err(Error::invalid(
                        "url",
                        format!("unknown option {key:?} in {url:?}"),
                    ))
                }
            }
        }
        Ok(config)
    }

    /// Reads time from `clock` instead of the system clock (tests pass a
    /// [`ManualClock`](tenure_core::ManualClock)). Every comparison and timestamp the
    /// store writes comes from this clock; SQLite's own time functions are never used.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Uses an already shared clock.
    pub fn shared_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Enforces these bounds instead of the defaults (G15).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// How long one try waits for the write lock held by another connection (another
    /// process, or another `open` of the same file). Default 5 s.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// How many tries a transaction gets when the database stays busy past the busy
    /// timeout, before the call answers [`Error::Unavailable`]. Default 3; at least 1.
    pub fn busy_retries(mut self, tries: u32) -> Self {
        self.busy_retries = tries.max(1);
        self
    }

    /// The durability level; see [`Synchronous`]. Default [`Synchronous::Normal`].
    pub fn synchronous(mut self, level: Synchronous) -> Self {
        self.synchronous = level;
        self
    }

    /// Keeps finished items as `done` rows until [`purge`](tenure_core::Store::purge)
    /// instead of deleting them at completion. Default false, so the items table holds
    /// only unfinished and dead items and stays narrow.
    pub fn keep_done(mut self, keep: bool) -> Self {
        self.keep_done = keep;
        self
    }

    /// Most queued calls the writer runs in one transaction. Default 128; at least 1
    /// (1 turns batching off, one transaction per call).
    pub fn max_batch_jobs(mut self, jobs: usize) -> Self {
        self.max_batch_jobs = jobs.max(1);
        self
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The configured durability level.
    pub fn synchronous_level(&self) -> Synchronous {
        self.synchronous
    }

    /// Whether finished items are kept.
    pub fn keeps_done(&self) -> bool {
        self.keep_done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_three_slashes_are_absolute_and_with_two_relative() {
        let abs = SqliteConfig::from_url("sqlite:///var/work.db").unwrap();
        assert_eq!(abs.path(), Path::new("/var/work.db"));
        let rel = SqliteConfig::from_url("sqlite://data/work.db").unwrap();
        assert_eq!(rel.path(), Path::new("data/work.db"));
        let bare = SqliteConfig::from_url("sqlite:work.db").unwrap();
        assert_eq!(bare.path(), Path::new("work.db"));
    }

    #[test]
    fn the_scheme_is_matched_whatever_its_case_and_the_path_kept_as_written() {
        let c = SqliteConfig::from_url("SQLite:///Var/Work.DB").unwrap();
        assert_eq!(c.path(), Path::new("/Var/Work.DB"));
        let c = SqliteConfig::from_url("SQLITE:w.db").unwrap();
        assert_eq!(c.path(), Path::new("w.db"));
        assert!(SqliteConfig::from_url("sqlitex://w.db").is_err());
    }

    #[test]
    fn url_options_set_the_knobs() {
        let c = SqliteConfig::from_url(
            "sqlite://w.db?busy_timeout_ms=250&busy_retries=5&synchronous=FULL&keep_done=true",
        )
        .unwrap();
        assert_eq!(c.busy_timeout, Duration::from_millis(250));
        assert_eq!(c.busy_retries, 5);
        assert_eq!(c.synchronous, Synchronous::Full);
        assert!(c.keep_done);
    }

    #[test]
    fn bad_urls_name_the_url_field() {
        for bad in [
            "postgres://x",
            "sqlite://",
            "sqlite://w.db?synchronous=off",
            "sqlite://w.db?nope=1",
            "sqlite://w.db?keep_done=maybe",
        ] {
            let e = SqliteConfig::from_url(bad).unwrap_err();
            assert_eq!(e.invalid_field(), Some("url"), "{bad}");
        }
    }
}
