//! `tenure limits list | set | clear` on an SQLite file: what it sets is what the store
//! enforces, `--json` prints one document, and bad limits are refused naming the field
//! with nothing written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use tenure::{LimitKey, NewItem, OwnerId, QueueName, Store, StoreExt};

fn tenure(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tenure"))
        .args(args)
        .env_remove("TENURE_URL")
        .output()
        .expect("run the tenure binary")
}

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = tenure(&all);
    assert!(
        out.status.success(),
        "tenure {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_set_are_listed_enforced_refused_when_bad_and_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("work.db").display());
    let store = tenure::open(&url).await.unwrap();
    let q = QueueName::new("mail").unwrap();

    let set = json(&[
        "limits",
        "set",
        &url,
        "mail",
        "--per-key",
        "1",
        "--key-override",
        "big=2",
        "--rate",
        "100/1m",
    ]);
    assert_eq!(set["set"]["key_concurrency"], 1);
    assert_eq!(set["set"]["key_overrides"]["big"], 2);
    assert_eq!(set["set"]["rate"]["per_secs"], 60.0);
    assert_eq!(set["before"], Value::Null);

    let listed = json(&["limits", "list", &url]);
    assert_eq!(listed["queues"][0]["queue"], "mail");
    assert_eq!(listed["queues"][0]["rate"]["starts"], 100);

    // What the CLI set is what claims obey: one running item of key k.
    let k = LimitKey::new("k").unwrap();
    for _ in 0..2 {
        store
            .enqueue_one(NewItem::new(q.clone(), b"x".to_vec()).limit_key(k.clone()))
            .await
            .unwrap();
    }
    let me = OwnerId::new("w").unwrap();
    let lease = Duration::from_secs(30);
    assert!(store
        .claim_one(q.clone(), me.clone(), lease)
        .await
        .unwrap()
        .is_some());
    assert!(store
        .claim_one(q.clone(), me, lease)
        .await
        .unwrap()
        .is_none());

    // A limit of 0 is refused naming the field, and the limits stay as they were.
    let out = tenure(&["limits", "set", &url, "mail", "--per-key", "0", "--json"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("key_concurrency"), "{err}");
    assert_eq!(
        store.limits_get(&q).await.unwrap().unwrap().key_concurrency,
        Some(1)
    );

    let human = String::from_utf8_lossy(&tenure(&["limits", "list", &url]).stdout).into_owned();
    assert!(human.contains("big=2") && human.contains("100/"), "{human}");

    assert_eq!(json(&["limits", "clear", &url, "mail"])["cleared"], true);
    assert_eq!(json(&["limits", "clear", &url, "mail"])["cleared"], false);
    assert_eq!(
        json(&["limits", "list", &url])["queues"],
        Value::Array(vec![])
    );
}
