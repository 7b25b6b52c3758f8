use super::*;

#[tokio::test]
async fn a_missing_directory_is_invalid_input_naming_the_path_and_creates_nothing() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("missing").join("work.db");
    let e = SqliteStore::open(SqliteConfig::new(&path))
        .await
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("path"), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    assert!(files_in(dir.path()).is_empty());
}

#[tokio::test]
async fn a_directory_as_the_path_is_invalid_input_naming_the_path() {
    let dir = TempDir::new().unwrap();
    let e = SqliteStore::open(SqliteConfig::new(dir.path()))
        .await
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("path"), "{e}");
    assert!(
        e.to_string().contains(&dir.path().display().to_string()),
        "{e}"
    );
    assert!(files_in(dir.path()).is_empty());
}

#[tokio::test]
async fn a_file_that_is_not_sqlite_is_refused_and_left_untouched() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let junk = b"this is a text file, not a database; ".repeat(200);
    std::fs::write(&path, &junk).unwrap();
    let e = SqliteStore::open(SqliteConfig::new(&path))
        .await
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("path"), "{e}");
    assert!(e.to_string().contains("is not an SQLite database"), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), junk);
    assert_eq!(files_in(dir.path()), vec!["work.db".to_string()]);
}

#[tokio::test]
async fn a_newer_schema_version_is_a_conflict_and_nothing_is_written() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let c = clock();
    drop(open(&path, &c).await);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE tenure_meta SET value = ?1 WHERE key = 'schema_version'",
            [SCHEMA_VERSION + 1],
        )
        .unwrap();
        // Leave a plain rollback-journal file, so any write would show.
        conn.query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(()))
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let e = SqliteStore::open(SqliteConfig::new(&path).clock(c))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    assert!(
        e.to_string().contains("newer") || e.to_string().contains("upgrade"),
        "{e}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "the file changed");
    assert_eq!(files_in(dir.path()), vec!["work.db".to_string()]);
}

#[tokio::test]
async fn reopening_keeps_items_and_records_the_schema_version_once() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let c = clock();
    let store = open(&path, &c).await;
    let id = store
        .enqueue_one(NewItem::new(q(), b"x".to_vec()))
        .await
        .unwrap()
        .id;
    drop(store);
    let again = open(&path, &c).await;
    assert!(again.item_get(id).await.unwrap().is_some());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let versions: Vec<i64> = conn
        .prepare("SELECT value FROM tenure_meta WHERE key = 'schema_version'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(versions, vec![SCHEMA_VERSION]);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[tokio::test]
async fn the_store_shares_a_file_with_application_tables_and_leaves_user_version_alone() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE payments (id INTEGER PRIMARY KEY); PRAGMA user_version = 42;",
        )
        .unwrap();
    }
    let store = open(&path, &clock()).await;
    store
        .enqueue_one(NewItem::new(q(), b"x".to_vec()))
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 42);
}
