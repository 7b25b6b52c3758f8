//! The dashboard's router without a socket (`tower::ServiceExt::oneshot`): pages,
//! JSON twins, actions and their refusals, on the memory store, a SQLite file, a
//! PostgreSQL schema and a Redis key prefix of each test's own.
//!
//! PostgreSQL and Redis run at `TENURE_POSTGRES_URL` and `TENURE_REDIS_URL`; without a
//! server those cases skip, unless `TENURE_REQUIRE_STORES=1`, when they fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use axum::Router;
use common::*;
use tenure::{DynStore, NewItem, Store, StoreExt};
use tenure_dashboard::{router, Access, Action, DashboardConfig};

fn app(store: &DynStore) -> Router {
    router(store.clone(), DashboardConfig::new().environment("test"))
}

/// Runs each case on every store: memory, SQLite, PostgreSQL, Redis.
macro_rules! on_every_store {
    ($($name:ident => $case:ident;)*) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let f = crate::Fixture::memory();
                    super::$case(&f.store).await;
                    f.remove().await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let f = crate::Fixture::sqlite().await;
                    super::$case(&f.store).await;
                    f.remove().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(f) = crate::Fixture::postgres().await else { return };
                    super::$case(&f.store).await;
                    f.remove().await;
                }
            )*
        }
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(f) = crate::Fixture::redis().await else { return };
                    super::$case(&f.store).await;
                    f.remove().await;
                }
            )*
        }
    };
}

on_every_store! {
    overview_shows_every_queue_with_its_counts_and_a_json_twin => overview_case;
    the_overview_shows_the_leader_and_its_term_without_taking_the_lease => leader_case;
    every_page_answers_200_with_the_strict_headers => pages_case;
    actions_from_another_site_or_without_origin_are_refused_with_403_and_change_nothing => cross_site_case;
    a_read_only_dashboard_refuses_every_action_with_403_and_shows_no_buttons => read_only_case;
    pause_and_resume_by_form_post_redirect_back_and_show_at_once => pause_case;
    cancel_answers_an_outcome_per_id => cancel_case;
    requeue_by_id_moves_a_dead_item_back_to_ready => requeue_case;
    discard_by_filter_without_the_typed_queue_name_is_400_and_discards_nothing => discard_case;
    the_dead_preview_counts_what_a_filter_takes_before_it_runs => preview_case;
    a_queue_pages_by_cursor_oldest_or_newest_first => paging_case;
    the_item_page_hides_the_payload_unless_asked_and_escapes_it => item_case;
    find_by_id_redirects_to_the_item_or_answers_404_or_400 => find_case;
    leases_are_listed_soonest_expiry_first => leases_case;
    healthz_answers_ok_when_the_store_answers => healthz_case;
    any_valid_queue_name_dots_included_round_trips_through_links_and_forms => names_case;
    an_unknown_queue_is_a_404_with_a_way_back_and_cannot_be_paused_into_existence => unknown_queue_case;
    a_listing_has_first_and_last_page_links_and_the_last_page_holds_the_tail => last_page_case;
    listings_preview_payloads_and_errors_cut_and_escaped => list_preview_case;
}

