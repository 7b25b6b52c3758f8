//! G14 on SQLite: the `phash` column, the `tenure_stream_pins` table, and two opens
//! of one file acting as two instances.
//!
//! Over 600 lines and kept one file: its cases are named `partitioned::...`, and the
//! migration cases of schema versions 2 to 5 grew here after version 1's (which
//! back-fills `phash`); moving them to a file of their own would rename those tests.

use super::*;
use std::collections::{HashMap, HashSet};

use tenure_core::partition::{key_hash, takes};
use tenure_core::{
    CompleteParams, DeregisterParams, EvictParams, HeartbeatParams, ItemId, Partitioning,
    PurgeParams, TokenOutcome,
};

fn pclaim(owner: &OwnerId, limit: u32, partitions: u32) -> ClaimParams {
    ClaimParams::new(q(), owner.clone(), limit, LEASE).partitioned(Partitioning::new(partitions))
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
            let p =
                Partitioning::new(partitions).partition_of(key_hash(item.stream.as_ref(), item.id));
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
        let store = SqliteStore::open(SqliteConfig::new(&path).clock(c.clone()).keep_done(true))
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
                 UPDATE tenure_meta SET value = 1 WHERE key = 'schema_version';",
        )
        .unwrap();
    }
    assert_eq!(SCHEMA_VERSION, 8);
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
            "DROP INDEX tenure_items_ready_fair;
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
            "DROP INDEX tenure_items_ready_fair;
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
            "DROP INDEX tenure_items_ready_fair;
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
