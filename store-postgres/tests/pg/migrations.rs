use super::*;

#[tokio::test]
async fn an_unsafe_schema_name_is_refused_before_anything_runs() {
    // The URL points nowhere: an attempt to run anything would answer Unavailable.
    for bad in [
        "Tenure",
        "a;drop table x",
        "a\"b",
        "1abc",
        "",
        &"x".repeat(49),
    ] {
        let e = PgStore::connect(PgConfig::new("postgres://postgres@127.0.0.1:1/test").schema(bad))
            .await
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("schema"), "{bad:?}: {e}");
    }
}

#[tokio::test]
async fn concurrent_connects_migrate_once_into_our_own_table() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let schema = common::fresh_schema();
    let clock = ManualClock::starting_now();
    let mut joins = Vec::new();
    for _ in 0..4 {
        let cfg = common::config(&schema, &clock)
            .max_connections(1)
            .listen(false);
        joins.push(tokio::spawn(PgStore::connect(cfg)));
    }
    for j in joins {
        j.await.unwrap().expect("every connect succeeds");
    }
    let versions: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT version FROM {schema}.tenure_migrations ORDER BY version"
    ))
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(
        versions,
        (1..=tenure_postgres::schema_version()).collect::<Vec<_>>()
    );
    let sqlx_table: Option<String> = sqlx::query_scalar(&format!(
        "SELECT to_regclass('{schema}._sqlx_migrations')::text"
    ))
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(sqlx_table, None, "we never touch sqlx's bookkeeping");
    common::drop_schema(&mut admin, &schema).await;
}

