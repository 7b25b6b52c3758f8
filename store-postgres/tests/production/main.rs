//! Production set-ups: TLS (`sslmode=require`, `verify-full` with a given root
//! certificate), URLs and schemas refused before anything runs, configuration errors
//! a caller can act on, a refused connection answered quickly with its cause, and a
//! connection killed between a committed complete and its answer.
//!
//! The TLS cases need the server to offer TLS (`SHOW ssl`) and its certificate file
//! (`SHOW ssl_cert_file`) to be readable by the test, which uses that self-signed
//! certificate as the root and connects to the name it was issued for (`localhost`,
//! or `TENURE_POSTGRES_TLS_HOST`). Without them they are skipped with a message, or
//! fail under `TENURE_REQUIRE_STORES=1`.
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::str::FromStr;
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
use tenure_core::*;
use tenure_postgres::{PgConfig, PgStore};
use tenure_test_support::postgres::{self as common, Ctx};

const LEASE: Duration = Duration::from_secs(30);

fn q() -> QueueName {
    QueueName::new("q").unwrap()
}

fn owner() -> OwnerId {
    OwnerId::new("w1").unwrap()
}

/// `url` with `param` added to its query.
fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

/// `url` with its host and port replaced by `authority` (`host:port`).
fn with_authority(url: &str, authority: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (userinfo, hostpart) = match rest.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), rest),
    };
    let tail = hostpart.find(['/', '?']).map_or("", |i| &hostpart[i..]);
    format!("{scheme}://{userinfo}{authority}{tail}")
}

/// `url` with the given database name.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let (scheme, rest) = base.split_once("://").unwrap();
    let host = rest.split_once('/').map_or(rest, |(h, _)| h);
    let query = query.map(|q| format!("?{q}")).unwrap_or_default();
    format!("{scheme}://{host}/{db}{query}")
}

/// The upstream server's `host:port`.
fn upstream() -> String {
    let o = PgConnectOptions::from_str(&common::url()).unwrap();
    format!("{}:{}", o.get_host(), o.get_port())
}

/// Whether `schema` exists on the server.
async fn schema_exists(ctx: &mut Ctx, schema: &str) -> bool {
    sqlx::query_scalar("SELECT count(*) > 0 FROM pg_namespace WHERE nspname = $1")
        .bind(schema)
        .fetch_one(&mut ctx.admin)
        .await
        .unwrap()
}

/// Whether the store's connections run over TLS.
async fn over_tls(store: &PgStore) -> bool {
    sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(store.pool())
        .await
        .unwrap()
}

mod tls;

mod bad_input;

mod config_errors;

mod refused;

mod lost_answer;
