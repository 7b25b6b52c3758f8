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
mod common;

use std::str::FromStr;
use std::time::{Duration, Instant};

use common::Ctx;
use sqlx::postgres::PgConnectOptions;
use tenure_core::*;
use tenure_postgres::{PgConfig, PgStore};

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

mod tls {
    use super::*;

    /// The server's certificate file, or `None` (after saying why) when the server
    /// offers no TLS or the file cannot be read and TLS is not required.
    async fn server_certificate(ctx: &mut Ctx) -> Option<String> {
        let ssl: String = sqlx::query_scalar("SHOW ssl")
            .fetch_one(&mut ctx.admin)
            .await
            .unwrap();
        let file: String = sqlx::query_scalar("SHOW ssl_cert_file")
            .fetch_one(&mut ctx.admin)
            .await
            .unwrap();
        let why = if ssl != "on" {
            "the server offers no TLS (ssl = off)".to_owned()
        } else if std::fs::read(&file).is_err() {
            format!("its certificate {file} cannot be read")
        } else {
            return Some(file);
        };
        assert!(!common::required(), "TLS tests need TLS: {why}");
        eprintln!("skipped: {why}");
        None
    }

    fn tls_host() -> String {
        std::env::var("TENURE_POSTGRES_TLS_HOST").unwrap_or_else(|_| "localhost".to_owned())
    }

    async fn runs_an_item(store: &PgStore) {
        store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap();
        let lease = store.claim_one(q(), owner(), LEASE).await.unwrap().unwrap();
        store.complete_one(lease.token).await.unwrap();
    }

    #[tokio::test]
    async fn sslmode_require_connects_over_tls() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        if server_certificate(&mut ctx).await.is_none() {
            return ctx.finish().await;
        }
        let store = PgStore::connect(
            PgConfig::new(with_param(&common::url(), "sslmode=require"))
                .schema(&ctx.schema)
                .listen(false),
        )
        .await
        .expect("sslmode=require connects");
        runs_an_item(&store).await;
        assert!(over_tls(&store).await, "the connection is encrypted");
        store.close().await;
        ctx.finish().await;
    }

    #[tokio::test]
    async fn verify_full_with_the_servers_root_certificate_connects_over_tls() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        let Some(cert) = server_certificate(&mut ctx).await else {
            return ctx.finish().await;
        };
        let port = PgConnectOptions::from_str(&common::url())
            .unwrap()
            .get_port();
        let url = with_authority(&common::url(), &format!("{}:{port}", tls_host()));
        let url = with_param(&url, &format!("sslmode=verify-full&sslrootcert={cert}"));
        let store = PgStore::connect(PgConfig::new(url).schema(&ctx.schema).listen(false))
            .await
            .expect("verify-full with the server's certificate as root connects");
        runs_an_item(&store).await;
        assert!(over_tls(&store).await, "the connection is encrypted");
        store.close().await;
        ctx.finish().await;
    }

    /// The certificate names `localhost`, not `127.0.0.1`: verify-full refuses it, as
    /// a configuration error (not retryable, not internal) that says TLS.
    #[tokio::test]
    async fn verify_full_against_a_name_the_certificate_lacks_is_a_config_error() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        let Some(cert) = server_certificate(&mut ctx).await else {
            return ctx.finish().await;
        };
        let port = PgConnectOptions::from_str(&common::url())
            .unwrap()
            .get_port();
        let url = with_authority(&common::url(), &format!("127.0.0.1:{port}"));
        let url = with_param(&url, &format!("sslmode=verify-full&sslrootcert={cert}"));
        let schema = common::fresh_schema();
        let e = PgStore::connect(PgConfig::new(url).schema(&schema).listen(false))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        assert!(e.to_string().contains("TLS"), "{e}");
        assert!(
            !schema_exists(&mut ctx, &schema).await,
            "nothing was created"
        );
        ctx.finish().await;
    }
}

mod bad_input {
    use super::*;