async fn last_page_case(store: &DynStore) {
    let ids: Vec<String> = ready(store, "emails", 5)
        .await
        .iter()
        .map(ToString::to_string)
        .collect();
    let app = router(store.clone(), DashboardConfig::new().page_size(2));
    let listed = |v: serde_json::Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = get(&app, "/queues/emails?state=ready").await;
    assert!(first.body.contains("id=\"next\""));
    assert!(
        first.body.contains(
            "id=\"last\" href=\"/queues/emails?state=ready&amp;order=oldest&amp;last=1\""
        ),
        "{}",
        first.body
    );
    assert!(
        !first.body.contains("id=\"first\""),
        "already the first page"
    );
    let v = get(&app, "/queues/emails?state=ready&last=1&format=json")
        .await
        .json();
    assert_eq!(
        listed(v.clone()),
        ids[3..].to_vec(),
        "the newest two, oldest first"
    );
    assert_eq!(v["next"], serde_json::Value::Null);
    assert_eq!(v["last_page"], true);
    let v = get(
        &app,
        "/queues/emails?state=ready&order=newest&last=1&format=json",
    )
    .await
    .json();
    assert_eq!(
        listed(v),
        vec![ids[1].clone(), ids[0].clone()],
        "the oldest two, newest first"
    );
    let last = get(&app, "/queues/emails?state=ready&last=1").await;
    assert!(last.body.contains("id=\"first\""), "{}", last.body);
    assert!(!last.body.contains("id=\"next\"") && !last.body.contains("id=\"last\""));
    assert!(last.body.contains("The last page: the newest 2 items."));
    let v = get(&app, "/queues/emails?state=ready&format=json")
        .await
        .json();
    let next = v["next"].as_str().unwrap();
    let later = get(&app, &format!("/queues/emails?state=ready&after={next}")).await;
    assert!(later
        .body
        .contains("id=\"first\" href=\"/queues/emails?state=ready&amp;order=oldest\""));
}

async fn list_preview_case(store: &DynStore) {
    let hostile = "\"><img src=x onerror=alert(1)><script>alert(2)</script>";
    store
        .enqueue_one(NewItem::new(q("emails"), hostile.as_bytes().to_vec()))
        .await
        .unwrap();
    let long = format!(
        "{{\"to\":\"ada@example.com\",\"body\":\"{}\"}}",
        "x".repeat(500)
    );
    store
        .enqueue_one(NewItem::new(q("emails"), long.into_bytes()))
        .await
        .unwrap();
    store
        .enqueue_one(NewItem::new(q("emails"), vec![0xff, 0x00, 0x01]))
        .await
        .unwrap();
    store
        .enqueue_one(NewItem::new(
            q("emails"),
            b"line one\nline two\r\n".to_vec(),
        ))
        .await
        .unwrap();
    let error = format!("smtp: <b>550</b> {}", "e".repeat(300));
    dead(store, "dead-letters", &error).await;
    let app = app(store);
    let page = get(&app, "/queues/emails?state=ready").await.body;
    assert!(page.contains("<th>Payload</th>"));
    assert!(
        !page.contains("<img") && !page.contains("<script>alert"),
        "escaped"
    );
    assert!(
        page.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"),
        "{page}"
    );
    assert!(page.contains("<code>{&quot;to&quot;:&quot;ada@example.com&quot;,&quot;body&quot;:&quot;xxxxxxxxxxxxxxxxxxxxxxxxxxx…</code>"), "cut to 60 characters: {page}");
    assert!(page.contains("<code>ff 00 01</code>"), "binary as hex");
    assert!(
        page.contains("<code>line one line two  </code>"),
        "one line: {page}"
    );
    let dead_page = get(&app, "/queues/dead-letters?state=dead").await.body;
    let cell = &dead_page[dead_page.find("<td class=\"error\"").unwrap()..];
    let cell = &cell[..cell.find("</td>").unwrap()];
    assert!(
        cell.contains("title=\"smtp: &lt;b&gt;550&lt;/b&gt; eee"),
        "the whole error on hover: {cell}"
    );
    assert!(cell.ends_with("eeeee…"), "cut in the cell: {cell}");
    assert!(!dead_page.contains("<b>550"));
    let v = get(&app, "/queues/emails?state=ready&format=json")
        .await
        .json();
    assert_eq!(v["items"][0]["payload_preview"], hostile);
    assert_eq!(v["items"][1]["payload_truncated"], true);
    let off = router(store.clone(), DashboardConfig::new().list_payloads(false));
    let page = get(&off, "/queues/emails?state=ready").await.body;
    assert!(!page.contains("<th>Payload</th>") && !page.contains("onerror"));
    let v = get(&off, "/queues/emails?state=ready&format=json")
        .await
        .json();
    assert_eq!(v["items"][0].get("payload_preview"), None);
}

