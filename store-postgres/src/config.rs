//! [`PgConfig`]: how a [`PgStore`](crate::PgStore) connects.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tenure_core::{Clock, Limits, Result, SharedClock, SystemClock};

/// The URL schemes of a PostgreSQL store, lowercase: [`PgConfig::from_url`] reads
/// them, and `tenure::open` routes them here.
pub const URL_SCHEMES: &[&str] = &["postgres", "postgresql"];

/// How a [`PgStore`](crate::PgStore) connects, built with [`PgConfig::new`] and its
/// builder methods.
///
/// ```
/// use std::time::Duration;
/// use tenure_postgres::PgConfig;
///
/// let config = PgConfig::new("postgres://app@db.internal/app")
///     .schema("tenure")
///     .max_connections(20)
///     .acquire_timeout(Duration::from_secs(3));
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct PgConfig {
    pub(crate) url: String,
    pub(crate) schema: String,
    pub(crate) clock: SharedClock,
    pub(crate) limits: Limits,
    pub(crate) max_connections: u32,
    pub(crate) acquire_timeout: Duration,
    pub(crate) keep_done: bool,
    pub(crate) listen: bool,
    pub(crate) statement_cache: bool,
    pub(crate) jit: bool,
    pub(crate) migrate_on_connect: bool,
    pub(crate) application_name: String,
}

impl fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may carry a password: show only where it points.
        let shown = self
            .url
            .rsplit_once('@')
            .map_or(self.url.as_str(), |(_, host)| host);
        f.debug_struct("PgConfig")
            .field("url", &format_args!("…@{shown}"))
            .field("schema", &self.schema)
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("keep_done", &self.keep_done)
            .field("listen", &self.listen)
            .field("statement_cache", &self.statement_cache)
            .field("jit", &self.jit)
            .field("migrate_on_connect", &self.migrate_on_connect)
            .finish_non_exhaustive()
    }
}

impl PgConfig {
    /// Connect to `url` (`postgres://user[:password]@host[:port]/database[?options]`;
    /// the options are the ones sqlx understands, [`DRIVER_PARAMETERS`](crate::DRIVER_PARAMETERS),
    /// TLS included: see the crate docs)
    /// with every default: schema `tenure`, the system clock, default [`Limits`], 10
    /// connections, a 5 s acquire timeout, finished items deleted, LISTEN/NOTIFY
    /// wake-ups on, statement caching on, JIT compilation off for the store's sessions,
    /// migrations applied on connect.
    pub fn new(url: impl Into<String>) -> Self {
        PgConfig {
            url: url.into(),
            schema: "tenure".to_owned(),
            clock: Arc::new(SystemClock),
            limits: Limits::default(),
            max_connections: 10,
            acquire_timeout: Duration::from_secs(5),
            keep_done: false,
            listen: true,
            statement_cache: true,
            jit: false,
            migrate_on_connect: true,
            application_name: "tenure".to_owned(),
        }
    }

    /// Reads a store URL: `postgres://user[:password]@host[:port]/database[?options]`
    /// (or `postgresql://`, the scheme in any case), with the store's own parameter
    /// `tenure_schema=NAME` (default `tenure`, checked as [`PgConfig::schema`] says)
    /// taken out and every other option left for the driver, which
    /// [`PgStore::connect`](crate::PgStore::connect) checks. Every other setting has
    /// its default, as with [`PgConfig::new`].
    ///
    /// ```
    /// let c = tenure_postgres::PgConfig::from_url("Postgres://app@db/app?sslmode=disable&tenure_schema=jobs")?;
    /// assert_eq!(c.schema_name(), "jobs");
    /// assert_eq!(c.url(), "postgres://app@db/app?sslmode=disable");
    /// # Ok::<(), tenure_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`](tenure_core::Error) naming `url` for another scheme, or naming
    /// `tenure_schema` when it is given twice, has no value or is not a schema the
    /// store may own.
    pub fn from_url(url: &str) -> Result<Self> {
        let url = tenure_core::url_in_schemes(url, URL_SCHEMES)?;
        let (driver_url, schema) = tenure_core::take_url_param(&url, "tenure_schema")?;
        let mut config = PgConfig::new(driver_url);
        if let Some(schema) = schema {
            crate::check_schema("tenure_schema", &schema)?;
            config = config.schema(&schema);
        }
        Ok(config)
    }

    /// The URL the driver connects to (without the store's own parameters).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema that holds the store's tables.
    pub fn schema_name(&self) -> &str {
        &self.schema
    }

    /// The schema that holds Tenure's tables (default `tenure`). It must be 1..=48
    /// lowercase ASCII letters, digits and `_`, not starting with a digit, and not a
    /// PostgreSQL system schema (`information_schema`, `pg_*`); anything else
    /// makes [`PgStore::connect`](crate::PgStore::connect) answer
    /// [`Error::InvalidInput`](tenure_core::Error) naming `schema`, before any statement
    /// runs.
    pub fn schema(mut self, schema: &str) -> Self {
        schema.clone_into(&mut self.schema);
        self
    }

