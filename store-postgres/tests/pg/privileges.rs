use super::*;

/// A worker role with only the documented grants (and no right to create
/// anything) runs every operation once the schema was migrated by another role.
#[tokio::test]
async fn a_worker_with_the_documented_grants_runs_every_operation() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let role = format!("w_{}", ctx.schema);
    let s = &ctx.schema;
    let setup = format!(
        "CREATE ROLE {role} LOGIN PASSWORD '{role}'; \
         GRANT USAGE ON SCHEMA {s} TO {role}; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {role};"
    );
    sqlx::Executor::execute(&mut ctx.admin, setup.as_str())
        .await
        .unwrap();
    let url = common::url().replacen(
        "postgres://postgres@",
        &format!("postgres://{role}:{role}@"),
        1,
    );
    let worker = PgStore::connect(
        PgConfig::new(url)
            .schema(s)
            .clock(ctx.clock.clone())
            .migrate_on_connect(false)
            .max_connections(2),
    )
    .await
    .unwrap();
    let stream = StreamKey::new("s").unwrap();
    let key = DedupKey::new("k").unwrap();
    let items = vec![
        NewItem::new(q(), b"a".to_vec())
            .stream(stream.clone())
            .dedup_key(key),
        NewItem::new(q(), b"b".to_vec()).stream(stream),
        NewItem::new(q(), b"c".to_vec()).scope(ScopeKey::new("sc").unwrap()),
    ];
    worker.enqueue(EnqueueParams::new(items)).await.unwrap();
    let leases = worker
        .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
        .await
        .unwrap();
    assert_eq!(leases.len(), 2);
    worker.renew_one(leases[0].token, LEASE).await.unwrap();
    worker.complete_one(leases[0].token).await.unwrap();
    worker
        .fail_one(Failure::permanent(leases[1].token, "no"))
        .await
        .unwrap();
    let next = worker
        .claim_one(q(), owner(1), LEASE)
        .await
        .unwrap()
        .unwrap();
    worker.release_one(next.token).await.unwrap();
    worker
        .dead_requeue(RequeueParams::new(vec![leases[1].item.id]))
        .await
        .unwrap();
    worker
        .instance_heartbeat(HeartbeatParams::new(owner(1)))
        .await
        .unwrap();
    let partitioned = worker
        .claim(ClaimParams::new(q(), owner(1), 10, LEASE).partitioned(Partitioning::default()))
        .await
        .unwrap();
    worker.release_one(partitioned[0].token).await.unwrap();
    worker
        .instance_deregister(DeregisterParams::new(owner(1)))
        .await
        .unwrap();
    worker
        .instance_evict_stale(EvictParams::default())
        .await
        .unwrap();
    worker
        .leader_acquire(LeaderParams::new(
            LeaderName::new("m").unwrap(),
            owner(1),
            LEASE,
        ))
        .await
        .unwrap();
    worker
        .recover_expired(RecoverParams::default())
        .await
        .unwrap();
    worker
        .purge(PurgeParams::new(Duration::from_secs(1), 100))
        .await
        .unwrap();
    worker.queue_counts(&q()).await.unwrap();
    // The role really has no more than that: it cannot create anything there.
    let denied = sqlx::Executor::execute(
        worker.pool(),
        format!("CREATE TABLE {s}.not_allowed (x int)").as_str(),
    )
    .await;
    assert!(
        denied.is_err(),
        "the worker role must not be able to create tables"
    );
    worker.close().await;
    let teardown = format!("DROP OWNED BY {role}; DROP ROLE {role};");
    sqlx::Executor::execute(&mut ctx.admin, teardown.as_str())
        .await
        .unwrap();
    ctx.finish().await;
}
