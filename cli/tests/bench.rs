//! `tenure bench` end to end: the real binary on memory, a SQLite temp file,
//! PostgreSQL and Redis, checking what it reports, that it removes what it made, and
//! that it refuses data that was there before and leaves it as it was.
//!
//! PostgreSQL runs at `TENURE_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), Redis at `TENURE_REDIS_URL` (default
//! `redis://127.0.0.1:6379`); without a server those cases skip, unless
//! `TENURE_REQUIRE_STORES=1`, when they fail.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use sqlx::{Connection, PgConnection};

fn tenure(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tenure"))
        .args(args)
        .output()
        .expect("run the tenure binary")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `tenure bench ... --json`, asserts success, and parses the one document.
fn bench_json(args: &[&str]) -> Value {
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = tenure(&all);
    assert!(
        out.status.success(),
        "tenure {all:?} failed: {}",
        stderr(&out)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(
        stdout.trim().lines().count(),
        1,
        "one JSON document: {stdout}"
    );
    serde_json::from_str(stdout.trim()).expect("JSON")
}

/// The fields every run reports, and an exactly-once check over `items` items.
fn assert_run(doc: &Value, store: &str, mode: &str, through: &str, items: u64) {
    assert_eq!(doc["tool"], "tenure bench");
    assert_eq!(doc["store"], store, "{doc}");
    assert_eq!(doc["mode"], mode);
    assert_eq!(doc["through"], through);
    assert_eq!(doc["items"], items);
    let once = &doc["exactly_once"];
    assert_eq!(once["checked"], true, "{doc}");
    assert_eq!(once["holds"], true, "{doc}");
    assert_eq!(once["expected"], items);
    assert_eq!(once["finished"], items);
    for zero in [
        "finished_twice",
        "lost",
        "not_seeded",
        "completes_refused",
        "left_in_queue",
    ] {
        assert_eq!(once[zero], 0, "{zero} in {doc}");
    }
    assert!(doc["items_per_s"].as_f64().expect("items_per_s") > 0.0);
    assert!(doc["elapsed_s"].as_f64().expect("elapsed_s") > 0.0);
    let claims = &doc["claim_latency"];
    assert!(claims["count"].as_u64().expect("claim count") > 0, "{doc}");
    for p in ["p50_us", "p90_us", "p99_us", "max_us"] {
        assert!(claims[p].is_u64(), "{p} in {doc}");
    }
    assert!(claims["p50_us"].as_u64() <= claims["p90_us"].as_u64());
    assert!(claims["p99_us"].as_u64() <= claims["max_us"].as_u64());
    let points = doc["throughput"]["points"].as_array().expect("points");
    let bucket = doc["throughput"]["bucket_s"].as_f64().expect("bucket");
    let end = doc["throughput"]["end_s"].as_f64().expect("end");
    // Each bucket's rate over the time it covered: a whole bucket, the last one up to
    // the end of the measurement.
    let total: f64 = points
        .iter()
        .map(|p| {
            let (start, rate) = (p[0].as_f64().expect("start"), p[1].as_f64().expect("rate"));
            rate * bucket.min(end - start).max(bucket / 100.0)
        })
        .sum();
    assert!(
        (total - items as f64).abs() < 0.5,
        "the timeline counts every item once: {total} of {items}"
    );
    assert_eq!(doc["cleanup"]["removed"], true);
}

#[test]
fn help_prints_usage_for_the_command_and_bench() {
    let out = tenure(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Usage: tenure") && text.contains("bench"),
        "{text}"
    );
    let out = tenure(&["bench", "--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for option in [
        "Usage: tenure bench",
        "<URL>",
        "--mode",
        "--through",
        "--items",
        "--workers",
        "--batch",
        "--concurrency",
        "--rate",
        "--duration",
        "--backlog",
        "--json",
        "--plot",
    ] {
        assert!(text.contains(option), "{option} missing from:\n{text}");
    }
}

#[test]
fn bad_options_are_refused_naming_the_option() {
    for (args, named) in [
        (vec!["bench", "memory://", "--batch", "0"], "--batch"),
        (vec!["bench", "memory://", "-c", "0"], "--concurrency"),
        (vec!["bench", "memory://", "-n", "0"], "--items"),
        (vec!["bench", "memory://", "--plot", "out.png"], "--plot"),
        (vec!["bench", "nosuch://x"], "url"),
        (
            vec!["bench", "memory://", "--hold-snapshot"],
            "--hold-snapshot",
        ),
    ] {
        let out = tenure(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(stderr(&out).contains(named), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn memory_burn_down_through_the_worker_reports_json_and_writes_an_svg_plot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plot = dir.path().join("run.svg");
    let plot_arg = plot.to_str().expect("path");
    let doc = bench_json(&["memory://", "-n", "3000", "-c", "16", "--plot", plot_arg]);
    assert_run(&doc, "memory", "burn-down", "worker", 3000);
    assert_eq!(doc["concurrency"], 16);
    assert_eq!(doc["plot"], plot_arg);
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("items finished per second"));
}

#[test]
fn memory_burn_down_through_the_store_uses_its_workers_and_batch() {
    let doc = bench_json(&[
        "memory://",
        "--through",
        "store",
        "-n",
        "3000",
        "-w",
        "3",
        "-b",
        "50",
    ]);
    assert_run(&doc, "memory", "burn-down", "store", 3000);
    assert_eq!(
        (doc["workers"].clone(), doc["batch"].clone()),
        (3.into(), 50.into())
    );
    // 3000 items in claims of at most 50: at least 60 claims were timed.
    assert!(doc["claim_latency"]["count"].as_u64().expect("count") >= 60);
}

#[test]
fn a_sustained_run_reports_pickup_latency_through_the_worker_and_the_store() {
    for through in ["worker", "store"] {
        let doc = bench_json(&[
            "memory://",
            "--mode",
            "sustained",
            "--through",
            through,
            "--rate",
            "400",
            "--warmup",
            "250ms",
            "--duration",
            "1s",
        ]);
        // 1.25 s at 400/s: every item enqueued, the warm-up ones included, is checked.
        assert_run(&doc, "memory", "sustained", through, 500);
        assert_eq!(doc["rate"], 400);
        let pickup = &doc["pickup_latency"];
        assert_eq!(pickup["count"], 400, "the counted items: {doc}");
        assert!(pickup["p50_us"].as_u64() <= pickup["max_us"].as_u64());
    }
}

fn sqlite_files(path: &Path) -> Vec<std::path::PathBuf> {
    ["", "-wal", "-shm", "-journal"]
        .iter()
        .map(|s| {
            let mut p = path.as_os_str().to_owned();
            p.push(s);
            p.into()
        })
        .collect()
}

#[test]
fn a_sqlite_run_makes_a_new_file_and_removes_it_with_its_wal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.db");
    let url = format!("sqlite://{}", path.display());
    for through in ["worker", "store"] {
        let doc = bench_json(&[&url, "--through", through, "-n", "2000", "--backlog", "500"]);
        assert_run(&doc, "sqlite", "burn-down", through, 2000);
        assert_eq!(doc["backlog"], 500);
        assert_eq!(doc["cleanup"]["kind"], "file");
        assert_eq!(doc["cleanup"]["name"], path.display().to_string());
        for file in sqlite_files(&path) {
            assert!(!file.exists(), "{} left behind", file.display());
        }
    }
}

#[test]
fn an_existing_sqlite_file_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("precious.db");
    std::fs::write(&path, b"not ours").expect("write");
    let url = format!("sqlite://{}", path.display());
    let out = tenure(&["bench", &url, "-n", "10"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("refusing to touch existing data")
            && err.contains(&path.display().to_string()),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).expect("still there"), b"not ours");
    assert!(!sqlite_files(&path)[1].exists(), "no -wal was made");

    // A WAL file alone (a database whose main file was moved) is refused as well.
    let lonely = dir.path().join("lonely.db");
    std::fs::write(sqlite_files(&lonely)[1].as_path(), b"wal").expect("write");
    let out = tenure(&[
        "bench",
        &format!("sqlite://{}", lonely.display()),
        "-n",
        "10",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("lonely.db-wal"), "{}", stderr(&out));
    assert!(!lonely.exists());
}

// ----------------------------------------------------------------------------- postgres

fn pg_url() -> String {
    std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// An admin connection, or `None` (the case skips) when the server is down and
/// stores are not required.
async fn admin() -> Option<PgConnection> {
    match PgConnection::connect(&pg_url()).await {
        Ok(c) => Some(c),
        Err(e) if std::env::var("TENURE_REQUIRE_STORES").as_deref() != Ok("1") => {
            eprintln!("skipped: PostgreSQL at {} is unreachable: {e}", pg_url());
            None
        }
        Err(e) => panic!("PostgreSQL at {} is required: {e}", pg_url()),
    }
}

async fn schema_exists(conn: &mut PgConnection, schema: &str) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(schema)
        .fetch_one(conn)
        .await
        .expect("query")
}

fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

#[tokio::test]
async fn a_postgres_run_makes_its_own_schema_and_drops_it() {
    let Some(mut conn) = admin().await else {
        return;
    };
    for through in ["worker", "store"] {
        let doc = bench_json(&[
            &pg_url(),
            "--through",
            through,
            "-n",
            "2000",
            "--backlog",
            "1000",
        ]);
        assert_run(&doc, "postgres", "burn-down", through, 2000);
        assert_eq!(doc["cleanup"]["kind"], "schema");
        let schema = doc["cleanup"]["name"].as_str().expect("schema").to_owned();
        assert!(schema.starts_with("tenure_bench_"), "{schema}");
        assert!(
            !schema_exists(&mut conn, &schema).await,
            "{schema} left behind"
        );
    }
    // A schema named by the URL, new, is made and dropped too.
    let schema = format!("tenure_bench_named_{}", std::process::id());
    let url = with_param(&pg_url(), &format!("tenure_schema={schema}"));
    let doc = bench_json(&[&url, "-n", "500"]);
    assert_run(&doc, "postgres", "burn-down", "worker", 500);
    assert_eq!(doc["cleanup"]["name"], schema.as_str());
    assert!(!schema_exists(&mut conn, &schema).await);
}

/// `--hold-snapshot` measures twice, each on a schema of its own: free, then with an
/// idle REPEATABLE READ transaction held open, and reports both, the ratio and the
/// peak dead tuples; the held run's dead tuples stay (vacuum may not remove them).
#[tokio::test]
async fn hold_snapshot_reports_a_free_and_a_held_run_with_their_dead_tuples() {
    let Some(mut conn) = admin().await else {
        return;
    };
    let doc = bench_json(&[
        &pg_url(),
        "--through",
        "store",
        "-n",
        "3000",
        "--hold-snapshot",
    ]);
    for (run, held) in [("free", false), ("held", true)] {
        let r = &doc[run];
        assert_run(r, "postgres", "burn-down", "store", 3000);
        assert_eq!(r["snapshot_held"], held, "{doc}");
        let schema = r["cleanup"]["name"].as_str().expect("schema").to_owned();
        assert!(
            !schema_exists(&mut conn, &schema).await,
            "{schema} left behind"
        );
    }
    // Sampled in both runs. The counts come from the statistics system, which each
    // backend updates at most once a second, so a run this short may show none yet.
    for run in ["free", "held"] {
        assert!(doc[run]["peak_dead_tuples"].is_object(), "{doc}");
    }
    let ratio = doc["held_over_free"].as_f64().expect("a ratio");
    let (free, held) = (
        doc["free"]["items_per_s"].as_f64().expect("items/s"),
        doc["held"]["items_per_s"].as_f64().expect("items/s"),
    );
    assert!((ratio - held / free).abs() < 1e-9, "{doc}");
}

#[tokio::test]
async fn an_existing_postgres_schema_is_refused_and_left_untouched() {
    let Some(mut conn) = admin().await else {
        return;
    };
    let schema = format!("tenure_bench_precious_{}", std::process::id());
    for sql in [
        format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
        format!("CREATE SCHEMA {schema}"),
        format!("CREATE TABLE {schema}.keep (v text)"),
        format!("INSERT INTO {schema}.keep VALUES ('not ours')"),
    ] {
        sqlx::Executor::execute(&mut conn, sql.as_str())
            .await
            .expect("set up");
    }
    let url = with_param(&pg_url(), &format!("tenure_schema={schema}"));
    let out = tenure(&["bench", &url, "-n", "10"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("refusing to touch existing data") && err.contains(&schema),
        "{err}"
    );
    let rows: Vec<String> = sqlx::query_scalar(&format!("SELECT v FROM {schema}.keep"))
        .fetch_all(&mut conn)
        .await
        .expect("still there");
    let tables: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE schemaname = $1")
        .bind(&schema)
        .fetch_one(&mut conn)
        .await
        .expect("count");
    sqlx::Executor::execute(&mut conn, format!("DROP SCHEMA {schema} CASCADE").as_str())
        .await
        .expect("drop");
    assert_eq!(rows, vec!["not ours".to_owned()]);
    assert_eq!(tables, 1, "nothing was migrated into the schema");
}

#[cfg(unix)]
#[test]
fn an_interrupted_sqlite_run_still_removes_its_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("interrupted.db");
    let url = format!("sqlite://{}", path.display());
    // Far more items than can be seeded before the interrupt.
    let child = Command::new(env!("CARGO_BIN_EXE_tenure"))
        .args(["bench", &url, "-n", "5000000", "--quiet"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // The file exists once the bench has made it, after its interrupt handler is set.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the file never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // The shell's own `kill`, so no procps is needed.
    let killed = Command::new("sh")
        .args(["-c", &format!("kill -INT {}", child.id())])
        .status()
        .expect("kill");
    assert!(killed.success());
    let out = child.wait_with_output().expect("wait");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    for file in sqlite_files(&path) {
        assert!(!file.exists(), "{} left behind", file.display());
    }
}

// -------------------------------------------------------------------------------- redis

fn redis_url() -> String {
    std::env::var("TENURE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A connection to look at the server's keys, or `None` (the case skips) when the
/// server is down and stores are not required.
async fn redis_admin() -> Option<redis::aio::MultiplexedConnection> {
    let connected = match redis::Client::open(redis_url()) {
        Ok(client) => client.get_multiplexed_async_connection().await,
        Err(e) => Err(e),
    };
    match connected {
        Ok(c) => Some(c),
        Err(e) if std::env::var("TENURE_REQUIRE_STORES").as_deref() != Ok("1") => {
            eprintln!("skipped: Redis at {} is unreachable: {e}", redis_url());
            None
        }
        Err(e) => panic!("Redis at {} is required: {e}", redis_url()),
    }
}

/// Every key of `prefix` (`{prefix}` and `{prefix}:...`).
async fn keys_of(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(format!("{{{prefix}}}*"))
        .query_async(conn)
        .await
        .expect("KEYS")
}

#[tokio::test]
async fn a_redis_run_uses_a_prefix_of_its_own_and_deletes_its_keys() {
    let Some(mut conn) = redis_admin().await else {
        return;
    };
    for through in ["worker", "store"] {
        let doc = bench_json(&[
            &redis_url(),
            "--through",
            through,
            "-n",
            "2000",
            "--backlog",
            "1000",
        ]);
        assert_run(&doc, "redis", "burn-down", through, 2000);
        assert_eq!(doc["cleanup"]["kind"], "prefix", "{doc}");
        let prefix = doc["cleanup"]["name"].as_str().expect("prefix").to_owned();
        assert!(prefix.starts_with("tenure_bench_"), "{prefix}");
        let left = keys_of(&mut conn, &prefix).await;
        assert!(left.is_empty(), "{prefix} left keys behind: {left:?}");
    }
    // A prefix named by the URL, unused, is used and emptied too.
    let prefix = format!("tenure_bench_named_{}", std::process::id());
    let url = with_param(&redis_url(), &format!("tenure_prefix={prefix}"));
    let doc = bench_json(&[&url, "-n", "500"]);
    assert_run(&doc, "redis", "burn-down", "worker", 500);
    assert_eq!(doc["cleanup"]["name"], prefix.as_str());
    assert!(keys_of(&mut conn, &prefix).await.is_empty());
}

#[tokio::test]
async fn a_redis_prefix_that_holds_keys_is_refused_and_left_untouched() {
    let Some(mut conn) = redis_admin().await else {
        return;
    };
    let prefix = format!("tenure_bench_precious_{}", std::process::id());
    let key = format!("{{{prefix}}}:keep");
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("not ours")
        .query_async(&mut conn)
        .await
        .expect("set up");
    let url = with_param(&redis_url(), &format!("tenure_prefix={prefix}"));
    let out = tenure(&["bench", &url, "-n", "10"]);
    let value: Option<String> = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .expect("get");
    let keys = keys_of(&mut conn, &prefix).await;
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .expect("clean up");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("refusing to touch existing data") && err.contains(&prefix),
        "{err}"
    );
    assert_eq!(value.as_deref(), Some("not ours"));
    assert_eq!(keys, vec![key], "nothing was written under the prefix");
}
