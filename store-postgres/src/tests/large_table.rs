//! The cliff of a large table: generic plans estimate `LIMIT $n` as a share of the
//! table, so their estimated cost grows with it, and the server JIT-compiles a plan
//! whose estimate passes `jit_above_cost` (100,000 by default, passed from about 24,000
//! ready items). Each hot statement is explained here on the store's own session with
//! 100,000 ready items, after ANALYZE, and must neither be JIT-compiled nor leave its
//! index.

use super::*;
use sqlx::Row;
use tenure_core::{EnqueueParams, Partitioning};

const READY: usize = 100_000;

/// Every node of a JSON plan, depth first.
fn nodes<'a>(plan: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
    out.push(plan);
    if let Some(children) = plan.get("Plans").and_then(|p| p.as_array()) {
        for c in children {
            nodes(c, out);
        }
    }
}

/// `EXPLAIN (FORMAT JSON) EXECUTE` of `stmt` prepared on `conn` with `types`, run
/// with `args` inside a transaction that is rolled back.
async fn explain(
    conn: &mut PgConnection,
    name: &str,
    stmt: &str,
    types: &str,
    args: &str,
) -> serde_json::Value {
    let mut tx = conn.begin().await.unwrap();
    sqlx::raw_sql(&format!("PREPARE big_{name}{types} AS {stmt}"))
        .execute(&mut *tx)
        .await
        .unwrap();
    let row = sqlx::query(&format!("EXPLAIN (FORMAT JSON) EXECUTE big_{name}({args})"))
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    // The json column's text is the document; read it without a type check.
    let text: String = row.try_get_unchecked(0).unwrap();
    tx.rollback().await.unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc[0].clone()
}

/// Asserts that `doc` is not JIT-compiled, scans neither of the tables that grow
/// with the work (`items`, `streams`) sequentially, and reads `items` through
/// `index` at least once (when given). The registry (`instances`) holds one row per worker
/// process and may be scanned.
fn check(name: &str, doc: &serde_json::Value, index: Option<&str>) {
    assert!(
        doc.get("JIT").is_none(),
        "{name} would be JIT-compiled:\n{doc:#}"
    );
    let mut all = Vec::new();
    nodes(&doc["Plan"], &mut all);
    for n in all
        .iter()
        .filter(|n| n["Relation Name"] == "items" || n["Relation Name"] == "streams")
    {
        assert_ne!(
            n["Node Type"], "Seq Scan",
            "{name} scans {} sequentially:\n{doc:#}",
            n["Relation Name"]
        );
    }
    if let Some(index) = index {
        assert!(
            all.iter()
                .any(|n| n["Relation Name"] == "items" && n["Index Name"] == index),
            "{name} must read items through {index}:\n{doc:#}"
        );
    }
}

#[tokio::test]
async fn hot_statements_stay_on_their_indexes_without_jit_on_a_large_table() {
    let Some((store, mut admin, schema, clock)) = open(false).await else {
        return;
    };
    let queue = q("big");
    for chunk in 0..READY / 10_000 {
        let items = (0..10_000)
            .map(|i| {
                let item = NewItem::new(queue.clone(), b"x".to_vec());
                // Some scoped and some stream items, so their indexes hold rows.
                match i % 100 {
                    0 => item.scope(ScopeKey::new(format!("s{chunk}-{i}")).unwrap()),
                    1 => item.stream(tenure_core::StreamKey::new(format!("st{}", i % 7)).unwrap()),
                    _ => item,
                }
            })
            .collect();
        store.enqueue(EnqueueParams::new(items)).await.unwrap();
    }
    let leases = store
        .claim(ClaimParams::new(queue.clone(), owner("w"), 100, LEASE))
        .await
        .unwrap();
    assert_eq!(leases.len(), 100);
    sqlx::raw_sql(&format!("ANALYZE {schema}.items"))
        .execute(&mut admin)
        .await
        .unwrap();

    // The store's own session: its startup options, its plan cache mode.
    let mut conn = store.pool().acquire().await.unwrap();
    let jit: String = sqlx::query_scalar("SHOW jit")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(jit, "off", "the store's sessions must run with JIT off");
    let mode: String = sqlx::query_scalar("SHOW plan_cache_mode")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(mode, "force_generic_plan");

    let now = clock.now().as_micros();
    let expiry = now + 30_000_000;
    let ids: Vec<String> = leases.iter().map(|l| format!("{}", l.token.id)).collect();
    let ids = format!("'{{{}}}'", ids.join(","));
    let attempts = format!("'{{{}}}'", vec!["1"; leases.len()].join(","));
    let lease_ids: Vec<String> = leases
        .iter()
        .map(|l| l.token.lease.to_i64().to_string())
        .collect();
    let lease_arr = format!("'{{{}}}'", lease_ids.join(","));
    let sql = store.sql();
    let claim_args = format!("'{{big}}', {now}, 100, 'explainer', {expiry}, true");
    let claim_lease = 7;
    let cases: [(&str, &String, &str, String, &str); 6] = [
        (
            "claim",
            &sql.claim,
            "(text[], int8, int8, text, int8, bool, int8)",
            format!("{claim_args}, {claim_lease}"),
            "items_claim",
        ),
        (
            "claim_partitioned",
            &sql.claim_partitioned,
            "(text[], int8, int8, text, int8, bool, int8, int8)",
            format!(
                "{claim_args}, {}, {claim_lease}",
                Partitioning::default().partitions
            ),
            "items_claim",
        ),
        (
            "recover",
            &sql.recover,
            "(int8, int8, text[])",
            format!("{now}, 100, '{{big}}'"),
            "items_running",
        ),
        (
            "renew",
            &sql.renew,
            "(int8, uuid[], int4[], int8, int8[])",
            format!("{now}, {ids}, {attempts}, {expiry}, {lease_arr}"),
            "items_pkey",
        ),
        (
            "fail",
            &sql.fail,
            "(int8, uuid[], int4[], int8[], text[], int8[])",
            format!("{now}, {ids}, {attempts}, NULL, NULL, {lease_arr}"),
            "items_pkey",
        ),
        (
            "release",
            &sql.release,
            "(int8, uuid[], int4[], int8[])",
            format!("{now}, {ids}, {attempts}, {lease_arr}"),
            "items_pkey",
        ),
    ];
    for (name, stmt, types, args, index) in &cases {
        let doc = explain(&mut conn, name, stmt, types, args).await;
        check(name, &doc, Some(index));
    }
    drop(conn);

    // Behind a proxy (no startup options) the statements are planned for their
    // arguments: the batch limit bounds their cost, so the server's JIT defaults
    // never apply either. The planner may then pick another index for the actual
    // arguments (the running rows' index when few are running); none scans a table.
    let mut plain = PgConnection::connect(&url()).await.unwrap();
    sqlx::raw_sql("SET plan_cache_mode = force_custom_plan; SET jit = on")
        .execute(&mut plain)
        .await
        .unwrap();
    for (name, stmt, types, args, _) in &cases {
        let doc = explain(&mut plain, name, stmt, types, args).await;
        check(&format!("{name} (custom plan)"), &doc, None);
    }
    drop(plain);
    stream_completes_read_by_index(&store, &mut admin, &schema).await;
    store.close().await;
    drop_schema(&mut admin, &schema).await;
}

