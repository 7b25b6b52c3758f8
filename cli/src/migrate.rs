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

enum Kind {
    Sqlite,
    Postgres { schema: String },
    Other(&'static str),
}

fn kind(url: &str) -> Result<Kind, CliError> {
    let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or_default();
    Ok(match scheme {
        "sqlite" => Kind::Sqlite,
        "postgres" | "postgresql" => {
            let schema = url
                .split_once('?')
                .map(|(_, q)| q)
                .unwrap_or_default()
                .split('&')
                .find_map(|p| p.strip_prefix("tenure_schema="))
                .unwrap_or("tenure")
                .to_owned();
            tenure::validate_identifier("tenure_schema", &schema)?;
            Kind::Postgres { schema }
        }
        "memory" => Kind::Other("memory"),
        "redis" | "rediss" | "redis+sentinel" | "redis+cluster" => Kind::Other("redis"),
        _ => {
            // Let the facade name what is wrong with the URL.
            return Err(tenure::Error::invalid(
                "url",
                format!(
                    "{url:?}: expected memory://, sqlite://PATH, postgres://..., redis://..., \
                     redis+sentinel://... or redis+cluster://..."
                ),
            )
            .into());
        }
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
