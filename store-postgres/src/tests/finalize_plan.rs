use super::*;

/// Finalizes look their tokens up by primary key, so their cost follows the batch,
/// not the number of items running elsewhere. (complete runs its statements inside
/// the `tenure_complete` function, whose DELETE has the same `id = ANY($ids)`
/// shape; EXPLAIN cannot reach inside a function.)
#[tokio::test]
async fn release_renew_and_fail_read_their_rows_by_primary_key_with_many_running() {
    let Some((store, mut admin, schema, clock)) = open(false).await else {
        return;
    };
    let queue = q("q");
    let items = (0..3_000)
        .map(|_| NewItem::new(queue.clone(), b"x".to_vec()))
        .collect();
    store
        .enqueue(tenure_core::EnqueueParams::new(items))
        .await
        .unwrap();
    let mut tokens = Vec::new();
    for _ in 0..2 {
        let leases = store
            .claim(ClaimParams::new(queue.clone(), owner("w"), 1_000, LEASE))
            .await
            .unwrap();
        tokens.extend(leases.iter().map(|l| l.token));
    }
    sqlx::raw_sql(&format!("ANALYZE {schema}.items"))
        .execute(&mut admin)
        .await
        .unwrap();
    let ids: Vec<String> = tokens[..100].iter().map(|t| format!("{}", t.id)).collect();
    let ids = format!("'{{{}}}'", ids.join(","));
    let attempts = format!("'{{{}}}'", vec!["1"; 100].join(","));
    let lease_arr = format!("'{{{}}}'", vec!["7"; 100].join(","));
    let now = clock.now().as_micros();
    let sql = store.sql();
    let cases = [
        (
            "release",
            &sql.release,
            "(int8, uuid[], int4[], int8[])",
            format!("{now}, {ids}, {attempts}, {lease_arr}"),
        ),
        (
            "renew",
            &sql.renew,
            "(int8, uuid[], int4[], int8, int8[])",
            format!("{now}, {ids}, {attempts}, {now}, {lease_arr}"),
        ),
        (
            "fail",
            &sql.fail,
            "(int8, uuid[], int4[], int8[], text[], int8[])",
            format!("{now}, {ids}, {attempts}, NULL, NULL, {lease_arr}"),
        ),
    ];
    for (name, stmt, types, args) in cases {
        let mut tx = admin.begin().await.unwrap();
        sqlx::raw_sql(&format!(
            "SET LOCAL plan_cache_mode = force_generic_plan; PREPARE p{name}{types} AS {stmt}"
        ))
        .execute(&mut *tx)
        .await
        .unwrap();
        let plan: Vec<String> =
            sqlx::query_scalar(&format!("EXPLAIN (COSTS OFF) EXECUTE p{name}({args})"))
                .fetch_all(&mut *tx)
                .await
                .unwrap();
        tx.rollback().await.unwrap();
        let plan = plan.join("\n");
        assert!(
            plan.contains("items_pkey") && !plan.contains("items_running"),
            "{name} must look its rows up by key:\n{plan}"
        );
    }
    store.close().await;
    drop_schema(&mut admin, &schema).await;
}