async fn names_case(store: &DynStore) {
    let long = "q".repeat(128);
    let names = ["..", ".", "a.b:c-d_e", long.as_str()];
    for name in names {
        ready(store, name, 1).await;
    }
    let app = app(store);
    let overview = get(&app, "/").await;
    for name in names {
        // The link a page shows for the queue, as the router receives it.
        let row = format!("<tr data-queue=\"{name}\">");
        let at = overview.body.find(&row).unwrap_or_else(|| panic!("{row}"));
        let rest = &overview.body[at..];
        let start = rest.find("href=\"").unwrap() + 6;
        let link = &rest[start..start + rest[start..].find('"').unwrap()];
        assert!(
            rest[..rest.find("</tr>").unwrap()].contains(&format!("title=\"{name}\"")),
            "the whole name on hover"
        );
        let page = get(&app, link).await;
        assert_eq!(page.status, StatusCode::OK, "{name}: {link}");
        assert!(page.body.contains(&format!("Queue <code>{name}</code>")));
        let v = get(&app, &format!("{link}?format=json")).await.json();
        assert_eq!(v["queue"], name);
        assert_eq!(v["items"].as_array().unwrap().len(), 1);
        let r = post(&app, &format!("{link}/pause"), "").await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{name}: {}", r.body);
        assert!(store.queue_counts(&q(name)).await.unwrap().paused, "{name}");
    }
}