    /// The clock every comparison and every written time reads (default: the system
    /// clock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The input bounds the store enforces (G15).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The most pooled connections (default 10). See the crate docs on pool size
    /// versus worker count.
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// How long a call waits for a pooled connection, including opening one, before it
    /// answers [`Error::Unavailable`](tenure_core::Error) (default 5 s).
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// Keep finished items as `done` rows until [`purge`](tenure_core::Store::purge)
    /// removes them, instead of deleting them at once (default `false`: deleted, so
    /// the hot table stays narrow).
    pub fn keep_done(mut self, keep: bool) -> Self {
        self.keep_done = keep;
        self
    }

    /// LISTEN/NOTIFY wake-ups (default `true`): every enqueue sends one NOTIFY per
    /// transaction and a dedicated connection listens, firing the store's
    /// [`wake_signal`](tenure_core::Store::wake_signal). A latency hint only; polling
    /// remains the fallback. Turn it off when the URL points at a transaction-pooling
    /// proxy (LISTEN needs a session).
    ///
    /// The signal's [`WakeHealth`](tenure_core::WakeHealth) says whether the listener
    /// is connected: `Down` until its LISTEN is in place and from a lost connection
    /// until it has reconnected (on its own, with a backoff capped at 1 s, logged at
    /// `warn` and `info`), `Healthy` otherwise. Workers relax their polling only while
    /// it is healthy and poll at their base while it is down. With `listen(false)` it
    /// is `Local`.
    pub fn listen(mut self, listen: bool) -> Self {
        self.listen = listen;
        self
    }

    /// Cache prepared statements per connection (default `true`). Turn it off behind a
    /// transaction-pooling proxy that does not track prepared statements: every
    /// statement is then parsed, bound and run in one unnamed round trip.
    pub fn statement_cache(mut self, cache: bool) -> Self {
        self.statement_cache = cache;
        self
    }

    /// Let the server JIT-compile the store's statements (default `false`: the store
    /// asks for `jit=off` as a startup option of its own connections, beside
    /// `plan_cache_mode`; nothing else on the server changes).
    ///
    /// Why off: every statement of the store touches at most a batch of rows through
    /// an index, where JIT compilation costs tens of milliseconds and saves nothing.
    /// The server decides to compile from the plan's estimated cost, and the cached
    /// generic plans estimate `LIMIT $n` as a tenth of the table, so from a few tens of
    /// thousands of ready items the claim's estimate passes the default
    /// `jit_above_cost` and every claim would be compiled again (a claim then took
    /// 40 ms to over a second instead of half a millisecond). With JIT off the cost of
    /// a claim no longer depends on the size of the table.
    ///
    /// Only sent with [`statement_cache`](PgConfig::statement_cache) on: behind a
    /// transaction-pooling proxy no startup options are sent, and the statements are
    /// then planned for their actual arguments, whose cost is bounded by the batch
    /// limit and stays far below the JIT thresholds.
    pub fn jit(mut self, jit: bool) -> Self {
        self.jit = jit;
        self
    }

    /// Apply missing migrations in [`PgStore::connect`](crate::PgStore::connect)
    /// (default `true`). With `false`, run [`PgStore::migrate`](crate::PgStore::migrate)
    /// yourself, for example from a deploy step with a more privileged role.
    pub fn migrate_on_connect(mut self, migrate: bool) -> Self {
        self.migrate_on_connect = migrate;
        self
    }

    /// The `application_name` the store's connections report in `pg_stat_activity`
    /// (default `tenure`).
    pub fn application_name(mut self, name: &str) -> Self {
        name.clone_into(&mut self.application_name);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenure_schema_is_taken_out_of_the_url_and_the_rest_left_to_the_driver() {
        let c = PgConfig::from_url("postgres://h/db?sslmode=disable&tenure_schema=jobs").unwrap();
        assert_eq!(
            (c.url(), c.schema_name()),
            ("postgres://h/db?sslmode=disable", "jobs")
        );
        let c = PgConfig::from_url("postgres://h/db").unwrap();
        assert_eq!((c.url(), c.schema_name()), ("postgres://h/db", "tenure"));
        let c = PgConfig::from_url("PostgreSQL://h/db?tenure_schema=a1").unwrap();
        assert_eq!((c.url(), c.schema_name()), ("postgresql://h/db", "a1"));
    }

    #[test]
    fn bad_urls_name_the_field() {
        for (bad, field) in [
            ("mysql://h/db", "url"),
            ("postgres", "url"),
            ("postgres://h/db?tenure_schema=a;drop", "tenure_schema"),
            ("postgres://h/db?tenure_schema=pg_jobs", "tenure_schema"),
            (
                "postgres://h/db?tenure_schema=information_schema",
                "tenure_schema",
            ),
            ("postgres://h/db?tenure_schema=", "tenure_schema"),
            ("postgres://h/db?tenure_schema", "tenure_schema"),
            (
                "postgres://h/db?tenure_schema=a&tenure_schema=b",
                "tenure_schema",
            ),
        ] {
            let e = PgConfig::from_url(bad).unwrap_err();
            assert_eq!(e.invalid_field(), Some(field), "{bad}: {e}");
        }
    }
}
