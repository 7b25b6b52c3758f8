//! Behaviour of the SQLite store beyond the shared conformance suite: opening, the
//! schema invariants, peers on one file, busy and missing files, transactional enqueue.

// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::TransactionBehavior;
use tempfile::TempDir;
use tenure_core::{
    ClaimParams, DedupKey, EnqueueParams, ErrorKind, ItemState, LeaseId, LeaseToken, ManualClock,
    NewItem, OwnerId, QueueName, ScopeKey, Store, StoreExt, StreamKey, Timestamp,
};
use tenure_sqlite::{SqliteConfig, SqliteStore, SCHEMA_VERSION};

const LEASE: Duration = Duration::from_secs(30);

fn q() -> QueueName {
    QueueName::new("q").unwrap()
}

fn me(n: u32) -> OwnerId {
    OwnerId::new(format!("w{n}")).unwrap()
}

fn clock() -> ManualClock {
    ManualClock::new(Timestamp::from_micros(1_000_000_000))
}

fn db(dir: &TempDir) -> PathBuf {
    dir.path().join("work.db")
}

async fn open(path: &Path, clock: &ManualClock) -> SqliteStore {
    SqliteStore::open(SqliteConfig::new(path).clock(clock.clone()))
        .await
        .unwrap()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

mod open {
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
}

mod g10_scope_index {
    use super::*;

    #[tokio::test]
    async fn the_schema_refuses_a_second_running_item_of_one_scope_even_without_the_claim() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let c = clock();
        let store = open(&path, &c).await;
        let scope = ScopeKey::new("account-7").unwrap();
        for _ in 0..2 {
            store
                .enqueue_one(NewItem::new(q(), b"x".to_vec()).scope(scope.clone()))
                .await
                .unwrap();
        }
        let conn = store.connection().unwrap();
        conn.execute(
            "UPDATE tenure_items SET state = 'running' WHERE seq = (SELECT min(seq) FROM tenure_items)",
            [],
        )
        .unwrap();
        let e = conn
            .execute(
                "UPDATE tenure_items SET state = 'running' WHERE seq = (SELECT max(seq) FROM tenure_items)",
                [],
            )
            .unwrap_err();
        assert!(e.to_string().contains("UNIQUE"), "{e}");
    }

    #[tokio::test]
    async fn one_batch_takes_one_item_per_scope_and_the_next_unscoped_items() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let a = ScopeKey::new("a").unwrap();
        let mut ids = Vec::new();
        for item in [
            NewItem::new(q(), b"1".to_vec()).scope(a.clone()),
            NewItem::new(q(), b"2".to_vec()).scope(a.clone()),
            NewItem::new(q(), b"3".to_vec()),
            NewItem::new(q(), b"4".to_vec()).scope(a.clone()),
        ] {
            ids.push(store.enqueue_one(item).await.unwrap().id);
        }
        let leases = store
            .claim(ClaimParams::new(q(), me(1), 10, LEASE))
            .await
            .unwrap();
        let got: Vec<_> = leases.iter().map(|l| l.item.id).collect();
        assert_eq!(got, vec![ids[0], ids[2]]);
    }
}

mod g09_stream_head {
    use super::*;

    async fn head_flags(store: &SqliteStore) -> Vec<(Vec<u8>, i64)> {
        let conn = store.connection().unwrap();
        let mut stmt = conn
            .prepare("SELECT payload, head FROM tenure_items ORDER BY seq")
            .unwrap();
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows
    }

    #[tokio::test]
    async fn only_the_first_unfinished_item_of_a_stream_is_marked_head_and_the_mark_moves_on() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let s = StreamKey::new("order-1").unwrap();
        for p in [b"a", b"b", b"c"] {
            store
                .enqueue_one(NewItem::new(q(), p.to_vec()).stream(s.clone()))
                .await
                .unwrap();
        }
        store
            .enqueue_one(NewItem::new(q(), b"free".to_vec()))
            .await
            .unwrap();
        assert_eq!(
            head_flags(&store).await,
            vec![
                (b"a".to_vec(), 1),
                (b"b".to_vec(), 0),
                (b"c".to_vec(), 0),
                (b"free".to_vec(), 1)
            ]
        );
        let first = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
        assert_eq!(first.item.payload, b"a");
        store.complete_one(first.token).await.unwrap();
        assert_eq!(
            head_flags(&store).await,
            vec![
                (b"b".to_vec(), 1),
                (b"c".to_vec(), 0),
                (b"free".to_vec(), 1)
            ]
        );
    }
}

mod peers {
    use super::*;
    use std::collections::HashSet;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_opens_of_one_file_never_hand_out_one_item_twice() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let c = clock();
        let a = open(&path, &c).await;
        let b = open(&path, &c).await;
        let items: Vec<NewItem> = (0..300u32)
            .map(|i| NewItem::new(q(), i.to_le_bytes().to_vec()))
            .collect();
        a.enqueue(EnqueueParams::new(items)).await.unwrap();
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(4));
        let mut tasks = Vec::new();
        for (n, store) in [a.clone(), a.clone(), b.clone(), b.clone()]
            .into_iter()
            .enumerate()
        {
            let barrier = barrier.clone();
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let mut mine = Vec::new();
                loop {
                    let leases = store
                        .claim(ClaimParams::new(q(), me(n as u32), 7, LEASE))
                        .await
                        .unwrap();
                    if leases.is_empty() {
                        return mine;
                    }
                    let tokens: Vec<_> = leases.iter().map(|l| l.token).collect();
                    let outs = store
                        .complete(tenure_core::CompleteParams::new(tokens.clone()))
                        .await
                        .unwrap();
                    assert!(outs
                        .iter()
                        .all(|o| *o == tenure_core::TokenOutcome::Accepted));
                    mine.extend(tokens.into_iter().map(|t| t.id));
                }
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let unique: HashSet<_> = all.iter().collect();
        assert_eq!(all.len(), 300, "every item claimed and completed once");
        assert_eq!(unique.len(), 300, "no item handed out twice");
        assert_eq!(a.queue_counts(&q()).await.unwrap().pending(), 0);
    }
}