/// The sequential and index scans of `items` and `streams` by the transaction
/// open on `conn` so far (its own counters: no other session's work in them).
async fn scans(conn: &mut PgConnection, schema: &str) -> Vec<(String, i64, i64)> {
    sqlx::query_as(
        "SELECT relname::text, seq_scan, coalesce(idx_scan, 0) \
         FROM pg_stat_xact_user_tables \
         WHERE schemaname = $1 AND relname IN ('items', 'streams') ORDER BY relname",
    )
    .bind(schema)
    .fetch_all(&mut *conn)
    .await
    .unwrap()
}

/// The statements inside `tenure_complete` and `tenure_promote` (which EXPLAIN
/// cannot reach) read `items` and `streams` by index on the large table: completes
/// of 1,000 stream heads (each promoting its stream's next item) and then of those
/// items (each the last of its stream, so its row is locked and set empty), run in
/// one transaction with the store's session settings, scan neither table
/// sequentially.
async fn stream_completes_read_by_index(store: &PgStore, admin: &mut PgConnection, schema: &str) {
    let queue = q("streamed");
    let items = (0..2_000)
        .map(|i| {
            NewItem::new(queue.clone(), b"x".to_vec())
                .stream(tenure_core::StreamKey::new(format!("c{}", i % 1_000)).unwrap())
        })
        .collect();
    store.enqueue(EnqueueParams::new(items)).await.unwrap();
    sqlx::raw_sql(&format!("ANALYZE {schema}.items; ANALYZE {schema}.streams"))
        .execute(&mut *admin)
        .await
        .unwrap();
    let mut conn = PgConnection::connect(&url()).await.unwrap();
    sqlx::raw_sql("SET plan_cache_mode = force_generic_plan; SET jit = off")
        .execute(&mut conn)
        .await
        .unwrap();
    for round in ["heads", "last items"] {
        let leases = store
            .claim(ClaimParams::new(queue.clone(), owner("w"), 1_000, LEASE))
            .await
            .unwrap();
        assert_eq!(leases.len(), 1_000, "{round}");
        // One transaction around the completes (each in a savepoint of it), so its
        // own counters tell what they did.
        let mut tx = conn.begin().await.unwrap();
        let before = scans(&mut tx, schema).await;
        for batch in leases.chunks(100) {
            let tokens = batch.iter().map(|l| l.token).collect();
            let out = store
                .complete_in_tx(&mut tx, CompleteParams::new(tokens))
                .await
                .unwrap();
            assert!(out
                .iter()
                .all(|o| *o == tenure_core::TokenOutcome::Accepted));
        }
        let after = scans(&mut tx, schema).await;
        tx.commit().await.unwrap();
        assert_eq!(after.len(), 2);
        for ((table, seq0, idx0), (_, seq1, idx1)) in before.iter().zip(&after) {
            assert_eq!(
                seq1 - seq0,
                0,
                "completes of {round} scanned {table} sequentially"
            );
            assert!(
                idx1 > idx0 || table == "streams",
                "{round}: {table} by index"
            );
        }
        if round == "last items" {
            let (_, _, idx0) = &before[1];
            let (_, _, idx1) = &after[1];
            assert!(idx1 > idx0, "the last items' completes lock streams by key");
        }
    }
    let left: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {schema}.streams WHERE stream LIKE 'c%' AND pending <> 0"
    ))
    .fetch_one(&mut *admin)
    .await
    .unwrap();
    assert_eq!(left, 0, "every emptied stream reads 0");
}
