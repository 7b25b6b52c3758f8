//! The dashboard as an attacker meets it: a web page that rebinds its DNS name to this
//! machine (`Host` forged, `Origin` matching it), an `https` page posting to the http
//! server, hostile `back` values, reloads of a result page, a client that never
//! finishes its headers or body, guessed passwords. Some through the router alone,
//! the connection-level ones through [`tenure_dashboard::serve`] on a real socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::Router;
use common::*;
use tenure::{DynStore, MemoryStore, NewItem, Store, StoreExt};
use tenure_dashboard::{router, serve, BasicAuth, DashboardConfig, ServeOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn memory() -> DynStore {
    Arc::new(MemoryStore::default())
}

/// A request with these headers (and a form body when `form` is given).
fn request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    form: Option<&str>,
) -> Request<Body> {
    let mut req = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    match form {
        Some(f) => req
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from(f.to_owned()))
            .unwrap(),
        None => req.body(Body::empty()).unwrap(),
    }
}

const REBOUND: &str = "attacker.example:8080";

#[tokio::test]
async fn a_rebound_name_gets_421_on_every_page_and_reads_nothing() {
    let store = memory();
    let id = store
        .enqueue_one(NewItem::new(q("mail"), b"secret-payload".to_vec()))
        .await
        .unwrap()
        .id;
    let app = router(store.clone(), DashboardConfig::new());
    for path in [
        "/".to_owned(),
        "/?format=json".to_owned(),
        "/queues/mail".to_owned(),
        "/queues/mail?format=json".to_owned(),
        format!("/items/{id}?payload=show"),
        format!("/items/{id}?payload=show&format=json"),
        "/leases".to_owned(),
        "/healthz".to_owned(),
        "/assets/app.js".to_owned(),
        "/nowhere".to_owned(),
    ] {
        let r = send(&app, request("GET", &path, &[("host", REBOUND)], None)).await;
        assert_eq!(r.status, StatusCode::MISDIRECTED_REQUEST, "{path}");
        assert!(
            !r.body.contains("secret") && !r.body.contains("mail"),
            "{path}: {}",
            r.body
        );
        assert_eq!(r.headers["x-content-type-options"], "nosniff");
        // The same request under a loopback name is answered.
        let ok = send(
            &app,
            request("GET", &path, &[("host", "127.0.0.1:8080")], None),
        )
        .await;
        assert_ne!(ok.status, StatusCode::MISDIRECTED_REQUEST, "{path}");
    }
    let json = send(
        &app,
        request("GET", "/?format=json", &[("host", "localhost:8080")], None),
    )
    .await;
    assert_eq!(json.status, StatusCode::OK);
    assert!(json.body.contains("mail"));
}

