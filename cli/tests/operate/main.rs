//! The operator commands end to end: the real `tenure` binary against a SQLite file and
//! a PostgreSQL schema of each test's own, checking what it prints (tables and JSON),
//! its exit status, and its effect on the store as the library then reads it.
//!
//! PostgreSQL runs at `TENURE_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); without a server those cases skip,
//! unless `TENURE_REQUIRE_STORES=1`, when they fail.

// Helpers outside #[test] functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use sqlx::{Connection, PgConnection};
use tenure::{
    DynStore, Failure, HeartbeatParams, ItemId, ItemState, LeaderName, LeaderParams, NewItem,
    OwnerId, QueueName, Store, StoreExt,
};

fn tenure(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tenure"))
        .args(args)
        .env_remove("TENURE_URL")
        .output()
        .expect("run the tenure binary")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs a command that must succeed with `--json` and parses its one document.
fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = tenure(&all);
    assert!(
        out.status.success(),
        "tenure {all:?} failed ({:?}): {}",
        out.status.code(),
        stderr(&out)
    );
    let text = stdout(&out);
    assert_eq!(text.trim().lines().count(), 1, "one JSON document: {text}");
    serde_json::from_str(text.trim()).expect("JSON")
}

/// Runs a command that must succeed and returns its stdout.
fn human(args: &[&str]) -> String {
    let out = tenure(args);
    assert!(
        out.status.success(),
        "tenure {args:?} failed ({:?}): {}",
        out.status.code(),
        stderr(&out)
    );
    stdout(&out)
}

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn me() -> OwnerId {
    OwnerId::new("worker-a").unwrap()
}

const LEASE: Duration = Duration::from_secs(60);

/// Where a case runs: a URL and what to remove afterwards.
enum Place {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

struct Fixture {
    url: String,
    place: Place,
}

impl Fixture {
    fn sqlite() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("work.db").display());
        Fixture {
            url,
            place: Place::Sqlite(dir),
        }
    }

    async fn postgres() -> Option<Fixture> {
        admin().await?;
        let schema = format!("tenure_cli_{}", uuid::Uuid::now_v7().simple());
        let url = format!("{}?tenure_schema={schema}", pg_url());
        Some(Fixture {
            url,
            place: Place::Postgres(schema),
        })
    }

    /// The store, opened (and migrated) by the library.
    async fn store(&self) -> DynStore {
        tenure::open(&self.url).await.unwrap()
    }

    async fn remove(self) {
        match self.place {
            Place::Sqlite(dir) => drop(dir),
            Place::Postgres(schema) => {
                if let Some(mut a) = admin().await {
                    sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                        .execute(&mut a)
                        .await
                        .unwrap();
                }
            }
        }
    }
}

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

/// Runs `case` on a SQLite file and on a PostgreSQL schema.
macro_rules! on_every_sql_store {
    ($($name:ident => $case:ident;)*) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let f = super::Fixture::sqlite();
                    super::$case(&f).await;
                    f.remove().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(f) = super::Fixture::postgres().await else { return };
                    super::$case(&f).await;
                    f.remove().await;
                }
            )*
        }
    };
}

on_every_sql_store! {
    status_shows_each_queue_its_instances_and_the_leader_with_its_term => status_case;
    status_of_a_free_leader_lease_does_not_raise_its_term => status_free_leader_case;
    items_pages_by_state_with_a_cursor_and_shows_the_last_error => items_case;
    leases_show_owner_attempt_expiry_and_renewals => leases_case;
    cancel_deletes_scheduled_items_and_refuses_a_running_one_with_status_5 => cancel_case;
    pause_stops_claims_until_resume => pause_case;
    requeue_and_discard_by_queue_change_only_dead_items_and_discard_asks_for_yes => dead_case;
    migrate_applies_and_its_printed_sql_makes_a_schema_the_store_accepts => migrate_case;
}

/// Enqueues `n` ready items of `queue`; their ids in enqueue order.
async fn ready(store: &DynStore, queue: &str, n: usize) -> Vec<ItemId> {
    let mut ids = Vec::new();
    for i in 0..n {
        let e = store
            .enqueue_one(NewItem::new(q(queue), format!("item {i}").into_bytes()))
            .await
            .unwrap();
        ids.push(e.id);
    }
    ids
}