#[tokio::test]
async fn an_applications_own_sqlx_migrations_and_ours_share_a_schema_without_clashing() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let schema = common::fresh_schema();
    sqlx::raw_sql(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!("tenure-app-migrations-{schema}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("1_app.sql"), "CREATE TABLE app_things (id int);").unwrap();
    let opts: sqlx::postgres::PgConnectOptions = common::url().parse().unwrap();
    let app_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(opts.options([("search_path", schema.as_str())]))
        .await
        .unwrap();
    let migrator = sqlx::migrate::Migrator::new(dir.as_path()).await.unwrap();
    migrator.run(&app_pool).await.unwrap();
    let clock = ManualClock::starting_now();
    let store = PgStore::connect(common::config(&schema, &clock))
        .await
        .unwrap();
    // The application's migrator still agrees with what it finds.
    migrator.run(&app_pool).await.expect("no clash with ours");
    store.migrate().await.expect("no clash with theirs");
    store
        .enqueue_one(NewItem::new(q(), b"x".to_vec()))
        .await
        .unwrap();
    app_pool.close().await;
    store.close().await;
    std::fs::remove_dir_all(&dir).ok();
    common::drop_schema(&mut admin, &schema).await;
}

/// `pending` of the stream `st` in `schema`.
async fn pending(admin: &mut sqlx::PgConnection, schema: &str, st: &str) -> i64 {
    sqlx::query_scalar(&format!(
        "SELECT pending FROM {schema}.streams WHERE stream = $1"
    ))
    .bind(st)
    .fetch_one(admin)
    .await
    .unwrap()
}

/// A version 4 schema (the complete function of migration 2, which counts each
/// stream's unfinished items down on every finish) with streams in the middle of
/// their items upgrades to 5, and its streams go on in order from the counts the
/// old function left: each claim takes the next item, a stream whose last item
/// finishes reads 0, and a new item of it is head at once.
#[tokio::test]
async fn a_version_4_schema_with_streams_in_flight_upgrades_and_they_go_on_in_order() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let s = ctx.schema.clone();
    let old_complete = include_str!("../../migrations/0002_complete_function.sql")
        .replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
        .replace("__SCHEMA__", &s);
    // Version 6's lease column stays (its migration adds it only when missing);
    // its complete function goes, as the version-4 code below never calls it.
    // Migration 9's objects stay until just before the upgrade: this code's claim
    // reads the claim cursors, and it stands in for version-4 code's claims here.
    sqlx::raw_sql(&format!(
        "DROP FUNCTION {s}.tenure_promote(text[]); \
         DROP FUNCTION {s}.tenure_complete(bigint, uuid[], integer[], bigint[], boolean); \
         {old_complete}; \
         DELETE FROM {s}.tenure_migrations WHERE version >= 5"
    ))
    .execute(&mut ctx.admin)
    .await
    .unwrap();
    let (a, b) = (StreamKey::new("a").unwrap(), StreamKey::new("b").unwrap());
    let mut ids = Vec::new();
    for st in [&a, &b, &a, &a] {
        let it = NewItem::new(q(), b"x".to_vec()).stream(st.clone());
        ids.push(it.id);
        ctx.store.enqueue_one(it).await.unwrap();
    }
    // Under version 4: the heads of a and b, completed by the old function as the
    // version-4 code called it (no lease ids).
    let first = ctx
        .store
        .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
        .await
        .unwrap();
    let got: Vec<ItemId> = first.iter().map(|l| l.item.id).collect();
    assert_eq!(got, vec![ids[0], ids[1]]);
    let done: Vec<uuid::Uuid> = sqlx::query_scalar(&format!(
        "SELECT {s}.tenure_complete($1, $2::uuid[], $3::int4[], false)"
    ))
    .bind(0_i64)
    .bind(got.iter().map(|id| *id.as_uuid()).collect::<Vec<_>>())
    .bind(vec![1_i32; got.len()])
    .fetch_all(&mut ctx.admin)
    .await
    .unwrap();
    assert_eq!(done.len(), 2);
    assert_eq!(
        pending(&mut ctx.admin, &s, "a").await,
        2,
        "counted down by version 4"
    );
    assert_eq!(pending(&mut ctx.admin, &s, "b").await, 0);

    sqlx::raw_sql(&undo_claim_cursors(&s))
        .execute(&mut ctx.admin)
        .await
        .unwrap();
    ctx.store.migrate().await.unwrap();
    let versions: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT version FROM {s}.tenure_migrations ORDER BY version"
    ))
    .fetch_all(&mut ctx.admin)
    .await
    .unwrap();
    assert_eq!(
        versions,
        (1..=tenure_postgres::schema_version()).collect::<Vec<_>>()
    );
    for next in [ids[2], ids[3]] {
        let leases = ctx
            .store
            .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
            .await
            .unwrap();
        let got: Vec<ItemId> = leases.iter().map(|l| l.item.id).collect();
        assert_eq!(got, vec![next], "stream a, in order, one at a time");
        ctx.store.complete_one(leases[0].token).await.unwrap();
    }
    assert_eq!(
        pending(&mut ctx.admin, &s, "a").await,
        0,
        "a has nothing left"
    );
    let later = NewItem::new(q(), b"y".to_vec()).stream(a.clone());
    ctx.store.enqueue_one(later.clone()).await.unwrap();
    let leases = ctx
        .store
        .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
        .await
        .unwrap();
    let got: Vec<ItemId> = leases.iter().map(|l| l.item.id).collect();
    assert_eq!(
        got,
        vec![later.id],
        "a new item of an emptied stream is its head"
    );
    ctx.finish().await;
}

#[tokio::test]
async fn a_schema_newer_than_this_code_is_a_conflict() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    sqlx::query(&format!(
        "INSERT INTO {}.tenure_migrations (version, name) VALUES (999, 'future')",
        ctx.schema
    ))
    .execute(&mut ctx.admin)
    .await
    .unwrap();
    let e = ctx.store.migrate().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    ctx.finish().await;
}

/// SQL that removes what migration 9 adds (its complete function is migration 8's
/// with another plan, so it stays), leaving a version-8 schema.
fn undo_claim_cursors(s: &str) -> String {
    format!(
        "DROP TRIGGER items_cursor_insert ON {s}.items; \
         DROP TRIGGER items_cursor_update ON {s}.items; \
         DROP FUNCTION {s}.tenure_cursor_lower_inserted(); \
         DROP FUNCTION {s}.tenure_cursor_lower_updated(); \
         DROP FUNCTION {s}.tenure_cursor_advance(bigint, text[]); \
         DROP TABLE {s}.claim_cursors;"
    )
}

