use super::*;

/// A port nobody listens on.
async fn closed_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_refused_connection_says_so_within_a_second_despite_a_5_s_acquire_timeout() {
    let port = closed_port().await;
    let url = format!("postgres://postgres@127.0.0.1:{port}/test");
    // The default acquire timeout (5 s), as a user would have it.
    let started = Instant::now();
    let e = PgStore::connect(PgConfig::new(&url).listen(false))
        .await
        .unwrap_err();
    assert!(e.is_retryable(), "{e}");
    assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );

    let store = PgStore::connect(PgConfig::new(&url).migrate_on_connect(false).listen(false))
        .await
        .expect("construction is lazy");
    let started = Instant::now();
    let e = store.claim_one(q(), owner(), LEASE).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}