async fn unknown_queue_case(store: &DynStore) {
    ready(store, "mail", 1).await;
    let app = app(store);
    for path in [
        "/queues/nope",
        "/queues/nope?state=dead",
        "/queues/nope/dead",
    ] {
        let r = get(&app, path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
        assert!(r.body.contains("No queue nope"), "{}", r.body);
        assert!(
            r.body.contains("<a href=\"/\">Overview</a>"),
            "a way back: {}",
            r.body
        );
        let json = get(
            &app,
            &format!(
                "{path}{}format=json",
                if path.contains('?') { '&' } else { '?' }
            ),
        )
        .await;
        assert_eq!(json.status, StatusCode::NOT_FOUND);
        assert_eq!(json.json()["error"]["kind"], "not_found");
    }
    for path in [
        "/queues/nope/pause",
        "/queues/nope/resume",
        "/queues/nope/dead/requeue",
    ] {
        let r = post(&app, path, "").await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
    }
    let names = store.queue_list().await.unwrap();
    assert!(!names.contains(&q("nope")), "no phantom queue: {names:?}");
    let v = get(&app, "/?format=json").await.json();
    assert_eq!(v["queues"].as_array().unwrap().len(), 1, "{v}");
}

async fn overview_case(store: &DynStore) {
    dead(store, "emails", "smtp refused").await;
    ready(store, "emails", 3).await;
    store
        .enqueue_one(NewItem::new(q("emails"), b"later".to_vec()).delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    ready(store, "thumbnails", 1).await;
    let app = app(store);
    let page = get(&app, "/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("emails") && page.body.contains("thumbnails"));
    assert!(page
        .body
        .contains(r#"<span class="env" title="environment">test</span>"#));
    assert_eq!(counts(&app, "emails").await, (2, 1, 1, 1, false));
    assert_eq!(counts(&app, "thumbnails").await, (1, 0, 0, 0, false));
    let v = get(&app, "/?format=json").await.json();
    assert_eq!(v["environment"], "test");
    assert_eq!(v["store"], store.name());
    let emails = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["queue"] == "emails")
        .unwrap();
    assert!(emails["oldest_ready_age_s"].as_f64().is_some(), "{emails}");
    assert_eq!(
        v["leader"]["holder"],
        serde_json::Value::Null,
        "nobody leads yet"
    );
    assert!(page
        .body
        .contains("none: no worker holds the maintenance lease"));
}

async fn leader_case(store: &DynStore) {
    let name = tenure::LeaderName::new("tenure.maintenance").unwrap();
    let term = match store
        .leader_acquire(tenure::LeaderParams::new(name.clone(), me(), LEASE))
        .await
        .unwrap()
    {
        tenure::LeaderStatus::Leader { term, .. } => term,
        other => panic!("worker-a should lead: {other:?}"),
    };
    // Three dashboards, so three reads of the store: none may take the lease.
    for _ in 0..3 {
        let app = app(store);
        let v = get(&app, "/?format=json").await.json();
        assert_eq!(v["leader"]["holder"], "worker-a");
        assert_eq!(v["leader"]["term"], term);
        let page = get(&app, "/").await;
        assert!(
            page.body
                .contains(&format!("<strong class=\"term\">{term}</strong>")),
            "{}",
            page.body
        );
    }
    let info = store.leader_get(&name).await.unwrap().unwrap();
    assert_eq!(
        (info.holder.as_str(), info.term),
        ("worker-a", term),
        "reading changed nothing"
    );
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

async fn pause_case(store: &DynStore) {
    ready(store, "emails", 1).await;
    let app = app(store);
    assert!(!counts(&app, "emails").await.4);
    let r = post(
        &app,
        "/queues/emails/pause",
        "back=%2Fqueues%2Femails%3Fstate%3Dready",
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert!(
        r.location()
            .starts_with("/queues/emails?state=ready&notice="),
        "{}",
        r.location()
    );
    assert!(
        counts(&app, "emails").await.4,
        "the cache was cleared by the action"
    );
    assert!(store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .is_none());
    // A `back` that leaves the dashboard is not followed.
    let r = post(&app, "/queues/emails/resume", "back=%2F%2Fevil.example%2F").await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert!(r.location().starts_with("/queues/emails?notice="));
    assert!(!counts(&app, "emails").await.4);
    let v = send(
        &app,
        axum::http::Request::post("/queues/emails/pause?format=json")
            .header("sec-fetch-site", "same-origin")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(axum::body::Body::empty())
            .unwrap(),
    )
    .await
    .json();
    assert_eq!(v["paused"], true);
    assert_eq!(v["changed"], true);
}

async fn cancel_case(store: &DynStore) {
    let ids = ready(store, "emails", 2).await;
    let running = store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(running.token.id, ids[0]);
    let unknown = tenure::ItemId::new();
    let app = app(store);
    let form = format!(
        "id={}&id={}&id={unknown}&back=%2F&confirm=yes",
        ids[0], ids[1]
    );
    let r = follow(&app, &post(&app, "/items/cancel", &form).await).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let text = notice(&r);
    assert!(text.contains("Cancelled 1 of 3 items."), "{text}");
    assert!(text.contains("not cancelled: running (attempt 1, owner worker-a)"));
    assert!(text.contains("not found"));
    let r = post(
        &app,
        "/items/cancel?format=json",
        &format!("id={}&confirm=yes", ids[0]),
    )
    .await;
    assert_eq!(r.json()["results"][0]["outcome"], "running");
    assert_eq!(counts(&app, "emails").await, (0, 0, 1, 0, false));
    assert_eq!(
        post(&app, "/items/cancel", "").await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        post(&app, "/items/cancel", "id=nope").await.status,
        StatusCode::BAD_REQUEST
    );
}

async fn requeue_case(store: &DynStore) {
    let id = dead(store, "emails", "boom").await;
    let app = app(store);
    assert_eq!(counts(&app, "emails").await, (0, 0, 0, 1, false));
    let r = follow(
        &app,
        &post(&app, "/items/requeue", &format!("id={id}")).await,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(notice(&r).contains("Requeued 1 of 1 item "), "{}", r.body);
    assert_eq!(counts(&app, "emails").await, (1, 0, 0, 0, false));
    let item = store.item_get(id).await.unwrap().unwrap();
    assert_eq!(item.state, tenure::ItemState::Ready);
}

async fn discard_case(store: &DynStore) {
    dead(store, "emails", "one").await;
    dead(store, "emails", "two").await;
    let app = app(store);
    for form in ["", "confirm=", "confirm=other", "confirm=email"] {
        let r = post(&app, "/queues/emails/dead/discard", form).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{form:?}");
    }
    assert_eq!(counts(&app, "emails").await.3, 2, "nothing discarded");
    let r = post(
        &app,
        "/queues/emails/dead/discard",
        "confirm=emails&limit=1",
    )
    .await;
    let page = follow(&app, &r).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        notice(&page).contains("Discarded 1 item of queue emails."),
        "{}",
        page.body
    );
    assert_eq!(counts(&app, "emails").await.3, 1);
    // A reload of the result page shows the result is gone and takes no other batch.
    let again = get(&app, r.location()).await;
    assert!(
        notice(&again).contains("shown once already"),
        "{}",
        again.body
    );
    assert_eq!(
        counts(&app, "emails").await.3,
        1,
        "the reload discarded nothing"
    );
    let r = post(&app, "/queues/emails/dead/requeue", "limit=10").await;
    assert!(
        notice(&follow(&app, &r).await).contains("Requeued 1 item of queue emails."),
        "{}",
        r.location()
    );
    assert_eq!(counts(&app, "emails").await, (1, 0, 0, 0, false));
    assert_eq!(
        post(&app, "/queues/emails/dead/requeue", "limit=0")
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        post(&app, "/queues/emails/dead/requeue", "older_than=5w")
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
}

async fn preview_case(store: &DynStore) {
    for e in ["a", "b", "c"] {
        dead(store, "emails", e).await;
    }
    let app = app(store);
    let v = get(
        &app,
        "/queues/emails/dead?action=discard&limit=2&format=json",
    )
    .await
    .json();
    assert_eq!(
        (
            v["matching"].as_u64(),
            v["takes"].as_u64(),
            v["exact"].as_bool()
        ),
        (Some(3), Some(2), Some(true))
    );
    let page = get(&app, "/queues/emails/dead?action=discard&limit=2").await;
    assert!(
        page.body.contains("takes <strong id=\"takes\">2</strong>"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("name=\"confirm\""),
        "a typed confirmation"
    );
    // Nothing has been dead for a day yet.
    let v = get(
        &app,
        "/queues/emails/dead?action=requeue&older_than=1d&format=json",
    )
    .await
    .json();
    assert_eq!(v["matching"], 0);
    assert_eq!(
        counts(&app, "emails").await.3,
        3,
        "a preview changes nothing"
    );
}

async fn paging_case(store: &DynStore) {
    let ids = ready(store, "emails", 5).await;
    let app = router(store.clone(), DashboardConfig::new().page_size(2));
    let mut seen = Vec::new();
    let mut path = "/queues/emails?state=ready&format=json".to_owned();
    loop {
        let v = get(&app, &path).await.json();
        for i in v["items"].as_array().unwrap() {
            seen.push(i["id"].as_str().unwrap().to_owned());
        }
        match v["next"].as_str() {
            Some(c) => path = format!("/queues/emails?state=ready&format=json&after={c}"),
            None => break,
        }
        assert!(seen.len() <= 5, "paging ends");
    }
    let want: Vec<String> = ids.iter().map(ToString::to_string).collect();
    assert_eq!(seen, want, "oldest first, each once");
    let v = get(&app, "/queues/emails?state=ready&order=newest&format=json")
        .await
        .json();
    assert_eq!(v["items"][0]["id"], want[4]);
    let page = get(&app, "/queues/emails?state=ready").await;
    assert!(page.body.contains("id=\"next\""), "a next link");
}

async fn item_case(store: &DynStore) {
    let id = store
        .enqueue_one(NewItem::new(
            q("emails"),
            b"<script>alert(1)</script>".to_vec(),
        ))
        .await
        .unwrap()
        .id;
    let app = app(store);
    let hidden = get(&app, &format!("/items/{id}")).await;
    assert_eq!(hidden.status, StatusCode::OK);
    assert!(!hidden.body.contains("alert(1)"), "hidden unless asked");
    assert!(hidden.body.contains("Show payload (25 bytes)"));
    assert!(hidden.body.contains("0 of 20"), "attempt of max");
    let shown = get(&app, &format!("/items/{id}?payload=show")).await;
    assert!(
        shown.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        shown.body
    );
    assert!(!shown.body.contains("<script>alert"));
    let v = get(&app, &format!("/items/{id}?payload=show&format=json"))
        .await
        .json();
    assert_eq!(v["payload_preview"], "<script>alert(1)</script>");
    assert_eq!(v["listing"], "ready");
    let capped = router(store.clone(), DashboardConfig::new().preview_bytes(8));
    let v = get(&capped, &format!("/items/{id}?payload=show&format=json"))
        .await
        .json();
    assert_eq!(
        (
            v["payload_preview"].as_str(),
            v["payload_truncated"].as_bool()
        ),
        (Some("<script>"), Some(true))
    );
    let missing = get(&app, &format!("/items/{}", tenure::ItemId::new())).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

async fn find_case(store: &DynStore) {
    let id = ready(store, "emails", 1).await[0];
    let app = router(
        store.clone(),
        DashboardConfig::new().base_path("/ops/tenure"),
    );
    let r = get(&app, &format!("/find?id=+{id}+")).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(
        r.location(),
        format!("/ops/tenure/items/{id}"),
        "links carry the base path"
    );
    assert_eq!(
        get(&app, &format!("/find?id={}", tenure::ItemId::new()))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&app, "/find?id=%3Cb%3E").await.status,
        StatusCode::BAD_REQUEST
    );
    let page = get(&app, "/").await;
    assert!(page.body.contains("action=\"/ops/tenure/find\""));
    assert!(page.body.contains("href=\"/ops/tenure/assets/app.css\""));
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

async fn leases_case(store: &DynStore) {
    ready(store, "emails", 2).await;
    ready(store, "thumbs", 1).await;
    let long = store
        .claim_one(q("emails"), me(), Duration::from_secs(600))
        .await
        .unwrap()
        .unwrap();
    let short = store
        .claim_one(q("thumbs"), me(), Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let app = app(store);
    let v = get(&app, "/leases?format=json").await.json();
    let ids: Vec<&str> = v["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [short.token.id.to_string(), long.token.id.to_string()],
        "soonest first"
    );
    assert_eq!(v["leases"][0]["expired"], false);
    let v = get(&app, "/leases?queue=emails&format=json").await.json();
    assert_eq!(v["leases"].as_array().unwrap().len(), 1);
    assert_eq!(v["leases"][0]["owner"], "worker-a");
}

async fn healthz_case(store: &DynStore) {
    let app = app(store);
    let r = get(&app, "/healthz").await;
    assert_eq!((r.status, r.body.as_str()), (StatusCode::OK, "up\n"));
}

// Memory-store cases: auth, the authorizer, the shared cache, expired leases.

mod memory_only {
    use std::sync::Arc;

    use tenure::{Clock, ManualClock, MemoryStore, Timestamp};

    use super::*;

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

    #[tokio::test(start_paused = true)]
    async fn ten_tabs_share_one_read_of_the_counts_per_ttl() {
        let memory = Arc::new(MemoryStore::default());
        let store: DynStore = memory.clone();
        ready(&store, "emails", 1).await;
        let app = router(
            store.clone(),
            DashboardConfig::new().counts_ttl(Duration::from_secs(5)),
        );
        assert_eq!(counts(&app, "emails").await.0, 1);
        // The store stops answering: within the TTL every tab is still served, from the
        // one cached read, so none of them asked the store.
        memory.set_available(false);
        let tabs: Vec<_> = (0..10)
            .map(|_| {
                let app = app.clone();
                tokio::spawn(async move { get(&app, "/?format=json").await.status })
            })
            .collect();
        for t in tabs {
            assert_eq!(t.await.unwrap(), StatusCode::OK);
        }
        tokio::time::advance(Duration::from_secs(6)).await;
        assert_eq!(
            get(&app, "/?format=json").await.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "past the TTL the store is read again"
        );
        let page = get(&app, "/").await;
        assert_eq!(page.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            page.body.contains("The store does not answer"),
            "{}",
            page.body
        );
        assert!(
            !page.body.contains("switched off"),
            "the store's own text goes to the log: {}",
            page.body
        );
        let health = get(&app, "/healthz").await;
        assert_eq!(
            (health.status, health.body.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "down\n"),
            "up or down, nothing about the store"
        );
        memory.set_available(true);
        assert_eq!(get(&app, "/?format=json").await.status, StatusCode::OK);
    }

    #[tokio::test]
    async fn dead_counts_and_old_ready_ages_are_highlighted_with_one_class_attribute() {
        let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
        let store: DynStore = Arc::new(MemoryStore::new(clock.clone()));
        dead(&store, "mail", "boom").await;
        ready(&store, "mail", 1).await;
        ready(&store, "fresh", 1).await;
        clock.advance(Duration::from_secs(120));
        ready(&store, "fresh2", 1).await;
        let app = router(
            store.clone(),
            DashboardConfig::new().clock(Arc::new(clock.clone())),
        );
        let page = get(&app, "/").await.body;
        let row = |name: &str| {
            let at = page.find(&format!("<tr data-queue=\"{name}\">")).unwrap();
            page[at..at + page[at..].find("</tr>").unwrap()].to_owned()
        };
        let mail = row("mail");
        assert!(mail.contains("<td class=\"num dead warn\">"), "{mail}");
        assert!(mail.contains("<td class=\"lag warn\">2m00s</td>"), "{mail}");
        let fresh2 = row("fresh2");
        assert!(fresh2.contains("<td class=\"num dead\">"), "{fresh2}");
        assert!(fresh2.contains("<td class=\"lag\">"), "{fresh2}");
        assert!(
            !page.contains("\" class=\""),
            "never two class attributes on one tag"
        );
        assert!(!page.contains("class=\"num dead\" class"));
    }

    #[tokio::test]
    async fn a_lease_past_its_expiry_that_nobody_recovered_is_marked() {
        let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
        let store: DynStore = Arc::new(MemoryStore::new(clock.clone()));
        ready(&store, "emails", 1).await;
        let lease = store
            .claim_one(q("emails"), me(), Duration::from_secs(30))
            .await
            .unwrap()
            .unwrap();
        clock.advance(Duration::from_secs(31));
        let app = router(
            store.clone(),
            DashboardConfig::new().clock(Arc::new(clock.clone())),
        );
        let v = get(&app, "/leases?format=json").await.json();
        assert_eq!(v["leases"][0]["id"], lease.token.id.to_string());
        assert_eq!(v["leases"][0]["expired"], true);
        let page = get(&app, "/leases").await;
        assert!(
            page.body.contains("expired, not recovered"),
            "{}",
            page.body
        );
        let item = get(&app, &format!("/items/{}", lease.token.id)).await;
        assert!(item.body.contains("expired, not recovered"));
        assert!(clock.now() > lease.expires_at);
    }
}

/// Tabs polling one listing share one read while it is fresh; an action made through
/// the dashboard clears it, so its effect shows at once.
#[tokio::test]
async fn a_listing_page_is_shared_while_fresh_and_read_again_after_an_action() {
    let f = Fixture::memory();
    let store = &f.store;
    let ids = ready(store, "emails", 2).await;
    let app = router(
        store.clone(),
        DashboardConfig::new().counts_ttl(Duration::from_secs(3600)),
    );
    let page = "/queues/emails?state=ready&format=json";
    let listed = |r: Reply| -> Vec<String> {
        r.json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = |v: &[tenure::ItemId]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    assert_eq!(listed(get(&app, page).await), all(&ids));
    // Written behind the dashboard's back: the shared page does not show it yet.
    let later = ready(store, "emails", 1).await;
    assert_eq!(listed(get(&app, page).await), all(&ids));
    // An action through the dashboard: the page is read again.
    let r = post(&app, "/items/cancel", &format!("id={}&confirm=yes", ids[0])).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    assert_eq!(listed(get(&app, page).await), all(&[ids[1], later[0]]));
    f.remove().await;
}