mod faults {
    use super::*;

    #[tokio::test]
    async fn a_write_lock_held_elsewhere_answers_unavailable_after_bounded_retries_then_recovers() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let c = clock();
        let store = SqliteStore::open(
            SqliteConfig::new(&path)
                .clock(c.clone())
                .busy_timeout(Duration::from_millis(20))
                .busy_retries(2),
        )
        .await
        .unwrap();
        let mut other = store.connection().unwrap();
        let tx = other
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        let started = std::time::Instant::now();
        let e = store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        assert!(e.is_retryable());
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "retries are bounded"
        );
        tx.rollback().unwrap();
        store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap();
        assert_eq!(store.queue_counts(&q()).await.unwrap().ready, 1);
    }

    #[tokio::test]
    async fn a_file_taken_away_answers_unavailable_and_the_store_recovers_when_it_is_back() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let c = clock();
        let store = open(&path, &c).await;
        let id = store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap()
            .id;
        let aside = dir.path().join("aside.db");
        std::fs::rename(&path, &aside).unwrap();
        let e = store.item_get(id).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        let e = store.claim_one(q(), me(1), LEASE).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        assert!(!path.exists(), "a reconnect must not create an empty file");
        std::fs::rename(&aside, &path).unwrap();
        let item = store.item_get(id).await.unwrap().expect("the item is back");
        assert_eq!(item.state, ItemState::Ready);
        assert!(store.claim_one(q(), me(1), LEASE).await.unwrap().is_some());
    }

    /// Through the public API: twenty concurrent calls, one of which must fail whole,
    /// while the others all commit. Whether they share writer batches is up to timing
    /// here; the writer's unit tests force a batch and check the savepoint path itself.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_call_rolls_back_alone_while_the_calls_around_it_commit() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let taken = store
            .enqueue_one(NewItem::new(q(), b"first".to_vec()))
            .await
            .unwrap()
            .id;
        let mut calls = Vec::new();
        for i in 0..20u32 {
            let store = store.clone();
            let item = if i == 10 {
                // Two items, the second reusing an existing id: the call must write
                // neither.
                vec![
                    NewItem::new(q(), b"lost".to_vec()),
                    NewItem::new(q(), b"dup".to_vec()).with_id(taken),
                ]
            } else {
                vec![NewItem::new(q(), i.to_le_bytes().to_vec())]
            };
            calls.push(tokio::spawn(async move {
                store.enqueue(EnqueueParams::new(item)).await
            }));
        }
        let mut failed = 0;
        for (i, call) in calls.into_iter().enumerate() {
            match call.await.unwrap() {
                Ok(_) => assert_ne!(i, 10),
                Err(e) => {
                    assert_eq!(i, 10);
                    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
                    failed += 1;
                }
            }
        }
        assert_eq!(failed, 1);
        assert_eq!(store.queue_counts(&q()).await.unwrap().ready, 20);
    }
}

mod transactional_enqueue {
    use super::*;

    fn business(conn: &rusqlite::Connection) {
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS payments (key TEXT PRIMARY KEY, amount INTEGER)",
        )
        .unwrap();
    }

    fn payments(conn: &rusqlite::Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM payments", [], |r| r.get(0))
            .unwrap()
    }

    #[tokio::test]
    async fn a_committed_transaction_keeps_the_business_row_and_its_item() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let mut conn = store.connection().unwrap();
        business(&conn);
        let key = DedupKey::new("pay-1").unwrap();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        tx.execute("INSERT INTO payments VALUES ('pay-1', 100)", [])
            .unwrap();
        let out = store
            .enqueue_in_tx(
                &tx,
                EnqueueParams::one(NewItem::new(q(), b"reconcile".to_vec()).dedup_key(key.clone())),
            )
            .unwrap();
        tx.commit().unwrap();
        store.notify_enqueued();
        assert_eq!(payments(&conn), 1);
        let item = store.item_get(out[0].id).await.unwrap().expect("committed");
        assert_eq!(item.payload, b"reconcile");
        let again = store
            .enqueue_one(NewItem::new(q(), b"again".to_vec()).dedup_key(key))
            .await
            .unwrap();
        assert!(again.duplicate, "the key was committed with the item");
        assert_eq!(again.id, out[0].id);
    }

    #[tokio::test]
    async fn a_rolled_back_transaction_leaves_neither_row_nor_item_nor_dedup_key() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let mut conn = store.connection().unwrap();
        business(&conn);
        let key = DedupKey::new("pay-2").unwrap();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        tx.execute("INSERT INTO payments VALUES ('pay-2', 100)", [])
            .unwrap();
        let out = store
            .enqueue_in_tx(
                &tx,
                EnqueueParams::one(NewItem::new(q(), b"reconcile".to_vec()).dedup_key(key.clone())),
            )
            .unwrap();
        tx.rollback().unwrap();
        assert_eq!(payments(&conn), 0);
        assert!(store.item_get(out[0].id).await.unwrap().is_none());
        assert_eq!(store.queue_counts(&q()).await.unwrap().pending(), 0);
        let later = store
            .enqueue_one(NewItem::new(q(), b"retry".to_vec()).dedup_key(key))
            .await
            .unwrap();
        assert!(!later.duplicate, "the rolled-back key was forgotten");
    }

    #[tokio::test]
    async fn a_failing_enqueue_in_tx_writes_none_of_its_items_and_keeps_the_callers_rows() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let taken = store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap()
            .id;
        let mut conn = store.connection().unwrap();
        business(&conn);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        tx.execute("INSERT INTO payments VALUES ('pay-3', 1)", [])
            .unwrap();
        let e = store
            .enqueue_in_tx(
                &tx,
                EnqueueParams::new(vec![
                    NewItem::new(q(), b"new".to_vec()),
                    NewItem::new(q(), b"dup".to_vec()).with_id(taken),
                ]),
            )
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
        let bad = store
            .enqueue_in_tx(&tx, EnqueueParams::new(vec![]))
            .unwrap_err();
        assert_eq!(bad.invalid_field(), Some("items"));
        tx.commit().unwrap();
        assert_eq!(payments(&conn), 1);
        assert_eq!(
            store.queue_counts(&q()).await.unwrap().ready,
            1,
            "only the earlier item"
        );
    }

    #[tokio::test]
    async fn a_file_without_the_store_schema_is_a_schema_conflict() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let other = dir.path().join("other.db");
        let mut conn = rusqlite::Connection::open(&other).unwrap();
        let tx = conn.transaction().unwrap();
        let e = store
            .enqueue_in_tx(&tx, EnqueueParams::one(NewItem::new(q(), b"x".to_vec())))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
        assert!(e.to_string().contains("open a SqliteStore"), "{e}");
    }
}

