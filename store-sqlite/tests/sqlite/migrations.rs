//! Migrations of files made by older versions of the store (schema versions 2 to 9):
//! each keeps its rows and leases, and gains what its version adds. Version 1's
//! migration (the `phash` back-fill) is with the partitioned cases.

use super::*;

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
                 ALTER TABLE tenure_items DROP COLUMN progress; DROP INDEX tenure_items_ready_key; ALTER TABLE tenure_items DROP COLUMN lq;
             DROP INDEX tenure_items_ready_fair;
                 ALTER TABLE tenure_items DROP COLUMN ftag;
                 DROP TABLE tenure_fair_queues;
                 DROP TABLE tenure_fair;
                 DROP INDEX tenure_items_running_limit;
                 ALTER TABLE tenure_items DROP COLUMN limit_key;
                 DROP TABLE tenure_limits;
                 DROP TABLE tenure_limit_keys;
                 DROP TABLE tenure_limit_starts;
                 DROP TABLE tenure_limit_defers;
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
                 ALTER TABLE tenure_items DROP COLUMN progress; DROP INDEX tenure_items_ready_key; ALTER TABLE tenure_items DROP COLUMN lq;
             DROP INDEX tenure_items_ready_fair;
                 ALTER TABLE tenure_items DROP COLUMN ftag;
                 DROP TABLE tenure_fair_queues;
                 DROP TABLE tenure_fair;
                 DROP INDEX tenure_items_running_limit;
                 ALTER TABLE tenure_items DROP COLUMN limit_key;
                 DROP TABLE tenure_limits;
                 DROP TABLE tenure_limit_keys;
                 DROP TABLE tenure_limit_starts;
                 DROP TABLE tenure_limit_defers;
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
                 ALTER TABLE tenure_items DROP COLUMN progress; DROP INDEX tenure_items_ready_key; ALTER TABLE tenure_items DROP COLUMN lq;
             DROP INDEX tenure_items_ready_fair;
                 ALTER TABLE tenure_items DROP COLUMN ftag;
                 DROP TABLE tenure_fair_queues;
                 DROP TABLE tenure_fair;
                 DROP INDEX tenure_items_running_limit;
                 ALTER TABLE tenure_items DROP COLUMN limit_key;
                 DROP TABLE tenure_limits;
                 DROP TABLE tenure_limit_keys;
                 DROP TABLE tenure_limit_starts;
                 DROP TABLE tenure_limit_defers;
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
            "ALTER TABLE tenure_items DROP COLUMN progress; DROP INDEX tenure_items_ready_key; ALTER TABLE tenure_items DROP COLUMN lq;
             DROP INDEX tenure_items_ready_fair;
                 ALTER TABLE tenure_items DROP COLUMN ftag;
                 DROP TABLE tenure_fair_queues;
                 DROP TABLE tenure_fair;
                 DROP INDEX tenure_items_running_limit;
                 ALTER TABLE tenure_items DROP COLUMN limit_key;
                 DROP TABLE tenure_limits;
                 DROP TABLE tenure_limit_keys;
                 DROP TABLE tenure_limit_starts;
                 DROP TABLE tenure_limit_defers;
                 ALTER TABLE tenure_items DROP COLUMN lease;
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

/// A version-6 file (no limit keys) gains queue limits (G16): a lease granted before
/// the upgrade has no limit key and counts for its queue only, so a queue-wide limit
/// of 1 holds while it runs and comes back when it finishes; keyed items enqueued
/// after the upgrade are counted by key.
#[tokio::test]
async fn a_version_6_file_counts_its_running_items_under_new_limits() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let c = clock();
    let old = {
        let store = open(&path, &c).await;
        store
            .enqueue(EnqueueParams::new(vec![
                NewItem::new(q(), b"a".to_vec()),
                NewItem::new(q(), b"b".to_vec()),
            ]))
            .await
            .unwrap();
        let lease = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
        store.close().await.unwrap();
        lease
    };
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "{}UPDATE tenure_meta SET value = 6 WHERE key = 'schema_version';",
            "ALTER TABLE tenure_items DROP COLUMN progress; DROP INDEX tenure_items_ready_key; ALTER TABLE tenure_items DROP COLUMN lq;
             DROP INDEX tenure_items_ready_fair;
             ALTER TABLE tenure_items DROP COLUMN ftag;
             DROP TABLE tenure_fair_queues;
             DROP TABLE tenure_fair;
             DROP INDEX tenure_items_running_limit;
             ALTER TABLE tenure_items DROP COLUMN limit_key;
             DROP TABLE tenure_limits;
             DROP TABLE tenure_limit_keys;
             DROP TABLE tenure_limit_starts;
             DROP TABLE tenure_limit_defers;
             "
        ))
        .unwrap();
    }
    let store = open(&path, &c).await;
    store
        .limits_set(tenure_core::LimitsParams::new(
            q(),
            tenure_core::QueueLimits::new().concurrency(1),
        ))
        .await
        .unwrap();
    assert!(store.claim_one(q(), me(2), LEASE).await.unwrap().is_none());
    store.complete_one(old.token).await.unwrap();
    let next = store.claim_one(q(), me(2), LEASE).await.unwrap().unwrap();
    store.complete_one(next.token).await.unwrap();
    let k = tenure_core::LimitKey::new("k").unwrap();
    store
        .limits_set(tenure_core::LimitsParams::new(
            q(),
            tenure_core::QueueLimits::new().per_key(1),
        ))
        .await
        .unwrap();
    store
        .enqueue(EnqueueParams::new(vec![
            NewItem::new(q(), b"c".to_vec()).limit_key(k.clone()),
            NewItem::new(q(), b"d".to_vec()).limit_key(k),
        ]))
        .await
        .unwrap();
    let leases = store
        .claim(ClaimParams::new(q(), me(3), 10, LEASE))
        .await
        .unwrap();
    assert_eq!(leases.len(), 1, "one item of the key at a time");
}

