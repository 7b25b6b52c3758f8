//! What guards every page: the strict headers, same-origin actions, read-only
//! mode, basic auth, the authorizer, and a dashboard nested under a prefix.

use super::*;

on_every_store! {
    every_page_answers_200_with_the_strict_headers => pages_case;
    actions_from_another_site_or_without_origin_are_refused_with_403_and_change_nothing => cross_site_case;
    a_read_only_dashboard_refuses_every_action_with_403_and_shows_no_buttons => read_only_case;
}

async fn pages_case(store: &DynStore) {
    let id = ready(store, "emails", 1).await[0];
    let app = app(store);
    for path in [
        "/".to_owned(),
        "/queues/emails".to_owned(),
        "/queues/emails?state=dead&order=newest".to_owned(),
        format!("/items/{id}"),
        "/leases".to_owned(),
        "/leases?queue=emails".to_owned(),
        "/queues/emails/dead?action=requeue".to_owned(),
        "/assets/app.css".to_owned(),
        "/assets/app.js".to_owned(),
    ] {
        let r = get(&app, &path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.body);
        let csp = r.headers["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(r.headers["x-content-type-options"], "nosniff");
        assert_eq!(r.headers["cache-control"], "no-store");
        if !path.starts_with("/assets") {
            assert!(!r.body.contains("<script>"), "{path}: no inline script");
        }
    }
    assert_eq!(get(&app, "/nowhere").await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        get(&app, "/queues/emails?state=sleeping").await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        get(&app, "/queues/bad%20name").await.status,
        StatusCode::BAD_REQUEST
    );
}

async fn cross_site_case(store: &DynStore) {
    let dead_id = dead(store, "emails", "boom").await;
    let app = app(store);
    for site in [Some("cross-site"), Some("same-site"), None] {
        let r = post_from(&app, "/queues/emails/pause", "", site).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{site:?}");
        let r = post_from(&app, "/items/requeue", &format!("id={dead_id}"), site).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{site:?}");
    }
    // Refused before the body is read, whatever it is.
    let bare = axum::http::Request::post("/queues/emails/pause")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(send(&app, bare).await.status, StatusCode::FORBIDDEN);
    assert_eq!(counts(&app, "emails").await, (0, 0, 0, 1, false));
    // An Origin that matches Host passes for browsers that send no Sec-Fetch-Site.
    let req = axum::http::Request::post("/queues/emails/pause")
        .header("origin", "http://localhost:8080")
        .header("host", "localhost:8080")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(send(&app, req).await.status, StatusCode::SEE_OTHER);
    assert!(counts(&app, "emails").await.4);
    // Actions are POST only.
    assert_eq!(
        get(&app, "/queues/emails/resume").await.status,
        StatusCode::METHOD_NOT_ALLOWED
    );
}

async fn read_only_case(store: &DynStore) {
    let dead_id = dead(store, "emails", "boom").await;
    let ready_id = ready(store, "emails", 1).await[0];
    let app = router(store.clone(), DashboardConfig::new().read_only(true));
    let page = get(&app, "/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        !page.body.contains("<button type=\"submit\" name=\"do\""),
        "no pause button"
    );
    let dead_page = get(&app, "/queues/emails?state=dead").await;
    assert!(!dead_page.body.contains("Requeue selected"));
    for (path, form) in [
        ("/queues/emails/pause", String::new()),
        ("/items/requeue", format!("id={dead_id}")),
        ("/items/discard", format!("id={dead_id}")),
        ("/items/cancel", format!("id={ready_id}")),
        ("/queues/emails/dead/discard", "confirm=emails".to_owned()),
    ] {
        let r = post(&app, path, &form).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}");
    }
    assert_eq!(counts(&app, "emails").await, (1, 0, 0, 1, false));
}