mod transactional_finalize {
    //! complete / fail / release inside the application's transaction (seed 003's
    //! ownership-verified finalize): one commit for the business row and the item.

    use super::*;
    use tenure_core::{
        CompleteParams, FailOutcome, FailParams, Failure, Lease, ReleaseParams, TokenOutcome,
    };

    fn business(conn: &rusqlite::Connection) {
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS payments (item BLOB NOT NULL, attempt INTEGER NOT NULL)",
        )
        .unwrap();
    }

    fn payments(conn: &rusqlite::Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM payments", [], |r| r.get(0))
            .unwrap()
    }

    fn pay(tx: &rusqlite::Transaction<'_>, lease: &Lease) {
        tx.execute(
            "INSERT INTO payments VALUES (?1, ?2)",
            rusqlite::params![&lease.item.id.as_bytes()[..], lease.token.attempt],
        )
        .unwrap();
    }

    fn immediate(conn: &mut rusqlite::Connection) -> rusqlite::Transaction<'_> {
        conn.transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap()
    }

    /// A store with one item claimed by `w1`, and a business connection.
    async fn claimed(dir: &TempDir, c: &ManualClock) -> (SqliteStore, rusqlite::Connection, Lease) {
        let store = open(&db(dir), c).await;
        store
            .enqueue_one(NewItem::new(q(), b"pay".to_vec()))
            .await
            .unwrap();
        let lease = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
        let conn = store.connection().unwrap();
        business(&conn);
        (store, conn, lease)
    }

    #[tokio::test]
    async fn a_committed_transaction_finishes_the_item_and_writes_the_business_row_together() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let (store, mut conn, lease) = claimed(&dir, &c).await;
        let tx = immediate(&mut conn);
        pay(&tx, &lease);
        let answer = store
            .complete_in_tx(&tx, CompleteParams::new(vec![lease.token]))
            .unwrap();
        assert_eq!(answer, vec![TokenOutcome::Accepted]);
        tx.commit().unwrap();
        assert_eq!(payments(&conn), 1);
        assert!(
            store.item_get(lease.item.id).await.unwrap().is_none(),
            "finished"
        );
        assert_eq!(store.queue_counts(&q()).await.unwrap().pending(), 0);
    }

    #[tokio::test]
    async fn a_rolled_back_transaction_leaves_neither_and_the_item_running_under_its_lease() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let (store, mut conn, lease) = claimed(&dir, &c).await;
        let tx = immediate(&mut conn);
        pay(&tx, &lease);
        let answer = store
            .complete_in_tx(&tx, CompleteParams::new(vec![lease.token]))
            .unwrap();
        assert_eq!(answer, vec![TokenOutcome::Accepted]);
        tx.rollback().unwrap();
        assert_eq!(payments(&conn), 0);
        let it = store.item_get(lease.item.id).await.unwrap().unwrap();
        assert_eq!(
            (it.state, it.attempt, it.owner.as_ref(), it.lease_expires_at),
            (
                ItemState::Running,
                lease.token.attempt,
                Some(&me(1)),
                Some(lease.expires_at)
            ),
            "still running under the same lease"
        );
        // The same worker retries with the same token while the lease lasts.
        let tx = immediate(&mut conn);
        pay(&tx, &lease);
        let answer = store
            .complete_in_tx(&tx, CompleteParams::new(vec![lease.token]))
            .unwrap();
        assert_eq!(answer, vec![TokenOutcome::Accepted]);
        tx.commit().unwrap();
        assert_eq!(payments(&conn), 1);
        assert!(store.item_get(lease.item.id).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_stale_token_inside_the_transaction_answers_lease_lost_and_the_rollback_leaves_the_business_table_unchanged(
    ) {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let (store, mut conn, stale) = claimed(&dir, &c).await;
        // The lease expires and a peer re-claims the item: attempt 2.
        c.advance(LEASE + Duration::from_secs(1));
        let peer = open(&db(&dir), &c).await;
        let current = peer.claim_one(q(), me(2), LEASE).await.unwrap().unwrap();
        assert_eq!(current.token.attempt, stale.token.attempt + 1);
        for op in ["complete", "fail", "release"] {
            let tx = immediate(&mut conn);
            pay(&tx, &stale);
            let lost = match op {
                "complete" => {
                    store
                        .complete_in_tx(&tx, CompleteParams::new(vec![stale.token]))
                        .unwrap()
                        == vec![TokenOutcome::LeaseLost]
                }
                "fail" => {
                    store
                        .fail_in_tx(
                            &tx,
                            FailParams::one(Failure::permanent(stale.token, "declined")),
                        )
                        .unwrap()
                        == vec![FailOutcome::LeaseLost]
                }
                _ => {
                    store
                        .release_in_tx(&tx, ReleaseParams::new(vec![stale.token]))
                        .unwrap()
                        == vec![TokenOutcome::LeaseLost]
                }
            };
            assert!(lost, "{op} with a stale token answers lease lost");
            tx.rollback().unwrap();
            assert_eq!(payments(&conn), 0, "{op}: the business table is unchanged");
            let it = store.item_get(stale.item.id).await.unwrap().unwrap();
            assert_eq!(
                (it.state, it.attempt, it.owner.as_ref()),
                (ItemState::Running, current.token.attempt, Some(&me(2))),
                "{op}: the current attempt is untouched"
            );
        }
        peer.complete_one(current.token).await.unwrap();
    }

    #[tokio::test]
    async fn a_failure_and_a_release_commit_with_the_business_row() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let (store, mut conn, lease) = claimed(&dir, &c).await;
        let tx = immediate(&mut conn);
        pay(&tx, &lease);
        let delay = Duration::from_secs(60);
        let answer = store
            .fail_in_tx(
                &tx,
                FailParams::one(Failure::retry_after(lease.token, delay, "gateway down")),
            )
            .unwrap();
        assert_eq!(
            answer,
            vec![FailOutcome::Retrying {
                run_at: tenure_core::Clock::now(&c) + delay
            }]
        );
        tx.commit().unwrap();
        let it = store.item_get(lease.item.id).await.unwrap().unwrap();
        assert_eq!(it.state, ItemState::Ready);
        assert_eq!(it.last_error.as_deref(), Some("gateway down"));
        assert_eq!(payments(&conn), 1);

        c.advance(delay);
        let again = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
        assert_eq!(again.token.attempt, 2);
        let before = store.item_get(lease.item.id).await.unwrap().unwrap();
        let tx = immediate(&mut conn);
        pay(&tx, &again);
        let answer = store
            .release_in_tx(&tx, ReleaseParams::new(vec![again.token]))
            .unwrap();
        assert_eq!(answer, vec![TokenOutcome::Accepted]);
        tx.commit().unwrap();
        let it = store.item_get(lease.item.id).await.unwrap().unwrap();
        assert_eq!(it.state, ItemState::Ready);
        assert_eq!(
            it.max_attempts,
            before.max_attempts + 1,
            "a release spends no attempt"
        );
        assert_eq!(payments(&conn), 2);
    }

    #[tokio::test]
    async fn while_the_transaction_is_open_no_peer_can_take_the_item_and_after_its_commit_there_is_nothing_to_take(
    ) {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let (store, mut conn, lease) = claimed(&dir, &c).await;
        let peer = SqliteStore::open(
            SqliteConfig::new(db(&dir))
                .clock(c.clone())
                .busy_timeout(Duration::from_millis(1))
                .busy_retries(1),
        )
        .await
        .unwrap();
        let tx = immediate(&mut conn);
        pay(&tx, &lease);
        let answer = store
            .complete_in_tx(&tx, CompleteParams::new(vec![lease.token]))
            .unwrap();
        assert_eq!(answer, vec![TokenOutcome::Accepted]);
        // The lease runs out before the commit; the answer still holds.
        c.advance(LEASE + Duration::from_secs(1));
        let e = peer.claim_one(q(), me(2), LEASE).await.unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::Unavailable,
            "the write lock is held: {e}"
        );
        tx.commit().unwrap();
        assert!(peer.claim_one(q(), me(2), LEASE).await.unwrap().is_none());
        assert_eq!(payments(&conn), 1);
    }

    #[tokio::test]
    async fn completing_a_stream_head_in_a_transaction_promotes_the_next_item_at_the_commit() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let s = StreamKey::new("order-7").unwrap();
        store
            .enqueue(EnqueueParams::new(vec![
                NewItem::new(q(), b"first".to_vec()).stream(s.clone()),
                NewItem::new(q(), b"second".to_vec()).stream(s),
            ]))
            .await
            .unwrap();
        let head = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
        assert_eq!(head.item.payload, b"first");
        let mut conn = store.connection().unwrap();
        business(&conn);
        let tx = immediate(&mut conn);
        pay(&tx, &head);
        store
            .complete_in_tx(&tx, CompleteParams::new(vec![head.token]))
            .unwrap();
        tx.commit().unwrap();
        let next = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
        assert_eq!(
            next.item.payload, b"second",
            "G9 holds across the transaction"
        );
    }

    #[tokio::test]
    async fn bad_params_answer_invalid_input_and_leave_the_callers_transaction_as_it_was() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let (store, mut conn, lease) = claimed(&dir, &c).await;
        let tx = immediate(&mut conn);
        pay(&tx, &lease);
        let e = store
            .complete_in_tx(&tx, CompleteParams::new(vec![]))
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("tokens"), "{e}");
        let e = store.fail_in_tx(&tx, FailParams::new(vec![])).unwrap_err();
        assert!(e.invalid_field().is_some(), "{e}");
        let e = store
            .release_in_tx(&tx, ReleaseParams::new(vec![]))
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("tokens"), "{e}");
        tx.commit().unwrap();
        assert_eq!(payments(&conn), 1, "the caller's own row is kept");
        let it = store.item_get(lease.item.id).await.unwrap().unwrap();
        assert_eq!(it.state, ItemState::Running, "nothing written to the item");
    }

    #[tokio::test]
    async fn a_file_without_the_store_schema_is_a_schema_conflict() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let (store, _conn, lease) = claimed(&dir, &c).await;
        let mut other = rusqlite::Connection::open(dir.path().join("other.db")).unwrap();
        let tx = other.transaction().unwrap();
        let e = store
            .complete_in_tx(&tx, CompleteParams::new(vec![lease.token]))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    }
}