/// A version-7 file (no fair shares) gains them (G18): its waiting items are tagged
/// when the first item with a fairness key arrives, so none is skipped by the fair
/// walk, and the earlier items, enqueued first, are claimed first.
#[tokio::test]
async fn a_version_7_file_keeps_its_waiting_items_when_a_queue_turns_fair() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let c = clock();
    let old = {
        let store = open(&path, &c).await;
        let ids = store
            .enqueue(EnqueueParams::new(vec![
                NewItem::new(q(), b"a".to_vec()),
                NewItem::new(q(), b"b".to_vec()),
            ]))
            .await
            .unwrap();
        store.close().await.unwrap();
        ids
    };
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "ALTER TABLE tenure_items DROP COLUMN progress; DROP INDEX tenure_items_ready_key; ALTER TABLE tenure_items DROP COLUMN lq;
             DROP INDEX tenure_items_ready_fair;
             ALTER TABLE tenure_items DROP COLUMN ftag;
             DROP TABLE tenure_fair_queues;
             DROP TABLE tenure_fair;
             UPDATE tenure_meta SET value = 7 WHERE key = 'schema_version';",
        )
        .unwrap();
    }
    let store = open(&path, &c).await;
    let tenant = tenure_core::FairnessKey::new("t").unwrap();
    let new = store
        .enqueue_one(NewItem::new(q(), b"c".to_vec()).fairness_key(tenant))
        .await
        .unwrap();
    let leases = store
        .claim(ClaimParams::new(q(), me(1), 10, LEASE))
        .await
        .unwrap();
    let got: Vec<_> = leases.iter().map(|l| l.token.id).collect();
    assert_eq!(got.len(), 3, "every waiting item is claimable");
    assert_eq!(&got[..2], &[old[0].id, old[1].id][..]);
    assert_eq!(got[2], new.id);
}

/// A version-8 file (no `tenure_items_ready_key`) gains the key walk (G16): the
/// upgrade marks the waiting items of its limited queues, so an unkeyed item behind a
/// saturated key's backlog is still found by a claim that takes the key walk.
#[tokio::test]
async fn a_version_8_file_marks_the_items_of_its_limited_queues() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let c = clock();
    let key = tenure_core::LimitKey::new("hot").unwrap();
    {
        let store = open(&path, &c).await;
        store
            .limits_set(tenure_core::LimitsParams::new(
                q(),
                tenure_core::QueueLimits::new().per_key(1),
            ))
            .await
            .unwrap();
        let mut items: Vec<NewItem> = (0..100)
            .map(|_| NewItem::new(q(), b"hot".to_vec()).limit_key(key.clone()))
            .collect();
        items.push(NewItem::new(q(), b"plain".to_vec()));
        store.enqueue(EnqueueParams::new(items)).await.unwrap();
        store.close().await.unwrap();
    }
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "ALTER TABLE tenure_items DROP COLUMN progress; DROP INDEX tenure_items_ready_key; ALTER TABLE tenure_items DROP COLUMN lq;
             UPDATE tenure_meta SET value = 8 WHERE key = 'schema_version';",
        )
        .unwrap();
    }
    let store = open(&path, &c).await;
    let first = store
        .claim(ClaimParams::new(q(), me(1), 1, LEASE))
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    let next = store
        .claim(ClaimParams::new(q(), me(1), 10, LEASE))
        .await
        .unwrap();
    let got: Vec<&[u8]> = next.iter().map(|l| &l.item.payload[..]).collect();
    assert_eq!(got, [&b"plain"[..]]);
}

/// A version-9 file (no progress column) gains progress: its running item's lease is
/// kept, its holder's progress is stored with the next renewal and read back, and the
/// file records version 10.
#[tokio::test]
async fn a_version_9_file_keeps_its_leases_and_stores_progress_reported_with_renewals() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let c = clock();
    let lease = {
        let store = open(&path, &c).await;
        store
            .enqueue(EnqueueParams::new(vec![NewItem::new(q(), b"a".to_vec())]))
            .await
            .unwrap();
        let lease = store
            .claim(ClaimParams::new(q(), me(1), 1, LEASE))
            .await
            .unwrap()
            .remove(0);
        store.close().await.unwrap();
        lease
    };
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "ALTER TABLE tenure_items DROP COLUMN progress;
             UPDATE tenure_meta SET value = 9 WHERE key = 'schema_version';",
        )
        .unwrap();
    }
    let store = open(&path, &c).await;
    assert_eq!(
        store
            .item_get(lease.token.id)
            .await
            .unwrap()
            .unwrap()
            .progress,
        None
    );
    let progress = tenure_core::Progress::new(0.5, "half").unwrap();
    let renewed = store
        .renew(
            tenure_core::RenewParams::new(vec![lease.token], LEASE)
                .with_progress(vec![Some(progress.clone())]),
        )
        .await
        .unwrap();
    assert!(matches!(
        renewed[..],
        [tenure_core::RenewOutcome::Renewed { .. }]
    ));
    assert_eq!(
        store
            .item_get(lease.token.id)
            .await
            .unwrap()
            .unwrap()
            .progress,
        Some(progress.for_attempt(1))
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row(
            "SELECT value FROM tenure_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}
