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
use sqlx::Connection;
use tenure::{
    DynStore, Failure, HeartbeatParams, ItemId, ItemState, LeaderName, LeaderParams, NewItem,
    OwnerId, QueueName, Store, StoreExt,
};
use tenure_test_support::every::Place;
use tenure_test_support::postgres::{admin, url as pg_url};

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

/// Where a case runs: a fresh SQLite file or PostgreSQL schema (removed afterwards),
/// and the URL the CLI is given.
struct Fixture {
    url: String,
    place: Place,
}

impl Fixture {
    fn at(place: Option<Place>) -> Option<Fixture> {
        let place = place?;
        Some(Fixture {
            url: place.url().to_owned(),
            place,
        })
    }

    async fn sqlite() -> Option<Fixture> {
        Fixture::at(Place::sqlite().await)
    }

    async fn postgres() -> Option<Fixture> {
        Fixture::at(Place::postgres().await)
    }

    /// The store, opened (and migrated) by the library.
    async fn store(&self) -> DynStore {
        tenure::open(&self.url).await.unwrap()
    }

    async fn remove(self) {
        self.place.remove().await;
    }
}

tenure_test_support::on_every_store! {
    Fixture in [sqlite, postgres] {
        status_shows_each_queue_its_instances_and_the_leader_with_its_term => status_case;
        status_of_a_free_leader_lease_does_not_raise_its_term => status_free_leader_case;
        items_pages_by_state_with_a_cursor_and_shows_the_last_error => items_case;
        leases_show_owner_attempt_expiry_and_renewals => leases_case;
        cancel_deletes_scheduled_items_refuses_a_running_one_with_status_5_and_stops_it_with_running => cancel_case;
        pause_stops_claims_until_resume => pause_case;
        requeue_and_discard_by_queue_change_only_dead_items_and_discard_asks_for_yes => dead_case;
        migrate_applies_and_its_printed_sql_makes_a_schema_the_store_accepts => migrate_case;
    }
}

mod cases;
use cases::*;

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