#[tokio::test]
async fn nested_under_a_prefix_every_link_and_form_carries_it() {
    let store: DynStore = std::sync::Arc::new(tenure::MemoryStore::default());
    ready(&store, "emails", 1).await;
    let app = Router::new().nest(
        "/ops/tenure",
        router(
            store.clone(),
            DashboardConfig::new().base_path("/ops/tenure/"),
        ),
    );
    let page = get(&app, "/ops/tenure").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("href=\"/ops/tenure/queues/emails\""));
    assert!(page
        .body
        .contains("action=\"/ops/tenure/queues/emails/pause\""));
    assert!(
        page.body.contains("href=\"/ops/tenure\""),
        "the overview link"
    );
    let r = post(
        &app,
        "/ops/tenure/queues/emails/pause",
        "back=%2Fops%2Ftenure",
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert!(
        r.location().starts_with("/ops/tenure?notice="),
        "{}",
        r.location()
    );
    let r = post(
        &app,
        "/ops/tenure/queues/emails/resume",
        "back=%2Felsewhere",
    )
    .await;
    assert!(
        r.location()
            .starts_with("/ops/tenure/queues/emails?notice="),
        "a back outside the prefix is not followed: {}",
        r.location()
    );
    assert_eq!(
        get(&app, "/ops/tenure/healthz").await.status,
        StatusCode::OK
    );
}

fn basic(user: &str, pw: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"))
    )
}

#[tokio::test]
async fn basic_auth_answers_401_without_the_credentials_and_leaves_healthz_open() {
    let store: DynStore = Arc::new(MemoryStore::default());
    let auth = tenure_dashboard::BasicAuth::new("ops", "s3cret").unwrap();
    let app = router(store.clone(), DashboardConfig::new().basic_auth(auth));
    let r = get(&app, "/").await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(r.headers["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Basic "));
    assert_eq!(r.headers["x-content-type-options"], "nosniff");
    for header in [
        basic("ops", "wrong"),
        basic("other", "s3cret"),
        "Bearer x".into(),
    ] {
        let req = axum::http::Request::get("/")
            .header("authorization", header)
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(send(&app, req).await.status, StatusCode::UNAUTHORIZED);
    }
    let post = axum::http::Request::post("/queues/q/pause")
        .header("sec-fetch-site", "same-origin")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(send(&app, post).await.status, StatusCode::UNAUTHORIZED);
    let req = axum::http::Request::get("/")
        .header("authorization", basic("ops", "s3cret"))
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(send(&app, req).await.status, StatusCode::OK);
    assert_eq!(get(&app, "/healthz").await.status, StatusCode::OK);
}

#[tokio::test]
async fn the_authorizer_decides_each_action_on_the_server() {
    let store: DynStore = Arc::new(MemoryStore::default());
    let id = dead(&store, "emails", "boom").await;
    let app = router(
        store.clone(),
        DashboardConfig::new().authorizer(|parts| {
            match parts.headers.get("x-role").map(|v| v.as_bytes()) {
                Some(b"admin") => Access::Full,
                Some(b"support") => Access::Actions([Action::Requeue].into()),
                Some(b"viewer") => Access::ReadOnly,
                _ => Access::Forbidden,
            }
        }),
    );
    let req = |role: &str, path: &str, body: String| {
        axum::http::Request::post(path)
            .header("x-role", role)
            .header("sec-fetch-site", "same-origin")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(axum::body::Body::from(body))
            .unwrap()
    };
    assert_eq!(
        get(&app, "/").await.status,
        StatusCode::FORBIDDEN,
        "no role: forbidden"
    );
    let viewer = axum::http::Request::get("/")
        .header("x-role", "viewer")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(send(&app, viewer).await.status, StatusCode::OK);
    assert_eq!(
        send(&app, req("viewer", "/items/requeue", format!("id={id}")))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        send(&app, req("support", "/items/discard", format!("id={id}")))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        send(&app, req("support", "/queues/emails/pause", String::new()))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        store.item_get(id).await.unwrap().unwrap().state,
        tenure::ItemState::Dead,
        "refusals change nothing"
    );
    assert_eq!(
        send(&app, req("support", "/items/requeue", format!("id={id}")))
            .await
            .status,
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        store.item_get(id).await.unwrap().unwrap().state,
        tenure::ItemState::Ready
    );
    let page = send(
        &app,
        axum::http::Request::get("/queues/emails?state=ready")
            .header("x-role", "support")
            .body(axum::body::Body::empty())
            .unwrap(),
    )
    .await;
    assert!(
        !page.body.contains("Cancel selected"),
        "support may not cancel: no button"
    );
}
