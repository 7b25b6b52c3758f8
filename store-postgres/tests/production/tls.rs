use super::*;

/// The server's certificate file, or `None` (after saying why) when the server
/// offers no TLS or the file cannot be read and TLS is not required.
async fn server_certificate(ctx: &mut Ctx) -> Option<String> {
    let ssl: String = sqlx::query_scalar("SHOW ssl")
        .fetch_one(&mut ctx.admin)
        .await
        .unwrap();
    let file: String = sqlx::query_scalar("SHOW ssl_cert_file")
        .fetch_one(&mut ctx.admin)
        .await
        .unwrap();
    let why = if ssl != "on" {
        "the server offers no TLS (ssl = off)".to_owned()
    } else if std::fs::read(&file).is_err() {
        format!("its certificate {file} cannot be read")
    } else {
        return Some(file);
    };
    assert!(
        !tenure_test_support::required(),
        "TLS tests need TLS: {why}"
    );
    eprintln!("skipped: {why}");
    None
}

fn tls_host() -> String {
    std::env::var("TENURE_POSTGRES_TLS_HOST").unwrap_or_else(|_| "localhost".to_owned())
}

async fn runs_an_item(store: &PgStore) {
    store
        .enqueue_one(NewItem::new(q(), b"x".to_vec()))
        .await
        .unwrap();
    let lease = store.claim_one(q(), owner(), LEASE).await.unwrap().unwrap();
    store.complete_one(lease.token).await.unwrap();
}

#[tokio::test]
async fn sslmode_require_connects_over_tls() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    if server_certificate(&mut ctx).await.is_none() {
        return ctx.finish().await;
    }
    let store = PgStore::connect(
        PgConfig::new(with_param(&common::url(), "sslmode=require"))
            .schema(&ctx.schema)
            .listen(false),
    )
    .await
    .expect("sslmode=require connects");
    runs_an_item(&store).await;
    assert!(over_tls(&store).await, "the connection is encrypted");
    store.close().await;
    ctx.finish().await;
}

#[tokio::test]
async fn verify_full_with_the_servers_root_certificate_connects_over_tls() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let Some(cert) = server_certificate(&mut ctx).await else {
        return ctx.finish().await;
    };
    let port = PgConnectOptions::from_str(&common::url())
        .unwrap()
        .get_port();
    let url = with_authority(&common::url(), &format!("{}:{port}", tls_host()));
    let url = with_param(&url, &format!("sslmode=verify-full&sslrootcert={cert}"));
    let store = PgStore::connect(PgConfig::new(url).schema(&ctx.schema).listen(false))
        .await
        .expect("verify-full with the server's certificate as root connects");
    runs_an_item(&store).await;
    assert!(over_tls(&store).await, "the connection is encrypted");
    store.close().await;
    ctx.finish().await;
}

/// The certificate names `localhost`, not `127.0.0.1`: verify-full refuses it, as
/// a configuration error (not retryable, not internal) that says TLS.
#[tokio::test]
async fn verify_full_against_a_name_the_certificate_lacks_is_a_config_error() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let Some(cert) = server_certificate(&mut ctx).await else {
        return ctx.finish().await;
    };
    let port = PgConnectOptions::from_str(&common::url())
        .unwrap()
        .get_port();
    let url = with_authority(&common::url(), &format!("127.0.0.1:{port}"));
    let url = with_param(&url, &format!("sslmode=verify-full&sslrootcert={cert}"));
    let schema = common::fresh_schema();
    let e = PgStore::connect(PgConfig::new(url).schema(&schema).listen(false))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert!(e.to_string().contains("TLS"), "{e}");
    assert!(
        !schema_exists(&mut ctx, &schema).await,
        "nothing was created"
    );
    ctx.finish().await;
}