#[tokio::test]
async fn a_rebound_post_with_a_matching_origin_is_refused_and_changes_nothing() {
    let store = memory();
    let dead_id = dead(&store, "mail", "boom").await;
    let app = router(store.clone(), DashboardConfig::new());
    let origin = format!("http://{REBOUND}");
    for site in [Some("same-origin"), None] {
        let mut headers = vec![("host", REBOUND), ("origin", origin.as_str())];
        if let Some(site) = site {
            headers.push(("sec-fetch-site", site));
        }
        for (path, form) in [
            ("/queues/mail/pause", String::new()),
            ("/items/discard", format!("id={dead_id}&confirm=yes")),
            ("/items/requeue", format!("id={dead_id}")),
            ("/queues/mail/dead/discard", "confirm=mail".to_owned()),
        ] {
            let r = send(&app, request("POST", path, &headers, Some(&form))).await;
            assert_eq!(r.status, StatusCode::MISDIRECTED_REQUEST, "{path} {site:?}");
        }
    }
    // The authority of an absolute-form request line is checked like Host.
    let r = send(
        &app,
        request(
            "POST",
            &format!("http://{REBOUND}/queues/mail/pause"),
            &[
                ("host", "localhost:8080"),
                ("sec-fetch-site", "same-origin"),
            ],
            Some(""),
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::MISDIRECTED_REQUEST);
    let counts = store.queue_counts(&q("mail")).await.unwrap();
    assert!(!counts.paused, "not paused");
    assert_eq!(counts.dead, 1, "not discarded nor requeued");
}

#[tokio::test]
async fn an_https_origin_against_this_http_server_is_refused() {
    let store = memory();
    ready(&store, "mail", 1).await;
    let app = router(store.clone(), DashboardConfig::new());
    let r = send(
        &app,
        request(
            "POST",
            "/queues/mail/pause",
            &[
                ("host", "localhost:8080"),
                ("origin", "https://localhost:8080"),
            ],
            Some(""),
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert!(!store.queue_counts(&q("mail")).await.unwrap().paused);
    // Served over TLS by a proxy under a configured https name, the https page is
    // the dashboard's own.
    let proxied = router(
        store.clone(),
        DashboardConfig::new()
            .allowed_host("https://ops.example.com")
            .unwrap(),
    );
    let r = send(
        &proxied,
        request(
            "POST",
            "/queues/mail/pause",
            &[
                ("host", "ops.example.com"),
                ("origin", "https://ops.example.com"),
            ],
            Some(""),
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    assert!(store.queue_counts(&q("mail")).await.unwrap().paused);
}

#[tokio::test]
async fn a_proxy_name_is_answered_only_once_configured() {
    let store = memory();
    let plain = router(store.clone(), DashboardConfig::new());
    let named = router(
        store.clone(),
        DashboardConfig::new()
            .allowed_host("ops.example.com")
            .unwrap()
            .allowed_host("tenure.internal:9000")
            .unwrap(),
    );
    let get_as = |host: &'static str| request("GET", "/", &[("host", host)], None);
    assert_eq!(
        send(&plain, get_as("ops.example.com")).await.status,
        StatusCode::MISDIRECTED_REQUEST
    );
    assert_eq!(
        send(&named, get_as("ops.example.com")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(&named, get_as("OPS.example.com:443")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(&named, get_as("tenure.internal:9000")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(&named, get_as("tenure.internal:9001")).await.status,
        StatusCode::MISDIRECTED_REQUEST
    );
    assert_eq!(
        send(&named, get_as("evil.ops.example.com")).await.status,
        StatusCode::MISDIRECTED_REQUEST
    );
    assert!(DashboardConfig::new()
        .allowed_host("ops.example.com/x")
        .is_err());
    assert!(DashboardConfig::new().allowed_host("").is_err());
}

#[tokio::test]
async fn every_action_redirects_to_a_page_that_shows_its_result_once() {
    let store = memory();
    let dead_ids = [
        dead(&store, "mail", "one").await,
        dead(&store, "mail", "two").await,
        dead(&store, "mail", "three").await,
        dead(&store, "mail", "four").await,
    ];
    let ready_id = ready(&store, "mail", 1).await[0];
    let app = router(store.clone(), DashboardConfig::new());
    let actions = [
        ("/queues/mail/pause", String::new(), "Paused queue mail"),
        ("/queues/mail/resume", String::new(), "Resumed queue mail"),
        (
            "/items/requeue",
            format!("id={}", dead_ids[0]),
            "Requeued 1 of 1 item",
        ),
        (
            "/items/discard",
            format!("id={}&confirm=yes", dead_ids[1]),
            "Discarded 1 of 1 item",
        ),
        (
            "/items/cancel",
            format!("id={ready_id}&confirm=yes"),
            "Cancelled 1 of 1 item",
        ),
        (
            "/queues/mail/dead/requeue",
            "limit=1".to_owned(),
            "Requeued 1 item of queue mail",
        ),
        (
            "/queues/mail/dead/discard",
            "limit=1&confirm=mail".to_owned(),
            "Discarded 1 item of queue mail",
        ),
    ];
    let state = || async {
        let c = store.queue_counts(&q("mail")).await.unwrap();
        (c.ready, c.scheduled, c.running, c.dead, c.paused)
    };
    for (path, form, said) in actions {
        let before = state().await;
        let r = post(&app, path, &form).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{path}: {}", r.body);
        let first = get(&app, r.location()).await;
        assert_eq!(first.status, StatusCode::OK, "{path}");
        assert!(notice(&first).contains(said), "{path}: {}", notice(&first));
        let after = state().await;
        // A reload: the notice is gone and the store is as the action left it.
        let reload = get(&app, r.location()).await;
        assert_eq!(reload.status, StatusCode::OK);
        assert!(
            notice(&reload).contains("shown once already"),
            "{path}: {}",
            notice(&reload)
        );
        assert!(!notice(&reload).contains(said));
        assert_eq!(state().await, after, "{path}: a reload changed nothing");
        assert_ne!(before, after, "{path}: the action did something");
    }
}

#[tokio::test]
async fn discard_and_cancel_by_id_ask_first_and_run_only_once_confirmed() {
    let store = memory();
    let dead_id = dead(&store, "mail", "boom").await;
    let ready_id = ready(&store, "mail", 1).await[0];
    let app = router(store.clone(), DashboardConfig::new());
    for (path, id, button) in [
        ("/items/discard", dead_id, "Discard 1 item"),
        ("/items/cancel", ready_id, "Cancel 1 item"),
    ] {
        let r = post(&app, path, &format!("id={id}&back=%2Fqueues%2Fmail")).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: asks, does not run");
        assert!(r.body.contains(button), "{}", r.body);
        assert!(r.body.contains("name=\"confirm\" value=\"yes\""));
        assert!(r.body.contains(&format!("name=\"id\" value=\"{id}\"")));
        assert!(r.body.contains("href=\"/queues/mail\""), "a way back");
        assert!(
            store.item_get(id).await.unwrap().is_some(),
            "{path}: still there"
        );
        let json = post(&app, &format!("{path}?format=json"), &format!("id={id}")).await;
        assert_eq!(json.status, StatusCode::BAD_REQUEST);
        assert_eq!(json.json()["error"]["kind"], "unconfirmed");
        assert!(store.item_get(id).await.unwrap().is_some());
        let r = post(&app, path, &format!("id={id}&confirm=yes")).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER);
        assert!(store.item_get(id).await.unwrap().is_none(), "{path}: gone");
    }
}

#[tokio::test]
async fn a_hostile_back_is_never_followed_and_never_a_500() {
    let store = memory();
    ready(&store, "mail", 1).await;
    let app = router(store.clone(), DashboardConfig::new());
    let hostile = [
        "%2F%09%2Fevil.example",
        "%09%2F%2Fevil.example",
        "%2F%0A%2Fevil.example",
        "%2F%0D%0ASet-Cookie%3A+x%3D1",
        "https%3A%2F%2Fevil.example%2F",
        "%2F%5Cevil.example",
        "%2F%2Fevil.example",
        "javascript%3Aalert(1)",
        "%2Fqueues%2F..%2F..%2Fx",
        "%2F%C3%A9",
        "%2Fa+b",
    ];
    let mut paused = false;
    for back in hostile {
        let path = if paused {
            "/queues/mail/resume"
        } else {
            "/queues/mail/pause"
        };
        let r = post(&app, path, &format!("back={back}")).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{back}: {}", r.body);
        assert!(
            r.location().starts_with("/queues/mail?notice="),
            "{back}: {}",
            r.location()
        );
        paused = !paused;
        assert_eq!(store.queue_counts(&q("mail")).await.unwrap().paused, paused);
    }
}

#[tokio::test(start_paused = true)]
async fn failed_basic_auth_attempts_are_slowed_per_client() {
    use base64::Engine as _;
    let store = memory();
    let auth = BasicAuth::new("ops", "s3cret").unwrap();
    let app = router(store, DashboardConfig::new().basic_auth(auth));
    let attempt = |from: [u8; 4], password: &str| {
        let header = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("ops:{password}"))
        );
        let mut req = request("GET", "/", &[("authorization", header.as_str())], None);
        req.extensions_mut()
            .insert(ConnectInfo(SocketAddr::from((from, 50_000))));
        req
    };
    let guesser = [203, 0, 113, 9];
    let operator = [192, 0, 2, 1];
    for _ in 0..5 {
        assert_eq!(
            send(&app, attempt(guesser, "guess")).await.status,
            StatusCode::UNAUTHORIZED
        );
    }
    // Now the guesser waits: even the right password is not looked at.
    let r = send(&app, attempt(guesser, "s3cret")).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers["retry-after"], "1");
    // Another client is not slowed.
    assert_eq!(
        send(&app, attempt(operator, "s3cret")).await.status,
        StatusCode::OK
    );
    // After the wait one more guess, and the wait doubles.
    tokio::time::advance(Duration::from_millis(1_001)).await;
    assert_eq!(
        send(&app, attempt(guesser, "guess")).await.status,
        StatusCode::UNAUTHORIZED
    );
    let r = send(&app, attempt(guesser, "guess")).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers["retry-after"], "2");
    tokio::time::advance(Duration::from_millis(2_001)).await;
    assert_eq!(
        send(&app, attempt(guesser, "s3cret")).await.status,
        StatusCode::OK
    );
    // A success forgets the failures.
    assert_eq!(
        send(&app, attempt(guesser, "guess")).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        send(&app, attempt(guesser, "s3cret")).await.status,
        StatusCode::OK
    );
}

/// `app` served by [`serve`] on a loopback port of its own.
async fn start(app: Router, options: ServeOptions) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, app, options, std::future::pending()));
    addr
}

