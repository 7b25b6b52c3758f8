use super::*;
use tenure_core::partition::{key_hash, takes, Partitioning};
use tenure_core::{HeartbeatParams, ItemId, StreamKey};

fn partitioned(queue: &str, who: &str, limit: u32) -> ClaimParams {
    ClaimParams::new(q(queue), owner(who), limit, LEASE).partitioned(Partitioning::default())
}

async fn pin(admin: &mut PgConnection, schema: &str, s: &StreamKey) -> Option<String> {
    sqlx::query_scalar(&format!(
        "SELECT pinned_to FROM {schema}.streams WHERE stream = $1"
    ))
    .bind(s.as_str())
    .fetch_one(admin)
    .await
    .unwrap()
}

async fn beat(store: &PgStore, who: &str) {
    store
        .instance_heartbeat(HeartbeatParams::new(owner(who)))
        .await
        .unwrap();
}

/// Rows written before migration 3 have no `phash`; the claim computes it in SQL,
/// so the SQL hash must be the Rust one, byte for byte.
#[tokio::test]
async fn the_sql_key_hash_agrees_with_rust_for_streams_and_ids() {
    let Some((store, mut admin, schema, _clock)) = open(false).await else {
        return;
    };
    let mut streams: Vec<String> = ["a", "orders:42", "é-ü-✓-𝄞", "x y z", &"k".repeat(200)]
        .iter()
        .map(|s| s.to_string())
        .collect();
    streams.extend((0..50).map(|i| format!("stream-{i}")));
    for s in &streams {
        let key = StreamKey::new(s.clone()).unwrap();
        let sql: i64 = sqlx::query_scalar(&format!(
            "SELECT {schema}.tenure_key_hash($1, gen_random_uuid())"
        ))
        .bind(s)
        .fetch_one(&mut admin)
        .await
        .unwrap();
        assert_eq!(sql, key_hash(Some(&key), ItemId::new()), "stream {s:?}");
    }
    let mut ids = vec![
        ItemId::from_uuid(uuid::Uuid::nil()),
        ItemId::from_uuid(uuid::Uuid::max()),
    ];
    ids.extend((0..50).map(|_| ItemId::new()));
    for id in ids {
        let sql: i64 = sqlx::query_scalar(&format!("SELECT {schema}.tenure_key_hash(NULL, $1)"))
            .bind(id.as_uuid())
            .fetch_one(&mut admin)
            .await
            .unwrap();
        assert_eq!(sql, key_hash(None, id), "id {id}");
    }
    // And what enqueue stores is Rust's hash.
    let key = StreamKey::new("stored").unwrap();
    let it = store
        .enqueue_one(NewItem::new(q("q"), b"x".to_vec()).stream(key.clone()))
        .await
        .unwrap();
    let stored: Option<i64> =
        sqlx::query_scalar(&format!("SELECT phash FROM {schema}.items WHERE id = $1"))
            .bind(it.id.as_uuid())
            .fetch_one(&mut admin)
            .await
            .unwrap();
    assert_eq!(stored, Some(key_hash(Some(&key), it.id)));
    store.close().await;
    drop_schema(&mut admin, &schema).await;
}

/// Rows with a NULL `phash` (enqueued before migration 3, or by older code during
/// a rolling deploy) are split exactly as if it had been stored.
#[tokio::test]
async fn rows_without_a_stored_hash_go_to_the_instance_their_hash_gives() {
    let Some((store, mut admin, schema, _clock)) = open(false).await else {
        return;
    };
    let (a, b) = ("inst-a", "inst-b");
    beat(&store, b).await;
    beat(&store, a).await;
    let mut items: Vec<NewItem> = (0..40)
        .map(|_| NewItem::new(q("q"), b"x".to_vec()))
        .collect();
    items.extend((0..20).map(|i| {
        NewItem::new(q("q"), b"s".to_vec()).stream(StreamKey::new(format!("old-{i}")).unwrap())
    }));
    let expected: Vec<(ItemId, Option<StreamKey>)> =
        items.iter().map(|i| (i.id, i.stream.clone())).collect();
    store
        .enqueue(tenure_core::EnqueueParams::new(items))
        .await
        .unwrap();
    sqlx::query(&format!("UPDATE {schema}.items SET phash = NULL"))
        .execute(&mut admin)
        .await
        .unwrap();
    let p = Partitioning::default();
    for (rank, who) in [a, b].into_iter().enumerate() {
        let got: std::collections::BTreeSet<ItemId> = store
            .claim(partitioned("q", who, 100))
            .await
            .unwrap()
            .iter()
            .map(|l| l.item.id)
            .collect();
        let want: std::collections::BTreeSet<ItemId> = expected
            .iter()
            .filter(|(id, s)| takes(p.partition_of(key_hash(s.as_ref(), *id)), rank as u32, 2))
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(got, want, "{who}");
    }
    store.close().await;
    drop_schema(&mut admin, &schema).await;
}

