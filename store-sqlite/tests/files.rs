//! The database file in trouble and at rest: a damaged file is a non-retryable
//! `Corrupt` naming the file and the problem; an emptied file is never silently a
//! fresh store where the store can tell; `close` leaves no write-ahead log behind.

// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used)]

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;
use tenure_core::{
    EnqueueParams, Error, ErrorKind, ManualClock, NewItem, OwnerId, QueueName, Store, StoreExt,
    Timestamp,
};
use tenure_sqlite::{SqliteConfig, SqliteStore};

const LEASE: Duration = Duration::from_secs(30);

fn q() -> QueueName {
    QueueName::new("q").unwrap()
}

fn clock() -> ManualClock {
    ManualClock::new(Timestamp::from_micros(1_000_000_000))
}

fn db(dir: &TempDir) -> PathBuf {
    dir.path().join("work.db")
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

fn len(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.len())
}

async fn open(path: &Path) -> SqliteStore {
    SqliteStore::open(SqliteConfig::new(path).clock(clock()))
        .await
        .unwrap()
}

/// A store file with `n` items of 200 bytes, checkpointed and closed.
async fn filled(path: &Path, n: usize) {
    let store = open(path).await;
    let items = (0..n)
        .map(|_| NewItem::new(q(), vec![7; 200]))
        .collect::<Vec<_>>();
    store.enqueue(EnqueueParams::new(items)).await.unwrap();
    store.close().await.unwrap();
}

fn assert_corrupt_naming(e: &Error, path: &Path) {
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(!e.is_retryable());
    assert!(
        e.to_string().contains(&path.display().to_string()),
        "names the file: {e}"
    );
}

mod corrupt {
    use super::*;

    /// Every page after the first (the header and the start of the schema) is
    /// overwritten: the tables' pages are garbage.
    #[tokio::test]
    async fn a_damaged_file_is_corrupt_naming_the_file_and_the_problem_on_every_call() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        filled(&path, 500).await;
        let size = len(&path).unwrap();
        assert!(size > 8 * 4096, "{size}");
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start(4096 * 4)).unwrap();
        f.write_all(&vec![0xA5; usize::try_from(size).unwrap() - 4096 * 4])
            .unwrap();
        drop(f);
        let before = std::fs::read(&path).unwrap();

        let errors: Vec<Error> = match SqliteStore::open(SqliteConfig::new(&path)).await {
            Err(e) => vec![e],
            Ok(store) => {
                let mut v = Vec::new();
                for _ in 0..2 {
                    v.push(store.queue_counts(&q()).await.unwrap_err());
                    v.push(
                        store
                            .claim_one(q(), OwnerId::new("w").unwrap(), LEASE)
                            .await
                            .unwrap_err(),
                    );
                }
                v
            }
        };
        for e in &errors {
            assert_corrupt_naming(e, &path);
            let text = e.to_string();
            assert!(text.contains("malformed"), "what SQLite said: {text}");
            assert!(text.contains("integrity check:"), "{text}");
            assert!(!text.contains("integrity check: ok"), "{text}");
        }
        assert_eq!(std::fs::read(&path).unwrap(), before, "nothing was written");
    }

    /// A running store whose file is overwritten with something that is not a
    /// database answers Corrupt, not the retryable Unavailable.
    #[tokio::test]
    async fn an_open_file_overwritten_with_garbage_is_corrupt_not_unavailable() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let store = open(&path).await;
        store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap();
        store.close().await.unwrap();
        std::fs::write(&path, vec![0x5A; 8192]).unwrap();
        let e = store.queue_counts(&q()).await.unwrap_err();
        assert_corrupt_naming(&e, &path);
        assert_eq!(std::fs::read(&path).unwrap(), vec![0x5A; 8192]);
    }
}

mod emptied {
    use super::*;

    #[tokio::test]
    async fn a_store_whose_file_was_emptied_under_it_refuses_to_start_afresh() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let store = open(&path).await;
        store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap();
        // Replaced by an empty file (a new inode), as a careless restore would.
        std::fs::remove_file(&path).unwrap();
        let _ = std::fs::remove_file(sibling(&path, "-wal"));
        let _ = std::fs::remove_file(sibling(&path, "-shm"));
        std::fs::File::create(&path).unwrap();
        for _ in 0..2 {
            let e = store
                .enqueue_one(NewItem::new(q(), b"y".to_vec()))
                .await
                .unwrap_err();
            assert_corrupt_naming(&e, &path);
            assert!(e.to_string().contains("no longer holds"), "{e}");
        }
        assert_eq!(len(&path), Some(0), "nothing was written");
    }

    #[tokio::test]
    async fn a_zero_byte_file_beside_a_non_empty_log_is_refused_and_left_alone() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        std::fs::File::create(&path).unwrap();
        let wal = sibling(&path, "-wal");
        std::fs::write(&wal, vec![1; 4096]).unwrap();
        let e = SqliteStore::open(SqliteConfig::new(&path))
            .await
            .unwrap_err();
        assert_corrupt_naming(&e, &path);
        assert!(e.to_string().contains("-wal"), "{e}");
        assert_eq!((len(&path), len(&wal)), (Some(0), Some(4096)), "untouched");
    }

    /// Documented: nothing tells a zero-byte file alone from one made empty on purpose.
    #[tokio::test]
    async fn a_zero_byte_file_alone_becomes_a_fresh_store() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        std::fs::File::create(&path).unwrap();
        let store = open(&path).await;
        store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap();
        assert_eq!(store.queue_counts(&q()).await.unwrap().ready, 1);
    }
}

mod close {
    use super::*;

    #[tokio::test]
    async fn close_checkpoints_and_removes_the_log_and_keeps_every_item() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let store = open(&path).await;
        let other = store.clone();
        for _ in 0..20 {
            let items = (0..50)
                .map(|_| NewItem::new(q(), vec![1; 1000]))
                .collect::<Vec<_>>();
            store.enqueue(EnqueueParams::new(items)).await.unwrap();
        }
        let wal = sibling(&path, "-wal");
        assert!(
            len(&wal).unwrap_or(0) > 100_000,
            "the log grew: {:?}",
            len(&wal)
        );
        store.close().await.unwrap();
        assert_eq!(len(&wal), None, "no log is left beside the file");
        assert_eq!(len(&sibling(&path, "-shm")), None);
        // A later call on any handle opens the file again and sees every item.
        assert_eq!(other.queue_counts(&q()).await.unwrap().ready, 1_000);
        drop((store, other));
        let reopened = open(&path).await;
        assert_eq!(reopened.queue_counts(&q()).await.unwrap().ready, 1_000);
    }

    #[tokio::test]
    async fn close_with_a_reader_elsewhere_closes_and_says_the_log_stayed() {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        // The checkpoint waits for the reader up to the busy timeout.
        let store = SqliteStore::open(
            SqliteConfig::new(&path)
                .clock(clock())
                .busy_timeout(Duration::from_millis(50)),
        )
        .await
        .unwrap();
        store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap();
        let reader = store.connection().unwrap();
        let tx = reader.unchecked_transaction().unwrap();
        let _: i64 = tx
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .unwrap();
        store
            .enqueue_one(NewItem::new(q(), b"y".to_vec()))
            .await
            .unwrap();
        let e = store.close().await.unwrap_err();
        assert!(e.is_retryable(), "{e}");
        drop(tx);
        drop(reader);
        assert_eq!(store.queue_counts(&q()).await.unwrap().ready, 2);
        store.close().await.unwrap();
    }
}
