use super::*;

async fn claim_stays_on_the_partial_index(keep_done: bool) {
    let Some((store, mut admin, schema, clock)) = open(keep_done).await else {
        return;
    };
    let queue = q("q");
    for _ in 0..4 {
        let items = (0..5_000)
            .map(|_| NewItem::new(queue.clone(), b"x".to_vec()))
            .collect();
        store
            .enqueue(tenure_core::EnqueueParams::new(items))
            .await
            .unwrap();
    }
    // The trap of limits.md note 3: statistics taken while every row is ready.
    sqlx::raw_sql(&format!("ANALYZE {schema}.items"))
        .execute(&mut admin)
        .await
        .unwrap();
    let me = owner("w");
    for _ in 0..18 {
        let leases = store
            .claim(ClaimParams::new(queue.clone(), me.clone(), 1_000, LEASE))
            .await
            .unwrap();
        assert_eq!(leases.len(), 1_000);
        let out = store
            .complete(CompleteParams::new(
                leases.iter().map(|l| l.token).collect(),
            ))
            .await
            .unwrap();
        assert!(out
            .iter()
            .all(|o| *o == tenure_core::TokenOutcome::Accepted));
    }
    let now = clock.now().as_micros();
    for mode in ["force_custom_plan", "force_generic_plan"] {
        let plan = explain_claim(&store, &mut admin, mode, now, false).await;
        let scans = pick_scans(&plan);
        assert!(
            !scans.is_empty()
                && scans
                    .iter()
                    .all(|l| l.contains("using items_claim on items p")),
            "keep_done={keep_done}, {mode}: the pick must scan items_claim only:\n{plan}"
        );
    }
    // And with statistics taken now, when most rows are finished.
    sqlx::raw_sql(&format!("ANALYZE {schema}.items"))
        .execute(&mut admin)
        .await
        .unwrap();
    let plan = explain_claim(&store, &mut admin, "force_generic_plan", now, true).await;
    println!("claim plan, keep_done={keep_done}, 18,000 of 20,000 finished:\n{plan}");
    let scans = pick_scans(&plan);
    assert!(
        !scans.is_empty()
            && scans
                .iter()
                .all(|l| l.contains("using items_claim on items p")),
        "keep_done={keep_done}, fresh statistics:\n{plan}"
    );
    store.close().await;
    drop_schema(&mut admin, &schema).await;
}

#[tokio::test]
async fn the_pick_scans_the_ready_index_after_most_rows_finished_and_were_kept() {
    claim_stays_on_the_partial_index(true).await;
}

#[tokio::test]
async fn the_pick_scans_the_ready_index_after_most_rows_finished_and_were_deleted() {
    claim_stays_on_the_partial_index(false).await;
}