    #[tokio::test]
    async fn an_unknown_url_parameter_is_refused_naming_it_and_nothing_is_written() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        let schema = common::fresh_schema();
        for param in ["tenure_shema=x", "sslmod=require", "connect_timeout=5"] {
            let e =
                PgStore::connect(PgConfig::new(with_param(&common::url(), param)).schema(&schema))
                    .await
                    .unwrap_err();
            assert_eq!(e.invalid_field(), Some("url"), "{param}: {e}");
            let key = param.split('=').next().unwrap();
            assert!(e.to_string().contains(&format!("{key:?}")), "{e}");
        }
        assert!(
            !schema_exists(&mut ctx, &schema).await,
            "nothing was created"
        );
        ctx.finish().await;
    }

    #[tokio::test]
    async fn a_missing_root_certificate_is_refused_naming_the_parameter() {
        let e = PgStore::connect(PgConfig::new(with_param(
            &common::url(),
            "sslmode=verify-full&sslrootcert=/nonexistent/root.crt",
        )))
        .await
        .unwrap_err();
        assert_eq!(e.invalid_field(), Some("url"), "{e}");
        assert!(e.to_string().contains("sslrootcert"), "{e}");
    }

    #[tokio::test]
    async fn system_schemas_are_refused_and_nothing_is_written_there() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        for schema in ["information_schema", "pg_catalog", "pg_toast", "pg_tenure"] {
            let e = PgStore::connect(PgConfig::new(common::url()).schema(schema))
                .await
                .unwrap_err();
            assert_eq!(e.invalid_field(), Some("schema"), "{schema}: {e}");
        }
        let written: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relname = 'tenure_migrations'
               AND (n.nspname = 'information_schema' OR n.nspname LIKE 'pg\\_%')",
        )
        .fetch_one(&mut ctx.admin)
        .await
        .unwrap();
        assert_eq!(written, 0);
        assert!(!schema_exists(&mut ctx, "pg_tenure").await);
        ctx.finish().await;
    }
}

mod config_errors {
    use super::*;

    /// Connects (migrating) with `url`, expecting a configuration error.
    async fn config_error(url: String) -> Error {
        let started = Instant::now();
        let e = PgStore::connect(PgConfig::new(url).listen(false))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        assert!(!e.is_retryable());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "answered at once"
        );
        e
    }

    #[tokio::test]
    async fn an_unknown_database_is_a_config_error_naming_it() {
        if common::admin().await.is_none() {
            return;
        }
        let e = config_error(with_database(&common::url(), "tenure_no_such_database")).await;
        assert!(e.to_string().contains("tenure_no_such_database"), "{e}");
        assert!(e.to_string().contains("does not exist"), "{e}");
    }

    #[tokio::test]
    async fn an_unknown_role_is_a_config_error_naming_it() {
        if common::admin().await.is_none() {
            return;
        }
        let o = PgConnectOptions::from_str(&common::url()).unwrap();
        let db = o.get_database().unwrap_or("postgres").to_owned();
        let url = format!(
            "postgres://tenure_no_such_role@{}:{}/{db}",
            o.get_host(),
            o.get_port()
        );
        let e = config_error(url).await;
        assert!(e.to_string().contains("tenure_no_such_role"), "{e}");
    }

    /// The shared server trusts every local connection, so a refused password is
    /// answered by a stand-in server speaking the protocol's first exchange: it
    /// declines TLS, reads the startup message and answers `28P01` as PostgreSQL does.
    #[tokio::test]
    async fn a_refused_password_is_a_config_error() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            loop {
                let len = s.read_i32().await.unwrap();
                let mut body = vec![0; usize::try_from(len - 4).unwrap()];
                s.read_exact(&mut body).await.unwrap();
                if body[..4] == 80_877_103_i32.to_be_bytes() {
                    s.write_all(b"N").await.unwrap(); // SSLRequest: no TLS here
                    continue;
                }
                let mut fields = Vec::new();
                for (tag, value) in [
                    (b'S', "FATAL"),
                    (b'V', "FATAL"),
                    (b'C', "28P01"),
                    (b'M', "password authentication failed for user \"app\""),
                ] {
                    fields.push(tag);
                    fields.extend_from_slice(value.as_bytes());
                    fields.push(0);
                }
                fields.push(0);
                s.write_u8(b'E').await.unwrap();
                s.write_i32(i32::try_from(fields.len() + 4).unwrap())
                    .await
                    .unwrap();
                s.write_all(&fields).await.unwrap();
                return;
            }
        });
        let e = config_error(format!("postgres://app:wrong@127.0.0.1:{port}/db")).await;
        assert!(
            e.to_string().contains("password authentication failed"),
            "{e}"
        );
        assert!(e.to_string().contains("password in the URL"), "{e}");
        server.await.unwrap();
    }

    #[tokio::test]
    async fn an_unmigrated_schema_is_a_config_error_that_says_run_migrate() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        // A schema never migrated, and one that exists but holds no tables.
        let empty = common::fresh_schema();
        sqlx::raw_sql(&format!("CREATE SCHEMA {empty}"))
            .execute(&mut ctx.admin)
            .await
            .unwrap();
        for schema in [common::fresh_schema(), empty.clone()] {
            let store = PgStore::connect(
                PgConfig::new(common::url())
                    .schema(&schema)
                    .migrate_on_connect(false)
                    .listen(false),
            )
            .await
            .expect("construction without migrations runs nothing");
            let e = store.claim_one(q(), owner(), LEASE).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Config, "{e}");
            assert!(e.to_string().contains("run migrate"), "{e}");
            let e = store
                .enqueue_one(NewItem::new(q(), b"x".to_vec()))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Config, "{e}");
            // Once migrated, the same store works.
            store.migrate().await.unwrap();
            store
                .enqueue_one(NewItem::new(q(), b"x".to_vec()))
                .await
                .unwrap();
            store.close().await;
            common::drop_schema(&mut ctx.admin, &schema).await;
        }
        ctx.finish().await;
    }
}