/// Sends `text` on a new connection and reads until the server closes it (at most
/// 10 s).
async fn raw(addr: SocketAddr, text: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out))
        .await
        .expect("the server answered and closed the connection")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_dropped() {
    let app = router(memory(), DashboardConfig::new());
    let addr = start(
        app,
        ServeOptions::new().header_read_timeout(Duration::from_millis(300)),
    )
    .await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server dropped the half-sent request");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "dropped by the header timeout, not at once"
    );
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));
    // So is one that connects and says nothing at all.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let read = tokio::time::timeout(Duration::from_secs(10), silent.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server dropped the silent client");
    // The server still answers whole requests.
    let ok = raw(
        addr,
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(ok.ends_with("up\n"), "{ok}");
}

#[tokio::test]
async fn a_body_that_never_arrives_answers_408_and_runs_nothing() {
    let store = memory();
    ready(&store, "mail", 1).await;
    let app = router(
        store.clone(),
        DashboardConfig::new().body_timeout(Duration::from_millis(200)),
    );
    let addr = start(app, ServeOptions::new()).await;
    let r = raw(
        addr,
        "POST /queues/mail/pause HTTP/1.1\r\nHost: 127.0.0.1\r\nSec-Fetch-Site: same-origin\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\
         Connection: close\r\n\r\nback=%2F",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 408"), "{r}");
    assert!(!store.queue_counts(&q("mail")).await.unwrap().paused);
}

/// The `href` of the first link after `marker` in `html`, unescaped (`&amp;`).
fn href_after(html: &str, marker: &str) -> String {
    let at = html
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} in {html}"));
    let rest = &html[at..];
    let start = rest.find("href=\"").unwrap() + 6;
    let end = start + rest[start..].find('"').unwrap();
    rest[start..end].replace("&amp;", "&")
}

