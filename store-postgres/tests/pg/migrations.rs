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