mod refused {
    use super::*;

    /// A port nobody listens on.
    async fn closed_port() -> u16 {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    }

    #[tokio::test]
    async fn a_refused_connection_says_so_within_a_second_despite_a_5_s_acquire_timeout() {
        let port = closed_port().await;
        let url = format!("postgres://postgres@127.0.0.1:{port}/test");
        // The default acquire timeout (5 s), as a user would have it.
        let started = Instant::now();
        let e = PgStore::connect(PgConfig::new(&url).listen(false))
            .await
            .unwrap_err();
        assert!(e.is_retryable(), "{e}");
        assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );

        let store = PgStore::connect(PgConfig::new(&url).migrate_on_connect(false).listen(false))
            .await
            .expect("construction is lazy");
        let started = Instant::now();
        let e = store.claim_one(q(), owner(), LEASE).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }
}

/// A connection killed after the server committed a complete and before the answer
/// reached the store: the runtime retries, is refused as stale, and must not call
/// that a lost lease; the item is done exactly once.
mod lost_answer {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    use tenure_runtime::{Job, Worker};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A TCP proxy in front of the server. Armed, it watches each connection for the
    /// complete statement; when that connection then sends `COMMIT`, the proxy
    /// forwards it, waits for the server's `CommandComplete` for it (the commit has
    /// happened) and closes both sides instead of relaying it.
    struct Proxy {
        port: u16,
        armed: Arc<AtomicBool>,
        kills: Arc<AtomicUsize>,
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    impl Proxy {
        async fn start() -> Proxy {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let armed = Arc::new(AtomicBool::new(false));
            let kills = Arc::new(AtomicUsize::new(0));
            let (a, k) = (armed.clone(), kills.clone());
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let server = TcpStream::connect(upstream()).await.unwrap();
                    tokio::spawn(relay(client, server, a.clone(), k.clone()));
                }
            });
            Proxy { port, armed, kills }
        }
    }

    async fn relay(
        mut client: TcpStream,
        mut server: TcpStream,
        armed: Arc<AtomicBool>,
        kills: Arc<AtomicUsize>,
    ) {
        let (mut cr, mut cw) = client.split();
        let (mut sr, mut sw) = server.split();
        let (mut cbuf, mut sbuf) = (vec![0; 64 * 1024], vec![0; 64 * 1024]);
        let mut saw_complete = false;
        let mut swallow_commit = false;
        loop {
            tokio::select! {
                n = cr.read(&mut cbuf) => {
                    let Ok(n @ 1..) = n else { return };
                    let chunk = &cbuf[..n];
                    if armed.load(Ordering::SeqCst) && contains(chunk, b"tenure_complete") {
                        saw_complete = true;
                    }
                    if saw_complete
                        && chunk.first() == Some(&b'Q')
                        && contains(chunk, b"COMMIT")
                        && armed.swap(false, Ordering::SeqCst)
                    {
                        swallow_commit = true;
                    }
                    if sw.write_all(chunk).await.is_err() {
                        return;
                    }
                }
                n = sr.read(&mut sbuf) => {
                    let Ok(n @ 1..) = n else { return };
                    let chunk = &sbuf[..n];
                    if swallow_commit && contains(chunk, b"COMMIT\0") {
                        kills.fetch_add(1, Ordering::SeqCst);
                        return; // both sockets close; the answer never arrives
                    }
                    if cw.write_all(chunk).await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Runs one item through a worker whose store talks through the proxy; returns
    /// the worker's metrics, how often the handler ran, and the item's id.
    async fn run_one(
        ctx: &Ctx,
        keep_done: bool,
    ) -> (tenure_runtime::MetricsSnapshot, usize, ItemId) {
        let proxy = Proxy::start().await;
        let url = with_authority(&common::url(), &format!("127.0.0.1:{}", proxy.port));
        let url = with_param(&url, "sslmode=disable");
        let store = PgStore::connect(
            PgConfig::new(url)
                .schema(&ctx.schema)
                .keep_done(keep_done)
                // Every call in its own transaction with its SQL text on the wire,
                // so the proxy can tell the complete's COMMIT.
                .statement_cache(false)
                .listen(false)
                .migrate_on_connect(false)
                .max_connections(2),
        )
        .await
        .unwrap();
        let id = ctx
            .store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap()
            .id;
        let runs = Arc::new(AtomicUsize::new(0));
        let (r, armed) = (runs.clone(), proxy.armed.clone());
        let worker = Worker::builder(store.clone())
            .queue(q())
            .concurrency(1)
            .maintenance(false)
            .lease_duration(LEASE)
            .handler(move |_job: Job| {
                let (r, armed) = (r.clone(), armed.clone());
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    // The next complete on the wire is this item's.
                    armed.store(true, Ordering::SeqCst);
                    Ok(())
                }
            })
            .spawn()
            .unwrap();
        until("the killed answer to be settled", || {
            let m = worker.metrics();
            m.completed + m.unconfirmed + m.lost >= 1
        })
        .await;
        let report = worker.shutdown(Duration::from_secs(5)).await;
        store.close().await;
        assert_eq!(
            proxy.kills.load(Ordering::SeqCst),
            1,
            "the answer was killed"
        );
        (report.metrics, runs.load(Ordering::SeqCst), id)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_complete_committed_before_its_connection_died_counts_completed_not_lost() {
        let Some(ctx) = Ctx::with(|c| c.keep_done(true)).await else {
            return;
        };
        let (m, runs, id) = run_one(&ctx, true).await;
        assert_eq!((m.lost, m.unconfirmed, m.completed), (0, 0, 1), "{m:?}");
        assert_eq!(runs, 1, "the handler ran once");
        let item = ctx.store.item_get(id).await.unwrap().unwrap();
        assert_eq!((item.state, item.attempt), (ItemState::Done, 1));
        ctx.finish().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deleting_store_counts_the_retried_complete_unconfirmed_not_lost() {
        let Some(ctx) = Ctx::new().await else {
            return;
        };
        let (m, runs, id) = run_one(&ctx, false).await;
        assert_eq!((m.lost, m.unconfirmed, m.completed), (0, 1, 0), "{m:?}");
        assert_eq!(runs, 1, "the handler ran once");
        assert!(
            ctx.store.item_get(id).await.unwrap().is_none(),
            "the first complete took effect: the item is gone"
        );
        ctx.finish().await;
    }
}