/// A deadlock or serialization failure: what version-8 code answers as Unavailable.
fn retryable(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if matches!(d.code().as_deref(), Some("40P01" | "40001")))
}

/// Rows in the live-upgrade test below; `TENURE_UPGRADE_ROWS` overrides it (the
/// measured run on docs/benchmarks.md used 1,000,000).
const UPGRADE_ROWS: i64 = 20_000;

/// Migration 9 (claim cursors) on a live version-8 table: a claimer of version-8 code
/// (its claim and complete statements, as that code sends them) claims throughout,
/// a `Worker` of this code claims from the moment the migration has committed, both
/// then claim side by side (a rolling deploy), and every seeded item is finished
/// exactly once, each finish accepted by the lease fence of the claim that took it.
#[tokio::test]
async fn a_live_version_8_table_upgrades_to_claim_cursors_with_claims_going_on() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use tenure_runtime::{Job, Worker};
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let s = ctx.schema.clone();
    let rows: i64 = std::env::var("TENURE_UPGRADE_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(UPGRADE_ROWS);
    // Back to version 8: what migration 9 adds goes.
    sqlx::raw_sql(&format!(
        "{undo_9} \
         DELETE FROM {s}.tenure_migrations WHERE version >= 9; \
         INSERT INTO {s}.items (id, queue, payload, priority, run_at, state, head, attempt, \
             renewals, stalls, max_attempts, max_stalls, max_renewals, created_at, updated_at) \
         SELECT gen_random_uuid(), 'q', '\\x00', 0, 0, 'ready', true, 0, 0, 0, 25, 25, 6, 0, 0 \
         FROM generate_series(1, {rows}); \
         ANALYZE {s}.items;",
        undo_9 = undo_claim_cursors(&s),
    ))
    .execute(&mut ctx.admin)
    .await
    .unwrap();
    let seeded: Vec<uuid::Uuid> = sqlx::query_scalar(&format!("SELECT id FROM {s}.items"))
        .fetch_all(&mut ctx.admin)
        .await
        .unwrap();
    let finished: Arc<Mutex<HashMap<uuid::Uuid, u32>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let migrated = Arc::new(AtomicBool::new(false));
    let old_claims_after = Arc::new(AtomicU64::new(0));
    let old_retries = Arc::new(AtomicU64::new(0));
    // Version-8 code: the claim statement's core (a scan of items_claim from its front,
    // FOR UPDATE SKIP LOCKED) and the five-argument complete, fenced on the lease.
    let mut old = Vec::new();
    for n in 0..2 {
        let (finished, stop, migrated, after, retries) = (
            finished.clone(),
            stop.clone(),
            migrated.clone(),
            old_claims_after.clone(),
            old_retries.clone(),
        );
        let (s, clock) = (s.clone(), ctx.clock.clone());
        let mut conn = common::admin().await.unwrap();
        old.push(tokio::spawn(async move {
            let mut longest = Duration::ZERO;
            let mut last = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                let now = clock.now().as_micros();
                let lease = 1_000 + n;
                let got: Result<Vec<(uuid::Uuid, i32, i64)>, _> = sqlx::query_as(&format!(
                    "WITH picked AS MATERIALIZED ( \
                         SELECT p.id FROM {s}.items p WHERE p.queue = 'q' AND p.state = 'ready' \
                             AND p.head AND p.run_at <= $1 \
                         ORDER BY p.priority, p.run_at, p.seq LIMIT 50 FOR UPDATE SKIP LOCKED) \
                     UPDATE {s}.items i SET state = 'running', attempt = i.attempt + 1, \
                         owner = 'v8', lease_expires_at = $1 + 30000000, renewals = 0, \
                         updated_at = $1, lease = $2 \
                     WHERE i.id = ANY(ARRAY(SELECT id FROM picked)) AND i.state = 'ready' \
                     RETURNING i.id, i.attempt, i.lease"
                ))
                .bind(now)
                .bind(lease)
                .fetch_all(&mut conn)
                .await;
                // Version-8 code answers a deadlock (a claim racing a finish) as
                // Unavailable, and its caller claims again; so does this one.
                let got = match got {
                    Err(e) if retryable(&e) => {
                        retries.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    other => other.unwrap(),
                };
                if got.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                longest = longest.max(last.elapsed());
                last = Instant::now();
                if migrated.load(Ordering::SeqCst) {
                    after.fetch_add(1, Ordering::SeqCst);
                }
                let done: Vec<uuid::Uuid> = loop {
                    let done = sqlx::query_scalar(&format!(
                        "SELECT c FROM {s}.tenure_complete($1, $2::uuid[], $3::int4[], \
                             $4::int8[], false) AS c"
                    ))
                    .bind(now)
                    .bind(got.iter().map(|g| g.0).collect::<Vec<_>>())
                    .bind(got.iter().map(|g| g.1).collect::<Vec<_>>())
                    .bind(got.iter().map(|g| g.2).collect::<Vec<_>>())
                    .fetch_all(&mut conn)
                    .await;
                    match done {
                        // Rolled back: the same tokens again (the fence decides).
                        Err(e) if retryable(&e) => {
                            retries.fetch_add(1, Ordering::SeqCst);
                        }
                        other => break other.unwrap(),
                    }
                };
                assert_eq!(done.len(), got.len(), "version-8 completes are accepted");
                let mut f = finished.lock().unwrap();
                for id in done {
                    *f.entry(id).or_insert(0) += 1;
                }
            }
            longest
        }));
    }
    // Let the old claimers start, then migrate while they run.
    while finished.lock().unwrap().len() < 200.min(rows as usize) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let began = Instant::now();
    ctx.store.migrate().await.unwrap();
    let migration = began.elapsed();
    migrated.store(true, Ordering::SeqCst);
    let versions: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT version FROM {s}.tenure_migrations ORDER BY version"
    ))
    .fetch_all(&mut ctx.admin)
    .await
    .unwrap();
    assert_eq!(versions.last(), Some(&tenure_postgres::schema_version()));
    // This code's Worker joins; its enqueues mix in too, so new rows go through the
    // triggers while both versions claim.
    let f = finished.clone();
    let worker = Worker::builder(ctx.store.clone())
        .queue(q())
        .concurrency(16)
        .maintenance(false)
        .lease_duration(LEASE)
        .handler(move |job: Job| {
            let f = f.clone();
            async move {
                *f.lock()
                    .unwrap()
                    .entry(*job.lease.item.id.as_uuid())
                    .or_insert(0) += 1;
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    let mut added = Vec::new();
    for _ in 0..20 {
        let it = NewItem::new(q(), b"y".to_vec());
        added.push(*it.id.as_uuid());
        ctx.store.enqueue_one(it).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    let total = seeded.len() + added.len();
    while finished.lock().unwrap().len() < total {
        assert!(Instant::now() < deadline, "the items were not all finished");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut longest = Duration::ZERO;
    for o in old {
        longest = longest.max(o.await.unwrap());
    }
    let m = worker.metrics();
    let report = worker.shutdown(Duration::from_secs(10)).await;
    let f = finished.lock().unwrap().clone();
    for id in seeded.iter().chain(&added) {
        assert_eq!(f.get(id), Some(&1), "{id} finished exactly once");
    }
    assert_eq!(f.len(), total, "nothing finished that was not enqueued");
    let left: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {s}.items"))
        .fetch_one(&mut ctx.admin)
        .await
        .unwrap();
    assert_eq!(left, 0, "every item finished and deleted");
    assert_eq!(
        m.lost, 0,
        "no finish of this code's Worker was refused: {report:?}"
    );
    assert!(
        old_claims_after.load(Ordering::SeqCst) > 0 || rows < 1_000,
        "version-8 code went on claiming after the migration"
    );
    eprintln!(
        "live upgrade: {rows} rows, migration {migration:?}, longest pause between \
         version-8 claims {longest:?}, Worker finished {}, version-8 statements retried \
         after a deadlock {}",
        m.completed,
        old_retries.load(Ordering::SeqCst)
    );
    ctx.finish().await;
}
