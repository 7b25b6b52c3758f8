use super::*;

#[tokio::test]
async fn an_unknown_url_parameter_is_refused_naming_it_and_nothing_is_written() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let schema = common::fresh_schema();
    for param in ["tenure_shema=x", "sslmod=require", "connect_timeout=5"] {
        let e = PgStore::connect(PgConfig::new(with_param(&common::url(), param)).schema(&schema))
            .await
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("url"), "{param}: {e}");
        let key = param.split('=').next().unwrap();
        assert!(e.to_string().contains(&format!("{key:?}")), "{e}");
    }
    assert!(
        !schema_exists(&mut ctx, &schema).await,
        "nothing was created"
    );
    ctx.finish().await;
}

#[tokio::test]
async fn a_missing_root_certificate_is_refused_naming_the_parameter() {
    let e = PgStore::connect(PgConfig::new(with_param(
        &common::url(),
        "sslmode=verify-full&sslrootcert=/nonexistent/root.crt",
    )))
    .await
    .unwrap_err();
    assert_eq!(e.invalid_field(), Some("url"), "{e}");
    assert!(e.to_string().contains("sslrootcert"), "{e}");
}

#[tokio::test]
async fn system_schemas_are_refused_and_nothing_is_written_there() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    for schema in ["information_schema", "pg_catalog", "pg_toast", "pg_tenure"] {
        let e = PgStore::connect(PgConfig::new(common::url()).schema(schema))
            .await
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("schema"), "{schema}: {e}");
    }
    let written: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relname = 'tenure_migrations'
           AND (n.nspname = 'information_schema' OR n.nspname LIKE 'pg\\_%')",
    )
    .fetch_one(&mut ctx.admin)
    .await
    .unwrap();
    assert_eq!(written, 0);
    assert!(!schema_exists(&mut ctx, "pg_tenure").await);
    ctx.finish().await;
}