#[tokio::test]
async fn dot_names_round_trip_through_links_and_forms_over_real_http() {
    let store = memory();
    for name in ["..", ".", "...", "a.b:c-d_e"] {
        ready(&store, name, 1).await;
    }
    let app = Router::new().nest(
        "/ops/tenure",
        router(
            store.clone(),
            DashboardConfig::new().base_path("/ops/tenure"),
        ),
    );
    let addr = start(app, ServeOptions::new()).await;
    let get = |path: String| async move {
        raw(
            addr,
            &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
        )
        .await
    };
    let overview = get("/ops/tenure".to_owned()).await;
    assert!(overview.starts_with("HTTP/1.1 200"), "{overview}");
    for name in ["..", ".", "...", "a.b:c-d_e"] {
        let link = href_after(&overview, &format!("<tr data-queue=\"{name}\">"));
        assert!(link.starts_with("/ops/tenure/queues/"), "{link}");
        let last = link.rsplit('/').next().unwrap();
        assert!(
            last != ".."
                && last != "."
                && !last.eq_ignore_ascii_case("%2e%2e")
                && !last.eq_ignore_ascii_case("%2e"),
            "{name}: {link} is no dot step a browser resolves away"
        );
        let page = get(link.clone()).await;
        assert!(page.starts_with("HTTP/1.1 200"), "{name}: {link}: {page}");
        assert!(
            page.contains(&format!("Queue <code>{name}</code>")),
            "{name}: {page}"
        );
        // The page's Pause form posts to this queue's own pause.
        let at = page.find("/pause\"").unwrap();
        let start = page[..at].rfind('"').unwrap() + 1;
        let action = &page[start..at + 6];
        assert_eq!(action, format!("{link}/pause"));
        let r = raw(
            addr,
            &format!(
                "POST {action} HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 0\r\n\
                 Connection: close\r\n\r\n"
            ),
        )
        .await;
        assert!(r.starts_with("HTTP/1.1 303"), "{name}: {r}");
        assert!(store.queue_counts(&q(name)).await.unwrap().paused, "{name}");
    }
    // A client that sends %2E%2E as it is (curl, scripts) reaches the queue too; only
    // browsers resolve it away, hence the ~ in the dashboard's own links.
    let page = get("/ops/tenure/queues/%2E%2E?format=json".to_owned()).await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("\"queue\":\"..\""), "{page}");
    assert!(
        !store
            .queue_list()
            .await
            .unwrap()
            .iter()
            .any(|n| n.as_str() == "pause"),
        "no phantom queue"
    );
}