/// The partitioned claim's pick scans `items_claim` too, whether or not the plan
/// is generic, after most rows finished. 2,500 streams of two items: enough rows
/// in `streams` that a lookup by key beats reading the whole table (finishes no
/// longer write a stream's row, so the table is as small as its streams).
#[tokio::test]
async fn the_partitioned_pick_scans_the_ready_index() {
    let Some((store, mut admin, schema, clock)) = open(false).await else {
        return;
    };
    beat(&store, "explainer").await;
    beat(&store, "other").await;
    let items: Vec<NewItem> = (0..10_000)
        .map(|i| {
            let it = NewItem::new(q("q"), b"x".to_vec());
            if i % 2 == 0 {
                it.stream(StreamKey::new(format!("s{}", i % 5_000)).unwrap())
            } else {
                it
            }
        })
        .collect();
    store
        .enqueue(tenure_core::EnqueueParams::new(items))
        .await
        .unwrap();
    sqlx::raw_sql(&format!("ANALYZE {schema}.items"))
        .execute(&mut admin)
        .await
        .unwrap();
    // Drain most of it with ordinary claims, then take fresh statistics.
    for _ in 0..9 {
        let leases = store
            .claim(ClaimParams::new(q("q"), owner("w"), 1_000, LEASE))
            .await
            .unwrap();
        store
            .complete(CompleteParams::new(
                leases.iter().map(|l| l.token).collect(),
            ))
            .await
            .unwrap();
    }
    let now = clock.now().as_micros();
    for analyze_first in [false, true] {
        if analyze_first {
            sqlx::raw_sql(&format!("ANALYZE {schema}.items; ANALYZE {schema}.streams"))
                .execute(&mut admin)
                .await
                .unwrap();
        }
        for mode in ["force_custom_plan", "force_generic_plan"] {
            let mut tx = admin.begin().await.unwrap();
            sqlx::raw_sql(&format!(
                "SET LOCAL plan_cache_mode = {mode}; \
                 PREPARE pclaim(text[], int8, int8, text, int8, bool, int8, int8) AS {}",
                store.sql().claim_partitioned
            ))
            .execute(&mut *tx)
            .await
            .unwrap();
            let plan: Vec<String> = sqlx::query_scalar(&format!(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) \
                 EXECUTE pclaim('{{q}}', {now}, 100, 'explainer', {}, true, 10000, 7)",
                now + 30_000_000
            ))
            .fetch_all(&mut *tx)
            .await
            .unwrap();
            tx.rollback().await.unwrap();
            sqlx::raw_sql("DEALLOCATE pclaim")
                .execute(&mut admin)
                .await
                .unwrap();
            let plan = plan.join("\n");
            if analyze_first && mode == "force_generic_plan" {
                println!("partitioned claim plan, 9,000 of 10,000 finished:\n{plan}");
            }
            let scans = pick_scans(&plan);
            assert!(
                !scans.is_empty()
                    && scans
                        .iter()
                        .all(|l| l.contains("using items_claim on items p")),
                "{mode}, analyzed after draining: {analyze_first}:\n{plan}"
            );
            let pin_scans: Vec<&str> = plan
                .lines()
                .filter(|l| l.contains(" on streams st") && l.contains("Scan"))
                .collect();
            assert!(
                !pin_scans.is_empty() && pin_scans.iter().all(|l| l.contains("streams_pkey")),
                "every pin is read by key:\n{plan}"
            );
        }
    }
    store.close().await;
    drop_schema(&mut admin, &schema).await;
}

/// The overlap is forced: instance A's partitioned claim of a stream's head is held
/// open in a transaction while instance B, which by then counts three instances
/// and has the stream in its share, claims: the head is locked, so B takes nothing
/// of the stream and pins nothing. Once A commits, the stream is pinned to A and B
/// never takes it, while A takes its next item.
#[tokio::test]
async fn an_instance_racing_the_claim_that_pins_a_stream_neither_takes_nor_pins_it() {
    let Some((store, mut admin, schema, clock)) = open(false).await else {
        return;
    };
    let (a, b, c) = ("inst-a", "inst-b", "inst-c");
    let p = Partitioning::default();
    // A stream that is A's among {a, b} and B's among {a, b, c}.
    let s = (0..100_000)
        .map(|n| StreamKey::new(format!("race-{n}")).unwrap())
        .find(|s| {
            let part = p.partition_of(key_hash(Some(s), ItemId::new()));
            takes(part, 0, 2) && takes(part, 1, 3)
        })
        .unwrap();
    beat(&store, a).await;
    beat(&store, b).await;
    let first = NewItem::new(q("q"), b"1".to_vec()).stream(s.clone());
    let second = NewItem::new(q("q"), b"2".to_vec()).stream(s.clone());
    store
        .enqueue(tenure_core::EnqueueParams::new(vec![
            first.clone(),
            second.clone(),
        ]))
        .await
        .unwrap();

    let mut held = PgConnection::connect(&url()).await.unwrap();
    let mut tx = held.begin().await.unwrap();
    let params_a = partitioned("q", a, 10);
    let run = store
        .claim_run(&mut *tx, &["q".to_owned()], clock.now(), &params_a, true)
        .await
        .unwrap();
    let ClaimRun::Claimed(got_a) = run else {
        panic!("A is registered and nothing expired")
    };
    assert_eq!(got_a.len(), 1);
    assert_eq!(got_a[0].1.id, first.id);

    // C joins: among three, the stream is B's by partition, and A's pin is not
    // committed yet.
    beat(&store, c).await;
    let got_b = store.claim(partitioned("q", b, 10)).await.unwrap();
    assert!(got_b.is_empty(), "B took {got_b:?}");
    tx.commit().await.unwrap();

    assert_eq!(pin(&mut admin, &schema, &s).await.as_deref(), Some(a));
    let token = got_a[0].1.token();
    store.complete_one(token).await.unwrap();
    for who in [b, c] {
        let got = store.claim(partitioned("q", who, 10)).await.unwrap();
        assert!(got.is_empty(), "{who} took {got:?} of a stream pinned to A");
    }
    let got = store.claim(partitioned("q", a, 10)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].item.id, second.id);
    assert_eq!(pin(&mut admin, &schema, &s).await.as_deref(), Some(a));
    store.close().await;
    drop_schema(&mut admin, &schema).await;
}