/// Makes one item of `queue` dead with `error`; its id.
async fn dead(store: &DynStore, queue: &str, error: &str) -> ItemId {
    let id = ready(store, queue, 1).await[0];
    let lease = store
        .claim_one(q(queue), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.token.id, id, "the queue held only this ready item");
    store
        .fail_one(Failure::permanent(lease.token, error))
        .await
        .unwrap();
    id
}

async fn status_free_leader_case(f: &Fixture) {
    let store = f.store().await;
    let leader = LeaderName::new("tenure.maintenance").unwrap();
    let acquire = |who: &'static str| {
        let params = LeaderParams::new(leader.clone(), OwnerId::new(who).unwrap(), LEASE);
        let store = store.clone();
        async move {
            match store.leader_acquire(params.clone()).await.unwrap() {
                tenure::LeaderStatus::Leader { term, .. } => (term, params),
                other => panic!("{who} should lead a free lease: {other:?}"),
            }
        }
    };
    let (first, held) = acquire("worker-a").await;
    assert!(store.leader_resign(held).await.unwrap());

    for _ in 0..3 {
        let doc = json(&["status", &f.url]);
        assert_eq!(doc["leader"]["holder"], Value::Null, "{doc}");
        assert_eq!(doc["leader"]["term"], Value::Null, "{doc}");
        let text = human(&["status", &f.url]);
        assert!(text.contains("Leader (tenure.maintenance): none"), "{text}");
    }
    assert_eq!(store.leader_get(&leader).await.unwrap(), None);
    // Six reads later the next holder's term is the one right after worker-a's: no
    // read took the lease.
    let (next, _) = acquire("worker-b").await;
    assert_eq!(next, first + 1, "status raised the leader term");
    let doc = json(&["status", &f.url]);
    assert_eq!(doc["leader"]["holder"], "worker-b", "{doc}");
    assert_eq!(doc["leader"]["term"], next, "{doc}");
}

