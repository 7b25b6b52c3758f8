//! One test body on every store: [`Place`], a fresh store named by a URL and removed
//! afterwards, and [`on_every_store!`](crate::on_every_store), which writes one test
//! per store and case.

#[cfg(feature = "postgres")]
use crate::postgres::PgSchema;
#[cfg(feature = "redis")]
use crate::redis::RedisPrefix;
#[cfg(feature = "sqlite")]
use crate::sqlite::SqliteFile;

/// A fresh store of a test's own, named by a URL that `tenure::open` and the CLI read,
/// with what removes it: nothing (memory), a file, a schema or a key prefix. Dropping
/// it removes the store too; [`Place::remove`] does it before returning.
#[derive(Debug)]
pub struct Place {
    url: String,
    guard: Kind,
}

/// What a [`Place`] is, holding what removes it.
#[derive(Debug)]
#[non_exhaustive]
pub enum Kind {
    /// `memory://`.
    Memory,
    /// A SQLite file.
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteFile),
    /// A PostgreSQL schema.
    #[cfg(feature = "postgres")]
    Postgres(PgSchema),
    /// A Redis key prefix.
    #[cfg(feature = "redis")]
    Redis(RedisPrefix),
}

impl Place {
    /// `memory://`: nothing to remove.
    pub async fn memory() -> Option<Place> {
        Some(Place {
            url: "memory://".to_owned(),
            guard: Kind::Memory,
        })
    }

    /// A fresh SQLite file.
    #[cfg(feature = "sqlite")]
    pub async fn sqlite() -> Option<Place> {
        let file = SqliteFile::new("work.db");
        Some(Place {
            url: file.url(),
            guard: Kind::Sqlite(file),
        })
    }

    /// A fresh PostgreSQL schema, or `None` when the server is missing and not
    /// required ([`skip`](crate::skip)).
    #[cfg(feature = "postgres")]
    pub async fn postgres() -> Option<Place> {
        let schema = PgSchema::new().await?;
        Some(Place {
            url: schema.url(),
            guard: Kind::Postgres(schema),
        })
    }

    /// A fresh Redis key prefix, or `None` when the server is missing and not
    /// required ([`skip`](crate::skip)).
    #[cfg(feature = "redis")]
    pub async fn redis() -> Option<Place> {
        let prefix = RedisPrefix::new("t").await?;
        Some(Place {
            url: prefix.url(),
            guard: Kind::Redis(prefix),
        })
    }

    /// The store's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What it is: its file, schema or prefix.
    pub fn kind(&self) -> &Kind {
        &self.guard
    }

    /// Removes the store now (close every handle on it first).
    pub async fn remove(self) {
        match self.guard {
            Kind::Memory => {}
            #[cfg(feature = "sqlite")]
            Kind::Sqlite(file) => drop(file),
            #[cfg(feature = "postgres")]
            Kind::Postgres(schema) => schema.drop_now().await,
            #[cfg(feature = "redis")]
            Kind::Redis(prefix) => drop(prefix),
        }
    }
}

/// Writes one `#[tokio::test]` per store and case: a module per store named in the
/// list, holding a test per `name => case;` that opens `Fixture::<store>()` (an async
/// constructor answering `Option`, `None` to skip), awaits `case(&fixture)` (a
/// function of the calling module) and then `fixture.remove()`.
///
/// ```ignore
/// tenure_test_support::on_every_store! {
///     Fixture in [memory, sqlite, postgres, redis] {
///         pausing_stops_claims => pausing_case;
///     }
/// }
/// ```
#[macro_export]
macro_rules! on_every_store {
    ($fixture:ident in [$($store:ident),+ $(,)?] $cases:tt) => {
        $( $crate::on_every_store!(@store $fixture $store $cases); )+
    };
    (@store $fixture:ident $store:ident { $($name:ident => $case:ident;)* }) => {
        mod $store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(f) = super::$fixture::$store().await else {
                        return;
                    };
                    super::$case(&f).await;
                    f.remove().await;
                }
            )*
        }
    };
}