mod partitioned {
    //! G14 on SQLite: the `phash` column, the `tenure_stream_pins` table, and two opens
    //! of one file acting as two instances.

    use super::*;
    use std::collections::{HashMap, HashSet};

    use tenure_core::partition::{key_hash, takes};
    use tenure_core::{
        CompleteParams, DeregisterParams, EvictParams, HeartbeatParams, ItemId, Partitioning,
        PurgeParams, TokenOutcome,
    };

    fn pclaim(owner: &OwnerId, limit: u32, partitions: u32) -> ClaimParams {
        ClaimParams::new(q(), owner.clone(), limit, LEASE)
            .partitioned(Partitioning::new(partitions))
    }

    async fn register(store: &SqliteStore, owner: &OwnerId) {
        store
            .instance_heartbeat(HeartbeatParams::new(owner.clone()))
            .await
            .unwrap();
    }

    fn pins(store: &SqliteStore) -> Vec<(String, String)> {
        let conn = store.connection().unwrap();
        let mut stmt = conn
            .prepare("SELECT stream, instance FROM tenure_stream_pins ORDER BY stream")
            .unwrap();
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows
    }

    /// `(id, stream, phash)` of every row, in enqueue order.
    fn hashes(path: &Path) -> Vec<(ItemId, Option<StreamKey>, i64)> {
        let conn = rusqlite::Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT id, stream, phash FROM tenure_items ORDER BY seq")
            .unwrap();
        let rows = stmt
            .query_map([], |r| {
                let id: Vec<u8> = r.get(0)?;
                let stream: Option<String> = r.get(1)?;
                Ok((id, stream, r.get(2)?))
            })
            .unwrap()
            .map(Result::unwrap)
            .map(|(id, stream, h)| {
                let id = ItemId::from_uuid(uuid::Uuid::from_slice(&id).unwrap());
                (id, stream.map(|s| StreamKey::new(s).unwrap()), h)
            })
            .collect();
        rows
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_opens_as_two_instances_split_the_work_by_partition_without_overlap_and_take_all() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let c = clock();
        let a = open(&path, &c).await;
        let b = open(&path, &c).await;
        let (wa, wb) = (me(1), me(2));
        register(&a, &wa).await;
        register(&b, &wb).await;
        // 150 items without a stream and 15 streams of 4 items each, interleaved.
        let mut items = Vec::new();
        for i in 0..150u32 {
            items.push(NewItem::new(q(), i.to_le_bytes().to_vec()));
            if i % 10 == 0 {
                for n in 0..4u32 {
                    let s = StreamKey::new(format!("s{}", i / 10)).unwrap();
                    items.push(NewItem::new(q(), n.to_le_bytes().to_vec()).stream(s));
                }
            }
        }
        let total = items.len();
        a.enqueue(EnqueueParams::new(items)).await.unwrap();
        let partitions = 64;
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
        let mut tasks = Vec::new();
        for (store, owner) in [(a.clone(), wa.clone()), (b.clone(), wb.clone())] {
            let barrier = barrier.clone();
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let mut mine = Vec::new();
                loop {
                    // Only this instance's own completions can add to its share (its
                    // pinned streams' next heads), so an empty claim means it is done.
                    let leases = store.claim(pclaim(&owner, 7, partitions)).await.unwrap();
                    if leases.is_empty() {
                        return (owner, mine);
                    }
                    let tokens: Vec<_> = leases.iter().map(|l| l.token).collect();
                    let outs = store
                        .complete(CompleteParams::new(tokens.clone()))
                        .await
                        .unwrap();
                    assert!(outs.iter().all(|o| *o == TokenOutcome::Accepted));
                    mine.extend(leases.into_iter().map(|l| l.item));
                }
            }));
        }
        let mut by_item: HashMap<ItemId, OwnerId> = HashMap::new();
        let mut per_owner = Vec::new();
        for t in tasks {
            let (owner, mine) = t.await.unwrap();
            per_owner.push(mine.len());
            for item in mine {
                let p = Partitioning::new(partitions)
                    .partition_of(key_hash(item.stream.as_ref(), item.id));
                // w1 sorts before w2: rank 0 and 1 of 2.
                let rank = if owner == me(1) { 0 } else { 1 };
                assert!(
                    takes(p, rank, 2),
                    "{owner} took {} of partition {p}, not its share",
                    item.id
                );
                assert!(
                    by_item.insert(item.id, owner.clone()).is_none(),
                    "{} handed out twice",
                    item.id
                );
            }
        }
        assert_eq!(by_item.len(), total, "together they took everything");
        assert!(
            per_owner.iter().all(|n| *n > 0),
            "both took work: {per_owner:?}"
        );
        assert_eq!(a.queue_counts(&q()).await.unwrap().pending(), 0);
        // Every stream was pinned to the one instance that took all of its items.
        let owners: HashMap<String, String> = pins(&a).into_iter().collect();
        assert_eq!(owners.len(), 15, "{owners:?}");
    }

    #[tokio::test]
    async fn a_stream_stays_with_its_instance_until_that_instance_is_evicted() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let s = StreamKey::new("orders-9").unwrap();
        for n in 0..3u32 {
            store
                .enqueue_one(NewItem::new(q(), n.to_le_bytes().to_vec()).stream(s.clone()))
                .await
                .unwrap();
        }
        // One partition: all unpinned work falls to rank 0.
        let (w0, w1) = (me(0), me(1));
        register(&store, &w1).await;
        let first = store.claim(pclaim(&w1, 10, 1)).await.unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(pins(&store), vec![("orders-9".into(), "w1".into())]);
        store.complete_one(first[0].token).await.unwrap();
        // w0 arrives and takes rank 0, but the stream stays pinned to w1.
        register(&store, &w0).await;
        assert!(store.claim(pclaim(&w0, 10, 1)).await.unwrap().is_empty());
        let second = store.claim(pclaim(&w1, 10, 1)).await.unwrap();
        assert_eq!(second.len(), 1, "the pin beats the partition");
        store.complete_one(second[0].token).await.unwrap();
        // w1 falls silent and is evicted: its pin goes, the stream goes by partition.
        c.advance(Duration::from_secs(60));
        register(&store, &w0).await;
        let evicted = store
            .instance_evict_stale(EvictParams::new(Duration::from_secs(30)))
            .await
            .unwrap();
        assert_eq!(evicted.instances, vec![w1.clone()]);
        assert!(pins(&store).is_empty());
        let third = store.claim(pclaim(&w0, 10, 1)).await.unwrap();
        assert_eq!(third.len(), 1);
        assert_eq!(pins(&store), vec![("orders-9".into(), "w0".into())]);
    }

    #[tokio::test]
    async fn deregistering_drops_the_instances_pins_and_purge_drops_pins_of_finished_streams() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let w1 = me(1);
        register(&store, &w1).await;
        for name in ["x", "y"] {
            for n in 0..2u32 {
                let s = StreamKey::new(name).unwrap();
                store
                    .enqueue_one(NewItem::new(q(), n.to_le_bytes().to_vec()).stream(s))
                    .await
                    .unwrap();
            }
        }
        let leases = store.claim(pclaim(&w1, 10, 1)).await.unwrap();
        assert_eq!(leases.len(), 2);
        assert_eq!(pins(&store).len(), 2);
        // Stream x finishes entirely; y still has an item queued.
        let x: Vec<_> = leases
            .iter()
            .filter(|l| l.item.stream.as_ref().unwrap().as_str() == "x")
            .collect();
        store.complete_one(x[0].token).await.unwrap();
        let next = store.claim(pclaim(&w1, 10, 1)).await.unwrap();
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].item.stream.as_ref().unwrap().as_str(), "x");
        store.complete_one(next[0].token).await.unwrap();
        store
            .purge(PurgeParams::new(Duration::from_secs(1), 100))
            .await
            .unwrap();
        assert_eq!(pins(&store), vec![("y".into(), "w1".into())]);
        // Leaving the registry drops the rest.
        let gone = store
            .instance_deregister(DeregisterParams::new(w1.clone()))
            .await
            .unwrap();
        assert_eq!(gone.released, 1);
        assert!(pins(&store).is_empty());
    }

    #[tokio::test]
    async fn an_unregistered_owner_is_not_found_and_not_even_recovery_is_written() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let id = store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()).stream(StreamKey::new("s").unwrap()))
            .await
            .unwrap()
            .id;
        store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
        c.advance(LEASE * 2);
        let e = store.claim(pclaim(&me(9), 10, 16)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        assert!(
            matches!(&e, tenure_core::Error::NotFound { what: "instance", id } if id == "w9"),
            "{e:?}"
        );
        let item = store.item_get(id).await.unwrap().unwrap();
        assert_eq!(
            item.state,
            ItemState::Running,
            "the expired lease was left alone"
        );
        assert_eq!(item.stalls, 0);
        assert!(pins(&store).is_empty());
    }

    #[tokio::test]
    async fn ordinary_claims_ignore_pins_and_pin_nothing() {
        let dir = TempDir::new().unwrap();
        let c = clock();
        let store = open(&db(&dir), &c).await;
        let w1 = me(1);
        register(&store, &w1).await;
        let s = StreamKey::new("s").unwrap();
        for n in 0..2u32 {
            store
                .enqueue_one(NewItem::new(q(), n.to_le_bytes().to_vec()).stream(s.clone()))
                .await
                .unwrap();
        }
        let first = store.claim(pclaim(&w1, 10, 1)).await.unwrap();
        store.complete_one(first[0].token).await.unwrap();
        assert_eq!(pins(&store), vec![("s".into(), "w1".into())]);
        // An unregistered owner, without partitioning, takes the pinned stream's head.
        let other = store.claim_one(q(), me(7), LEASE).await.unwrap();
        assert!(other.is_some());
        assert_eq!(pins(&store), vec![("s".into(), "w1".into())]);
        let plain = store
            .enqueue_one(NewItem::new(q(), b"free".to_vec()).stream(StreamKey::new("t").unwrap()))
            .await
            .unwrap();
        let got = store.claim_one(q(), me(7), LEASE).await.unwrap().unwrap();
        assert_eq!(got.item.id, plain.id);
        assert_eq!(pins(&store).len(), 1, "an ordinary claim pins nothing");
    }

    #[tokio::test]
    async fn enqueue_stores_the_fixed_hash_of_the_stream_or_the_id() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let store = open(&path, &clock()).await;
        store
            .enqueue(EnqueueParams::new(vec![
                NewItem::new(q(), b"a".to_vec()),
                NewItem::new(q(), b"b".to_vec()).stream(StreamKey::new("orders:42").unwrap()),
            ]))
            .await
            .unwrap();
        let rows = hashes(&path);
        assert_eq!(rows.len(), 2);
        for (id, stream, h) in rows {
            assert_eq!(h, key_hash(stream.as_ref(), id));
            assert!(h >= 0);
        }
    }

    #[tokio::test]
    async fn a_version_1_file_is_migrated_with_the_hash_of_every_existing_item() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let c = clock();
        let (ready_ids, done_id) = {
            let store =
                SqliteStore::open(SqliteConfig::new(&path).clock(c.clone()).keep_done(true))
                    .await
                    .unwrap();
            let mut ids = Vec::new();
            for i in 0..20u32 {
                let mut item = NewItem::new(q(), i.to_le_bytes().to_vec());
                if i % 3 == 0 {
                    item = item.stream(StreamKey::new(format!("s{}", i % 2)).unwrap());
                }
                ids.push(store.enqueue_one(item).await.unwrap().id);
            }
            let done = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
            store.complete_one(done.token).await.unwrap();
            (ids, done.item.id)
        };
        // Take the file back to version 1: no hash column, no pins table.
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(
                "DROP INDEX tenure_items_list;
                 DROP TABLE tenure_queues;
                 ALTER TABLE tenure_items DROP COLUMN phash;
                 DROP TABLE tenure_stream_pins;
                 ALTER TABLE tenure_items DROP COLUMN lease;
                 UPDATE tenure_meta SET value = 1 WHERE key = 'schema_version';",
            )
            .unwrap();
        }
        assert_eq!(SCHEMA_VERSION, 6);
        let store = open(&path, &c).await;
        let rows = hashes(&path);
        assert_eq!(rows.len(), 20, "the finished item was kept too");
        assert!(rows.iter().any(|(id, _, _)| *id == done_id));
        for (id, stream, h) in &rows {
            assert_eq!(*h, key_hash(stream.as_ref(), *id), "item {id}");
        }
        assert!(ready_ids.iter().all(|id| rows.iter().any(|r| r.0 == *id)));
        let version: i64 = rusqlite::Connection::open(&path)
            .unwrap()
            .query_row(
                "SELECT value FROM tenure_meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        // The migrated items are claimed by partition: with two instances, each takes
        // exactly the unfinished items (stream heads only) its rank is given.
        let (w1, w2) = (me(1), me(2));
        register(&store, &w1).await;
        register(&store, &w2).await;
        let partitions = 10;
        let mine = store.claim(pclaim(&w1, 100, partitions)).await.unwrap();
        let theirs = store.claim(pclaim(&w2, 100, partitions)).await.unwrap();
        for (leases, rank) in [(&mine, 0), (&theirs, 1)] {
            for l in leases.iter() {
                let p = Partitioning::new(partitions)
                    .partition_of(key_hash(l.item.stream.as_ref(), l.item.id));
                assert!(takes(p, rank, 2), "rank {rank} took partition {p}");
            }
        }
        let mut seen = HashSet::new();
        for l in mine.iter().chain(theirs.iter()) {
            assert!(seen.insert(l.item.id));
        }
        // 20 items, one done; streams s0 (i = 0, 6, 12, 18; the first done) and s1
        // (3, 9, 15) each offer one head: 13 unstreamed + 2 heads.
        assert_eq!(seen.len(), 15);
    }

    /// Version 3 only rewrites the state check of `tenure_items` from an `IN` list to
    /// comparisons (the list cost a temporary b-tree on every write of `state`): a
    /// version 2 file keeps its rows, its new definition is the comparison form, and
    /// the check still refuses a state outside the four.
    #[tokio::test]
    async fn a_version_2_file_gets_the_state_check_without_an_in_list_and_keeps_its_items() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let c = clock();
        let ids = {
            let store = open(&path, &c).await;
            let mut ids = Vec::new();
            for i in 0..5u32 {
                let item = NewItem::new(q(), i.to_le_bytes().to_vec());
                ids.push(store.enqueue_one(item).await.unwrap().id);
            }
            ids
        };
        let table_sql = |path: &Path| -> String {
            rusqlite::Connection::open(path)
                .unwrap()
                .query_row(
                    "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'tenure_items'",
                    [],
                    |r| r.get(0),
                )
                .unwrap()
        };
        let or_form =
            "CHECK (state = 'ready' OR state = 'running' OR state = 'done' OR state = 'dead')";
        let in_form = "CHECK (state IN ('ready', 'running', 'done', 'dead'))";
        assert!(table_sql(&path).contains(or_form), "{}", table_sql(&path));
        // Take the file back to version 2: the IN list.
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            let v: i64 = conn
                .query_row("PRAGMA schema_version", [], |r| r.get(0))
                .unwrap();
            conn.execute_batch("PRAGMA writable_schema = ON").unwrap();
            conn.execute(
                "UPDATE sqlite_schema SET sql = replace(sql, ?1, ?2) WHERE name = 'tenure_items'",
                [or_form, in_form],
            )
            .unwrap();
            conn.execute_batch(&format!(
                "PRAGMA schema_version = {}; PRAGMA writable_schema = OFF;
                 ALTER TABLE tenure_items DROP COLUMN lease;
                 UPDATE tenure_meta SET value = 2 WHERE key = 'schema_version';",
                v + 1
            ))
            .unwrap();
            conn.execute_batch("DROP INDEX tenure_items_list; DROP TABLE tenure_queues;")
                .unwrap();
        }
        assert!(table_sql(&path).contains(in_form));
        let store = open(&path, &c).await;
        let sql = table_sql(&path);
        assert!(sql.contains(or_form) && !sql.contains(in_form), "{sql}");
        let counts = store.queue_counts(&q()).await.unwrap();
        assert_eq!(counts.ready, 5);
        let lease = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
        assert_eq!(lease.item.id, ids[0]);
        let conn = rusqlite::Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row(
                "SELECT value FROM tenure_meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let refused = conn.execute("UPDATE tenure_items SET state = 'lost'", []);
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("CHECK constraint failed"),
            "the check still holds"
        );
        let ok: i64 = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
            .map(|s| i64::from(s == "ok"))
            .unwrap();
        assert_eq!(ok, 1);
    }

    /// Version 4 adds the listing index and the paused-queue table: a version 3 file
    /// keeps its items, and after the upgrade they list, pause and cancel.
    #[tokio::test]
    async fn a_version_3_file_gains_listing_and_pause_and_keeps_its_items() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let c = clock();
        let ids = {
            let store = open(&path, &c).await;
            let mut ids = Vec::new();
            for i in 0..3u32 {
                let item = NewItem::new(q(), i.to_le_bytes().to_vec());
                ids.push(store.enqueue_one(item).await.unwrap().id);
            }
            ids
        };
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(
                "DROP INDEX tenure_items_list;
                 DROP TABLE tenure_queues;
                 ALTER TABLE tenure_items DROP COLUMN lease;
                 UPDATE tenure_meta SET value = 3 WHERE key = 'schema_version';",
            )
            .unwrap();
        }
        let store = open(&path, &c).await;
        let page = store
            .item_list(tenure_core::ItemListParams::new(
                q(),
                tenure_core::ListState::Ready,
            ))
            .await
            .unwrap();
        let listed: Vec<_> = page.items.iter().map(|i| i.id).collect();
        assert_eq!(listed, ids);
        assert!(store
            .queue_pause(tenure_core::PauseParams::new(q()))
            .await
            .unwrap());
        assert!(store.claim_one(q(), me(1), LEASE).await.unwrap().is_none());
        assert!(store.queue_counts(&q()).await.unwrap().paused);
        store.cancel_one(ids[0]).await.unwrap();
        let version: i64 = rusqlite::Connection::open(&path)
            .unwrap()
            .query_row(
                "SELECT value FROM tenure_meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    /// Version 5 leaves running items out of the listing index: a version 4 file (the
    /// index over every row) keeps its items and leases, and after the upgrade its
    /// running items, leases and queues still list, read through the expiry index.
    #[tokio::test]
    async fn a_version_4_file_lists_its_running_items_from_the_expiry_index() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let c = clock();
        let other = QueueName::new("other").unwrap();
        let (ids, lease) = {
            let store = open(&path, &c).await;
            let mut ids = Vec::new();
            for i in 0..3u32 {
                let item = NewItem::new(q(), i.to_le_bytes().to_vec());
                ids.push(store.enqueue_one(item).await.unwrap().id);
            }
            store
                .enqueue_one(NewItem::new(other.clone(), b"o".to_vec()))
                .await
                .unwrap();
            let lease = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
            // The only item of `other` is running: the queue must still be listed.
            store
                .claim_one(other.clone(), me(2), LEASE)
                .await
                .unwrap()
                .unwrap();
            store.close().await.unwrap();
            (ids, lease)
        };
        let index_sql = |path: &Path| -> String {
            rusqlite::Connection::open(path)
                .unwrap()
                .query_row(
                    "SELECT sql FROM sqlite_schema WHERE name = 'tenure_items_list'",
                    [],
                    |r| r.get(0),
                )
                .unwrap()
        };
        assert!(index_sql(&path).contains("WHERE state <> 'running'"));
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(
                "DROP INDEX tenure_items_list;
                 CREATE INDEX tenure_items_list ON tenure_items (queue, state, seq);
                 ALTER TABLE tenure_items DROP COLUMN lease;
                 UPDATE tenure_meta SET value = 4 WHERE key = 'schema_version';",
            )
            .unwrap();
        }
        assert!(!index_sql(&path).contains("WHERE"));
        let store = open(&path, &c).await;
        assert!(index_sql(&path).contains("WHERE state <> 'running'"));
        let running = store
            .item_list(tenure_core::ItemListParams::new(
                q(),
                tenure_core::ListState::Running,
            ))
            .await
            .unwrap();
        let listed: Vec<_> = running.items.iter().map(|i| i.id).collect();
        assert_eq!(listed, vec![ids[0]]);
        let ready = store
            .item_list(tenure_core::ItemListParams::new(
                q(),
                tenure_core::ListState::Ready,
            ))
            .await
            .unwrap();
        let listed: Vec<_> = ready.items.iter().map(|i| i.id).collect();
        assert_eq!(listed, ids[1..].to_vec());
        let leases = store
            .lease_list(tenure_core::LeaseListParams::new(q()))
            .await
            .unwrap();
        assert_eq!(leases.leases.len(), 1);
        // A version-4 file kept no lease ids: the lease reads as the one its code held.
        let legacy = LeaseToken::new(lease.token.id, lease.token.attempt, LeaseId::NONE);
        assert_eq!(leases.leases[0].token, legacy);
        assert_eq!(store.queue_list().await.unwrap(), vec![other, q()]);
        store.complete_one(legacy).await.unwrap();
        let version: i64 = rusqlite::Connection::open(&path)
            .unwrap()
            .query_row(
                "SELECT value FROM tenure_meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let ok: String = rusqlite::Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
    }

    /// A version-5 file (no lease ids) gains `lease` (G3): a lease granted before the
    /// upgrade is on lease 0, the token its code held, and finishes as before; a claim
    /// after the upgrade mints a lease id, and that attempt's token without it (as the
    /// old code would send) is refused.
    #[tokio::test]
    async fn a_version_5_file_keeps_its_leases_and_fences_new_claims_on_their_lease_ids() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let c = clock();
        let (old, waiting) = {
            let store = open(&path, &c).await;
            let a = store
                .enqueue_one(NewItem::new(q(), b"a".to_vec()))
                .await
                .unwrap();
            let b = store
                .enqueue_one(NewItem::new(q(), b"b".to_vec()))
                .await
                .unwrap();
            let lease = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
            assert_eq!(lease.token.id, a.id);
            store.close().await.unwrap();
            (lease, b.id)
        };
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(
                "ALTER TABLE tenure_items DROP COLUMN lease;
                 UPDATE tenure_meta SET value = 5 WHERE key = 'schema_version';",
            )
            .unwrap();
        }
        let store = open(&path, &c).await;
        let legacy = LeaseToken::new(old.token.id, old.token.attempt, LeaseId::NONE);
        let it = store.item_get(old.token.id).await.unwrap().unwrap();
        assert_eq!(it.token(), legacy);
        let fresh = store.claim_one(q(), me(2), LEASE).await.unwrap().unwrap();
        assert_eq!(fresh.token.id, waiting);
        assert_ne!(fresh.token.lease, LeaseId::NONE);
        let unleased = LeaseToken::new(fresh.token.id, fresh.token.attempt, LeaseId::NONE);
        assert_eq!(
            store.complete_one(unleased).await.unwrap_err().kind(),
            tenure_core::ErrorKind::LeaseLost
        );
        store.complete_one(legacy).await.unwrap();
        store.complete_one(fresh.token).await.unwrap();
    }
}