async fn status_case(f: &Fixture) {
    let store = f.store().await;
    dead(&store, "emails", "smtp refused").await;
    ready(&store, "emails", 3).await;
    store
        .enqueue_one(NewItem::new(q("emails"), b"later".to_vec()).delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let running = store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    ready(&store, "thumbnails", 1).await;
    store
        .instance_heartbeat(HeartbeatParams::new(me()))
        .await
        .unwrap();
    let leader = LeaderName::new("tenure.maintenance").unwrap();
    let term = match store
        .leader_acquire(LeaderParams::new(leader, me(), LEASE))
        .await
        .unwrap()
    {
        tenure::LeaderStatus::Leader { term, .. } => term,
        other => panic!("worker-a should lead: {other:?}"),
    };
    store
        .queue_pause(tenure::PauseParams::new(q("thumbnails")))
        .await
        .unwrap();

    let doc = json(&["status", &f.url]);
    let queues = doc["queues"].as_array().unwrap();
    let names: Vec<&str> = queues
        .iter()
        .map(|x| x["queue"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["emails", "thumbnails"], "{doc}");
    let emails = &queues[0];
    assert_eq!(
        (
            &emails["ready"],
            &emails["scheduled"],
            &emails["running"],
            &emails["dead"],
            &emails["paused"]
        ),
        (&2.into(), &1.into(), &1.into(), &1.into(), &false.into()),
        "{doc}"
    );
    assert!(
        emails["oldest_ready_age_s"].as_f64().unwrap() >= 0.0,
        "{doc}"
    );
    assert_eq!(queues[1]["paused"], true);
    assert_eq!(doc["instances"][0]["id"], "worker-a");
    assert_eq!(doc["leader"]["holder"], "worker-a");
    assert_eq!(doc["leader"]["term"], term);

    let text = human(&["status", &f.url]);
    assert!(
        text.contains("QUEUE") && text.contains("OLDEST READY"),
        "{text}"
    );
    let row = text.lines().find(|l| l.starts_with("thumbnails")).unwrap();
    assert!(row.ends_with("paused"), "{row}");
    assert!(text.contains(&format!("worker-a, term {term}")), "{text}");
    // Reading the held lease changed nothing: worker-a still holds it, same term.
    assert_eq!(json(&["status", &f.url])["leader"]["term"], term);
    assert_eq!(
        store
            .item_get(running.token.id)
            .await
            .unwrap()
            .unwrap()
            .state,
        ItemState::Running
    );
}

async fn items_case(f: &Fixture) {
    let store = f.store().await;
    let ids = ready(&store, "emails", 5).await;
    let dead_id = dead(&store, "failing", "smtp refused: 550 mailbox unavailable").await;

    // Paging oldest first, two at a time: every item once, in enqueue order.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = vec!["items", &f.url, "emails", "--limit", "2"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let doc = json(&args);
        pages += 1;
        for item in doc["items"].as_array().unwrap() {
            assert_eq!(item["state"], "ready");
            seen.push(item["id"].as_str().unwrap().to_owned());
        }
        match doc["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
        assert!(pages < 10, "paging ends");
    }
    let expected: Vec<String> = ids.iter().map(ToString::to_string).collect();
    assert_eq!(seen, expected);

    let newest = json(&["items", &f.url, "emails", "--newest", "--limit", "1"]);
    assert_eq!(newest["items"][0]["id"], ids[4].to_string());
    assert_eq!(newest["order"], "newest_first");

    let doc = json(&["items", &f.url, "failing", "--state", "dead"]);
    let item = &doc["items"][0];
    assert_eq!(item["id"], dead_id.to_string());
    assert_eq!(item["last_error"], "smtp refused: 550 mailbox unavailable");
    assert_eq!(item["attempt"], 1);
    assert!(doc["next_cursor"].is_null());

    let text = human(&["items", &f.url, "emails", "--limit", "2"]);
    assert!(text.contains(&ids[0].to_string()) && !text.contains(&ids[2].to_string()));
    assert!(
        text.contains("More: tenure items") && text.contains("--cursor "),
        "{text}"
    );
    let text = human(&["items", &f.url, "failing", "--state", "dead"]);
    assert!(text.contains("smtp refused"), "{text}");
    let text = human(&["items", &f.url, "emails", "--state", "running"]);
    assert!(text.contains("No running items in queue emails."), "{text}");

    let out = tenure(&["items", &f.url, "emails", "--cursor", "not a cursor"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cursor"), "{}", stderr(&out));
}

async fn leases_case(f: &Fixture) {
    let store = f.store().await;
    ready(&store, "emails", 2).await;
    let lease = store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    store.renew_one(lease.token, LEASE).await.unwrap();
    let doc = json(&["leases", &f.url, "emails"]);
    let leases = doc["leases"].as_array().unwrap();
    assert_eq!(leases.len(), 1, "only the running item: {doc}");
    let l = &leases[0];
    assert_eq!(l["id"], lease.token.id.to_string());
    assert_eq!(l["owner"], "worker-a");
    assert_eq!(l["attempt"], 1);
    assert_eq!(l["renewals"], 1);
    assert_eq!(l["expired"], false);
    let text = human(&["leases", &f.url, "emails"]);
    assert!(text.contains("worker-a") && text.contains("1/6"), "{text}");
}

async fn cancel_case(f: &Fixture) {
    let store = f.store().await;
    let later = store
        .enqueue_one(
            NewItem::new(q("emails"), b"later".to_vec())
                .delay(Duration::from_secs(3600))
                .dedup_key(tenure::DedupKey::new("welcome-42").unwrap()),
        )
        .await
        .unwrap()
        .id;
    let now = ready(&store, "emails", 1).await[0];
    let lease = store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.token.id, now);

    let doc = json(&["cancel", &f.url, &later.to_string()]);
    assert_eq!(doc["cancelled"], 1);
    assert_eq!(doc["results"][0]["outcome"], "cancelled");
    assert!(store.item_get(later).await.unwrap().is_none(), "gone");
    let again = store
        .enqueue_one(
            NewItem::new(q("emails"), b"later".to_vec())
                .dedup_key(tenure::DedupKey::new("welcome-42").unwrap()),
        )
        .await
        .unwrap();
    assert!(
        again.duplicate && again.id == later,
        "its dedup key is kept"
    );

    let out = tenure(&["cancel", &f.url, &now.to_string(), "--json"]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(doc["results"][0]["outcome"], "running");
    assert_eq!(doc["results"][0]["owner"], "worker-a");
    let err: Value = serde_json::from_str(stderr(&out).trim()).unwrap();
    assert_eq!(err["error"]["kind"], "conflict");
    assert_eq!(
        store.item_get(now).await.unwrap().unwrap().state,
        ItemState::Running,
        "a running item is not cancelled"
    );
    let out = tenure(&["cancel", &f.url, &now.to_string()]);
    assert!(
        stdout(&out).contains("running (attempt 1, owner worker-a)"),
        "{}",
        stdout(&out)
    );

    let out = tenure(&["cancel", &f.url, &ItemId::new().to_string()]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
}

async fn pause_case(f: &Fixture) {
    let store = f.store().await;
    let id = ready(&store, "emails", 1).await[0];
    let doc = json(&["pause", &f.url, "emails"]);
    assert_eq!(
        (&doc["paused"], &doc["changed"]),
        (&true.into(), &true.into())
    );
    assert!(
        store
            .claim_one(q("emails"), me(), LEASE)
            .await
            .unwrap()
            .is_none(),
        "a paused queue's items are not claimed"
    );
    assert!(human(&["pause", &f.url, "emails"]).contains("already paused"));
    assert_eq!(json(&["status", &f.url])["queues"][0]["paused"], true);
    let text = human(&["resume", &f.url, "emails"]);
    assert!(text.contains("Resumed emails"), "{text}");
    let lease = store.claim_one(q("emails"), me(), LEASE).await.unwrap();
    assert_eq!(lease.map(|l| l.token.id), Some(id));
    assert_eq!(json(&["resume", &f.url, "emails"])["changed"], false);
}

async fn dead_case(f: &Fixture) {
    let store = f.store().await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(dead(&store, "emails", &format!("boom {i}")).await);
    }
    let keep = ready(&store, "emails", 1).await[0];

    // Requeue by queue in batches of 2: all three, and nothing else moves.
    let doc = json(&[
        "requeue",
        &f.url,
        "--queue",
        "emails",
        "--batch",
        "2",
        "--attempts",
        "2",
    ]);
    assert_eq!(doc["requeued"], 3);
    for id in &ids {
        let item = store.item_get(*id).await.unwrap().unwrap();
        assert_eq!(item.state, ItemState::Ready);
        assert_eq!(item.attempt, 1, "the attempt is kept");
        assert!(item.max_attempts >= 3);
    }
    assert_eq!(store.queue_counts(&q("emails")).await.unwrap().ready, 4);
    // Dead for longer than an hour: none of them.
    let doc = json(&["requeue", &f.url, "--queue", "emails", "--older-than", "1h"]);
    assert_eq!(doc["requeued"], 0);

    // Make them dead again (the kept ready item is claimed too and completed).
    for _ in 0..4 {
        let l = store
            .claim_one(q("emails"), me(), LEASE)
            .await
            .unwrap()
            .unwrap();
        if l.token.id == keep {
            store.complete_one(l.token).await.unwrap();
        } else {
            store
                .fail_one(Failure::permanent(l.token, "again"))
                .await
                .unwrap();
        }
    }
    let out = tenure(&["discard", &f.url, "--queue", "emails"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert_eq!(
        store.queue_counts(&q("emails")).await.unwrap().dead,
        3,
        "nothing discarded"
    );
    let text = human(&["discard", &f.url, "--id", &ids[0].to_string()]);
    assert!(text.contains("Discarded 1 of 1"), "{text}");
    assert!(store.item_get(ids[0]).await.unwrap().is_none());
    let doc = json(&["discard", &f.url, "--queue", "emails", "--yes"]);
    assert_eq!(doc["discarded"], 2);
    assert_eq!(store.queue_counts(&q("emails")).await.unwrap().dead, 0);
}

async fn migrate_case(f: &Fixture) {
    // Applying: on a new target, then again (nothing to do).
    let doc = json(&["migrate", &f.url]);
    assert_eq!(doc["migrated"], true);
    json(&["migrate", &f.url]);
    let store = f.store().await;
    ready(&store, "emails", 1).await;
    assert_eq!(json(&["status", &f.url])["queues"][0]["ready"], 1);

    // Printing: the SQL, applied by "the application's tool", makes a schema that the
    // store opens as current, and that `tenure migrate` then leaves alone.
    let sql = human(&["migrate", &f.url, "--print"]);
    let url = match &f.place {
        Place::Sqlite(dir) => {
            let path = dir.path().join("by-script.db");
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(&format!("BEGIN; {sql} COMMIT;"))
                .unwrap();
            format!("sqlite://{}", path.display())
        }
        Place::Postgres(schema) => {
            let other = format!("{schema}_s");
            let sql = human(&[
                "migrate",
                &format!("{}?tenure_schema={other}", pg_url()),
                "--print",
            ]);
            let mut a = admin().await.unwrap();
            let mut tx = a.begin().await.unwrap();
            sqlx::raw_sql(&sql).execute(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
            let url = format!("{}?tenure_schema={other}", pg_url());
            json(&["migrate", &url]);
            let rows: i64 =
                sqlx::query_scalar(&format!("SELECT count(*) FROM {other}.tenure_migrations"))
                    .fetch_one(&mut a)
                    .await
                    .unwrap();
            assert_eq!(
                rows,
                i64::from(tenure_postgres::schema_version()),
                "one row per migration, none added by migrate"
            );
            let store = tenure::open(&url).await.unwrap();
            ready(&store, "emails", 1).await;
            assert!(store
                .claim_one(q("emails"), me(), LEASE)
                .await
                .unwrap()
                .is_some());
            sqlx::query(&format!("DROP SCHEMA {other} CASCADE"))
                .execute(&mut a)
                .await
                .unwrap();
            return;
        }
    };
    let out = tenure(&["status", &url, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let store = tenure::open(&url).await.unwrap();
    ready(&store, "emails", 1).await;
    assert!(store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .is_some());
}

// ------------------------------------------------------------------ errors and help

#[test]
fn a_missing_sqlite_file_is_reported_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.db");
    let out = tenure(&["status", &format!("sqlite://{}", path.display())]);
    assert_eq!(out.status.code(), Some(4));
    let err = stderr(&out);
    assert!(
        err.contains("no SQLite file at") && err.contains("tenure migrate"),
        "{err}"
    );
    assert!(!path.exists(), "nothing was created");
}

#[test]
fn bad_input_names_what_is_wrong_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("w.db").display());
    json(&["migrate", &url]);
    for (args, named) in [
        (vec!["status", "mysql://x"], "url"),
        (vec!["items", &url, "bad queue!"], "queue"),
        (vec!["items", &url, "q", "--state", "sleeping"], "--state"),
        (vec!["items", &url, "q", "--limit", "0"], "--limit"),
        (vec!["cancel", &url, "not-an-id"], "not an item id"),
        (vec!["requeue", &url], "--id"),
        (
            vec!["requeue", &url, "--queue", "q", "--older-than", "5w"],
            "unit",
        ),
        (vec!["migrate", "memory://", "--print"], "no SQL schema"),
    ] {
        let out = tenure(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(named),
            "{args:?} should name {named}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn an_unreachable_server_is_status_3_with_a_json_error_saying_to_retry() {
    // Port 1 on the loopback: nothing listens there.
    let out = tenure(&["status", "postgres://postgres@127.0.0.1:1/test", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
    let err: Value = serde_json::from_str(stderr(&out).trim()).expect("a JSON error");
    assert_eq!(err["error"]["kind"], "unavailable");
    assert_eq!(err["error"]["exit"], 3);
    assert!(err["error"]["hint"].as_str().unwrap().contains("retried"));
}

#[test]
fn the_url_can_come_from_tenure_url() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("env.db").display());
    json(&["migrate", &url]);
    let out = Command::new(env!("CARGO_BIN_EXE_tenure"))
        .args(["status", "--json"])
        .env("TENURE_URL", &url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        serde_json::from_str::<Value>(stdout(&out).trim()).unwrap()["store"],
        "sqlite"
    );
}

#[test]
fn help_documents_every_command_and_the_exit_statuses() {
    let text = human(&["--help"]);
    for word in [
        "status",
        "items",
        "leases",
        "cancel",
        "pause",
        "resume",
        "requeue",
        "discard",
        "migrate",
        "bench",
        "Exit status:",
        "3    store unavailable",
    ] {
        assert!(text.contains(word), "{word} missing from:\n{text}");
    }
}
