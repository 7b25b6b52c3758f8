//! G14 on SQLite: the `phash` column, the `tenure_stream_pins` table, and two opens
//! of one file acting as two instances, and the migration of a version 1 file (which
//! back-fills `phash`). The later versions' migrations are in `migrations.rs`.

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
                 DROP TABLE tenure_history;
                 UPDATE tenure_meta SET value = 1 WHERE key = 'schema_version';",
        )
        .unwrap();
    }
    assert_eq!(SCHEMA_VERSION, 11);
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
