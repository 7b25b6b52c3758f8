use super::*;

/// Prints the claim's generic plan, analyzed, with 100,000 items over 1,000 streams
/// after half were claimed and completed. For the report, not for CI:
/// `cargo test -p tenure-postgres --lib report -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints a plan for the report; takes a while"]
async fn claim_plan_with_100k_items_over_1000_streams_half_done() {
    let Some((store, mut admin, schema, clock)) = open(false).await else {
        return;
    };
    let queue = q("q");
    let all: Vec<NewItem> = (0..100_000)
        .map(|i| {
            NewItem::new(queue.clone(), b"x".to_vec())
                .stream(tenure_core::StreamKey::new(format!("s{}", i % 1_000)).unwrap())
        })
        .collect();
    for chunk in all.chunks(10_000) {
        store
            .enqueue(tenure_core::EnqueueParams::new(chunk.to_vec()))
            .await
            .unwrap();
    }
    sqlx::raw_sql(&format!("VACUUM ANALYZE {schema}.items"))
        .execute(&mut admin)
        .await
        .unwrap();
    let me = owner("w");
    let mut done = 0;
    while done < 50_000 {
        let leases = store
            .claim(ClaimParams::new(queue.clone(), me.clone(), 100, LEASE))
            .await
            .unwrap();
        let out = store
            .complete(CompleteParams::new(
                leases.iter().map(|l| l.token).collect(),
            ))
            .await
            .unwrap();
        done += out.len();
    }
    let now = clock.now().as_micros();
    let plan = explain_claim(&store, &mut admin, "force_generic_plan", now, true).await;
    println!("claim, 100,000 items over 1,000 streams, {done} finished:\n{plan}");
    let scans = pick_scans(&plan);
    assert!(scans
        .iter()
        .all(|l| l.contains("using items_claim on items p")));
    store.close().await;
    drop_schema(&mut admin, &schema).await;
}
