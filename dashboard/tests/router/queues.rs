//! A queue's page: paging by cursor, the first and last pages, payload previews,
//! queue names and unknown queues, pause and resume, and the shared listing.

use super::*;

on_every_store! {
    pause_and_resume_by_form_post_redirect_back_and_show_at_once => pause_case;
    a_queue_pages_by_cursor_oldest_or_newest_first => paging_case;
    any_valid_queue_name_dots_included_round_trips_through_links_and_forms => names_case;
    an_unknown_queue_is_a_404_with_a_way_back_and_cannot_be_paused_into_existence => unknown_queue_case;
    a_listing_has_first_and_last_page_links_and_the_last_page_holds_the_tail => last_page_case;
    listings_preview_payloads_and_errors_cut_and_escaped => list_preview_case;
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
