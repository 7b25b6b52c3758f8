use super::*;

/// Connects (migrating) with `url`, expecting a configuration error.
async fn config_error(url: String) -> Error {
    let started = Instant::now();
    let e = PgStore::connect(PgConfig::new(url).listen(false))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert!(!e.is_retryable());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered at once"
    );
    e
}

#[tokio::test]
async fn an_unknown_database_is_a_config_error_naming_it() {
    if common::admin().await.is_none() {
        return;
    }
    let e = config_error(with_database(&common::url(), "tenure_no_such_database")).await;
    assert!(e.to_string().contains("tenure_no_such_database"), "{e}");
    assert!(e.to_string().contains("does not exist"), "{e}");
}

#[tokio::test]
async fn an_unknown_role_is_a_config_error_naming_it() {
    if common::admin().await.is_none() {
        return;
    }
    let o = PgConnectOptions::from_str(&common::url()).unwrap();
    let db = o.get_database().unwrap_or("postgres").to_owned();
    let url = format!(
        "postgres://tenure_no_such_role@{}:{}/{db}",
        o.get_host(),
        o.get_port()
    );
    let e = config_error(url).await;
    assert!(e.to_string().contains("tenure_no_such_role"), "{e}");
}

/// The shared server trusts every local connection, so a refused password is
/// answered by a stand-in server speaking the protocol's first exchange: it
/// declines TLS, reads the startup message and answers `28P01` as PostgreSQL does.
#[tokio::test]
async fn a_refused_password_is_a_config_error() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        loop {
            let len = s.read_i32().await.unwrap();
            let mut body = vec![0; usize::try_from(len - 4).unwrap()];
            s.read_exact(&mut body).await.unwrap();
            if body[..4] == 80_877_103_i32.to_be_bytes() {
                s.write_all(b"N").await.unwrap(); // SSLRequest: no TLS here
                continue;
            }
            let mut fields = Vec::new();
            for (tag, value) in [
                (b'S', "FATAL"),
                (b'V', "FATAL"),
                (b'C', "28P01"),
                (b'M', "password authentication failed for user \"app\""),
            ] {
                fields.push(tag);
                fields.extend_from_slice(value.as_bytes());
                fields.push(0);
            }
            fields.push(0);
            s.write_u8(b'E').await.unwrap();
            s.write_i32(i32::try_from(fields.len() + 4).unwrap())
                .await
                .unwrap();
            s.write_all(&fields).await.unwrap();
            return;
        }
    });
    let e = config_error(format!("postgres://app:wrong@127.0.0.1:{port}/db")).await;
    assert!(
        e.to_string().contains("password authentication failed"),
        "{e}"
    );
    assert!(e.to_string().contains("password in the URL"), "{e}");
    server.await.unwrap();
}

#[tokio::test]
async fn an_unmigrated_schema_is_a_config_error_that_says_run_migrate() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    // A schema never migrated, and one that exists but holds no tables.
    let empty = common::fresh_schema();
    sqlx::raw_sql(&format!("CREATE SCHEMA {empty}"))
        .execute(&mut ctx.admin)
        .await
        .unwrap();
    for schema in [common::fresh_schema(), empty.clone()] {
        let store = PgStore::connect(
            PgConfig::new(common::url())
                .schema(&schema)
                .migrate_on_connect(false)
                .listen(false),
        )
        .await
        .expect("construction without migrations runs nothing");
        let e = store.claim_one(q(), owner(), LEASE).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        assert!(e.to_string().contains("run migrate"), "{e}");
        let e = store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        // Once migrated, the same store works.
        store.migrate().await.unwrap();
        store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap();
        store.close().await;
        common::drop_schema(&mut ctx.admin, &schema).await;
    }
    ctx.finish().await;
}
