//! The examples' argument handling: help, refused command lines, and the rule that a
//! file that is not a Tenure database is never deleted.
#![allow(clippy::unwrap_used)]

use std::ffi::OsString;
use std::path::Path;

use tempfile::TempDir;
use tenure::{NewItem, QueueName, SqliteConfig, SqliteStore, StoreExt};
use tenure_examples::args::{inspect, parse, replace_store_file, with_suffix, FileKind, Parsed};

fn argv(a: &[&str]) -> Vec<OsString> {
    a.iter().map(OsString::from).collect()
}

#[test]
fn help_is_asked_for_with_h_or_help_anywhere_before_the_separator() {
    for a in [
        &["--help"][..],
        &["-h"],
        &["x.db", "--help"],
        &["--help", "a", "b"],
    ] {
        assert_eq!(parse(argv(a), 1), Ok(Parsed::Help), "{a:?}");
    }
    assert_eq!(
        parse(argv(&["--", "--help"]), 1),
        Ok(Parsed::Run(argv(&["--help"]))),
        "after -- it is a file name"
    );
}

#[test]
fn paths_are_taken_and_unknown_options_or_extra_arguments_refused() {
    assert_eq!(parse(argv(&[]), 1), Ok(Parsed::Run(vec![])));
    assert_eq!(
        parse(argv(&["my.db"]), 1),
        Ok(Parsed::Run(argv(&["my.db"])))
    );
    let e = parse(argv(&["--force"]), 1).unwrap_err();
    assert!(e.0.contains("--force"), "{e}");
    assert!(parse(argv(&["-x"]), 1).is_err());
    assert!(parse(argv(&["a.db", "b.db"]), 1).is_err());
    assert!(
        parse(argv(&["a.db"]), 0).is_err(),
        "outbox and postgres take none"
    );
}

async fn tenure_store(path: &Path) {
    let store = SqliteStore::open(SqliteConfig::new(path)).await.unwrap();
    store
        .enqueue_one(NewItem::new(QueueName::new("q").unwrap(), b"x".to_vec()))
        .await
        .unwrap();
    // Leave the log and shared-memory files as a killed run would.
    std::mem::forget(store);
}

#[tokio::test]
async fn a_tenure_database_is_replaced_with_its_log_files() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("old.db");
    tenure_store(&path).await;
    assert_eq!(inspect(&path), FileKind::TenureStore);
    assert!(with_suffix(&path, "-wal").exists());
    replace_store_file(&path).unwrap();
    for suffix in ["", "-wal", "-shm"] {
        assert!(!with_suffix(&path, suffix).exists(), "{suffix}");
    }
    // Nothing there: nothing to do.
    replace_store_file(&path).unwrap();
}

#[test]
fn a_file_that_is_not_a_tenure_database_is_never_deleted() {
    let dir = TempDir::new().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "my thesis").unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, "").unwrap();
    let other_db = dir.path().join("app.db");
    rusqlite::Connection::open(&other_db)
        .unwrap()
        .execute_batch("CREATE TABLE users (id INTEGER PRIMARY KEY); INSERT INTO users VALUES (1);")
        .unwrap();
    let other_bytes = std::fs::read(&other_db).unwrap();
    for (path, why) in [
        (&text, "not an SQLite database"),
        (&empty, "empty"),
        (&other_db, "without Tenure's tables"),
    ] {
        let e = replace_store_file(path).unwrap_err();
        assert!(e.0.contains("is not a Tenure database"), "{e}");
        assert!(e.0.contains(why), "{e}");
        assert!(path.exists(), "{} was kept", path.display());
    }
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "my thesis");
    assert_eq!(std::fs::read(&other_db).unwrap(), other_bytes);
    let e = replace_store_file(dir.path()).unwrap_err();
    assert!(e.0.contains("not a regular file"), "{e}");
    assert!(dir.path().exists());
}

/// The built example `name`, beside this test's binary (`cargo test` builds the
/// examples of the package it tests), or `None` after saying why.
fn example(name: &str) -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent()?.parent()?.join("examples").join(name);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!("skipped: {} is not built", path.display());
        None
    }
}

#[test]
fn the_built_examples_print_usage_for_help_and_refuse_bad_command_lines() {
    for name in ["quickstart", "outbox", "postgres"] {
        let Some(bin) = example(name) else { continue };
        let out = std::process::Command::new(&bin)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{name} --help: {out:?}");
        let usage = String::from_utf8_lossy(&out.stdout);
        assert!(usage.contains("usage: "), "{name}: {usage}");
        let out = std::process::Command::new(&bin)
            .arg("--bogus")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name} --bogus: {out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--bogus"));
    }
    let Some(bin) = example("quickstart") else {
        return;
    };
    let dir = TempDir::new().unwrap();
    let precious = dir.path().join("precious.txt");
    std::fs::write(&precious, "keep me").unwrap();
    let out = std::process::Command::new(&bin)
        .arg(&precious)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a Tenure database"));
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
}
