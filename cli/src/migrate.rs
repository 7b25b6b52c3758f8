//! `tenure migrate <url>`: apply the store's schema, or print it as SQL.

use clap::Args;
use serde_json::json;

use crate::error::CliError;
use crate::output::{print_json, Target};

/// The options of `tenure migrate`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tenure migrate sqlite://work.db\n  \
    tenure migrate 'postgres://app@db/prod?tenure_schema=jobs'\n  \
    tenure migrate 'postgres://app@db/prod?tenure_schema=jobs' --print > V7__tenure.sql\n  \
    tenure migrate 'postgres://app@db/prod?tenure_schema=jobs' --print --from 2\n\n\
    Applying is safe to repeat and to run from several processes at once. --print \
    connects to nothing: it writes the SQL for the application's own migration tool, \
    with the rows that record each migration, so the store later finds them applied. \
    Run the script in one transaction. memory:// and redis:// have no SQL schema.")]
pub(crate) struct MigrateArgs {
    #[command(flatten)]
    pub(crate) target: Target,

    /// Print the SQL instead of applying it.
    #[arg(long)]
    pub(crate) print: bool,

    /// With --print on PostgreSQL: only the migrations after this version (the one
    /// the schema is at).
    #[arg(long, value_name = "VERSION", requires = "print")]
    pub(crate) from: Option<i32>,
}

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Sqlite,
    Postgres { schema: String },
    Other(&'static str),
}

/// What `url` names, read by the facade's scheme table and the store's own `from_url`.
fn kind(url: &str) -> Result<Kind, CliError> {
    Ok(match tenure::backend(url)?.name {
        "sqlite" => Kind::Sqlite,
        "postgres" => Kind::Postgres {
            schema: tenure::PgConfig::from_url(url)?.schema_name().to_owned(),
        },
        other => Kind::Other(other),
    })
}

pub(crate) async fn run(args: MigrateArgs) -> Result<(), CliError> {
    let kind = kind(&args.target.url)?;
    if args.print {
        let sql = match &kind {
            Kind::Sqlite => {
                if args.from.is_some_and(|v| v != 0) {
                    return Err(CliError::Usage(
                        "--from: a SQLite upgrade is not SQL alone (version 2 back-fills a hash computed in Rust); apply it with `tenure migrate URL`, or open the file with tenure-sqlite".to_owned(),
                    ));
                }
                tenure_sqlite::schema_script()?
            }
            Kind::Postgres { schema } => {
                tenure_postgres::migration_script(schema, args.from.unwrap_or(0))?
            }
            Kind::Other(store) => {
                return Err(CliError::Usage(format!(
                    "{store} has no SQL schema to print: nothing to put in a migration tool"
                )))
            }
        };
        if args.target.json {
            print_json(&json!({ "sql": sql }));
        } else {
            print!("{sql}");
        }
        return Ok(());
    }
    let (what, version) = match &kind {
        Kind::Sqlite => ("SQLite file", tenure_sqlite::SCHEMA_VERSION),
        Kind::Postgres { .. } => (
            "PostgreSQL schema",
            i64::from(tenure_postgres::schema_version()),
        ),
        Kind::Other(store) => {
            return Err(CliError::Usage(format!(
                "{store} has no schema to migrate{}",
                if *store == "redis" {
                    ": it loads its functions when it connects"
                } else {
                    ": it keeps nothing"
                }
            )))
        }
    };
    let store = crate::connect::open(&args.target.url, true).await?;
    if args.target.json {
        print_json(&json!({ "store": store.name(), "schema_version": version, "migrated": true }));
    } else {
        println!("Migrated: the {what} is at schema version {version}, current for this tenure.");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(url: &str) -> Option<&'static str> {
        match kind(url) {
            Err(CliError::Store(e)) => e.invalid_field(),
            other => panic!("{url}: expected a store error, got {other:?}"),
        }
    }

    #[test]
    fn each_scheme_is_read_by_its_store_whatever_its_case() {
        let pg = |schema: &str| Kind::Postgres {
            schema: schema.to_owned(),
        };
        for (url, want) in [
            ("sqlite://w.db", Kind::Sqlite),
            ("SQLite:w.db", Kind::Sqlite),
            ("postgres://h/db", pg("tenure")),
            (
                "POSTGRES://h/db?sslmode=disable&tenure_schema=jobs",
                pg("jobs"),
            ),
            ("postgresql://h/db?tenure_schema=a_1", pg("a_1")),
            ("memory://", Kind::Other("memory")),
            ("Redis+Cluster://h", Kind::Other("redis")),
            ("rediss://h", Kind::Other("redis")),
        ] {
            assert_eq!(kind(url).unwrap(), want, "{url}");
        }
    }

    #[test]
    fn bad_urls_and_schemas_are_refused_naming_the_field() {
        for (url, want) in [
            ("mysql://h/db", "url"),
            ("", "url"),
            ("postgres://h/db?tenure_schema=a;drop", "tenure_schema"),
            ("postgres://h/db?tenure_schema=pg_x", "tenure_schema"),
            (
                "postgres://h/db?tenure_schema=a&tenure_schema=b",
                "tenure_schema",
            ),
        ] {
            assert_eq!(field(url), Some(want), "{url}");
        }
    }
}
