//! Searching a queue's items by a piece of their payload or last error: bounded by a
//! limit (the page says what it did not read and goes on from there), hostile text
//! shown escaped, and payloads searched only where listings show them.

use super::*;

on_every_store! {
    Fixture in [memory, sqlite, postgres, redis] {
        search_finds_items_by_error_or_payload_and_goes_on_where_it_stopped => search_case;
        hostile_search_text_is_escaped_and_bad_bounds_are_refused => hostile_case;
        select_all_checks_every_item_of_the_page_and_the_bulk_cancel_takes_them => select_all_case;
    }
}

async fn search_case(store: &DynStore) {
    let refused = dead(store, "mail", "SMTP refused: 550 mailbox full").await;
    dead(store, "mail", "timeout").await;
    let third = dead(store, "mail", "smtp refused again").await;
    for p in ["alpha", "needle in the payload", "beta"] {
        store
            .enqueue_one(NewItem::new(q("mail"), p.as_bytes().to_vec()))
            .await
            .unwrap();
    }
    let app = app(store);
    let v = get(
        &app,
        "/queues/mail/search?q=smtp+REFUSED&state=dead&format=json",
    )
    .await
    .json();
    let ids: Vec<&str> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![refused.to_string(), third.to_string()], "{v}");
    assert_eq!(v["scanned"], 3);
    assert_eq!(v["complete"], true);
    assert_eq!(v["stopped_by"], "end");

    // A limit of one: the page says it stopped, and the rest goes on after the match.
    let v = get(
        &app,
        "/queues/mail/search?q=refused&state=dead&limit=1&format=json",
    )
    .await
    .json();
    assert_eq!(v["matches"].as_array().unwrap().len(), 1);
    assert_eq!(v["stopped_by"], "limit");
    let next = v["next"].as_str().unwrap().to_owned();
    let page = get(&app, "/queues/mail/search?q=refused&state=dead&limit=1").await;
    assert!(page.body.contains("id=\"search-more\""), "{}", page.body);
    assert!(page.body.contains("were not read"), "{}", page.body);
    let rest = get(
        &app,
        &format!(
            "/queues/mail/search?q=refused&state=dead&limit=1&format=json&after={}",
            urlencode(&next)
        ),
    )
    .await
    .json();
    assert_eq!(rest["matches"][0]["id"], third.to_string(), "{rest}");

    let v = get(&app, "/queues/mail/search?q=needle&state=ready&format=json")
        .await
        .json();
    assert_eq!(v["matches"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["matches"][0]["payload_preview"], "needle in the payload");

    // Where listings do not show payloads, a search does not read them either.
    let private = router(store.clone(), DashboardConfig::new().list_payloads(false));
    let v = get(
        &private,
        "/queues/mail/search?q=needle&state=ready&format=json",
    )
    .await
    .json();
    assert_eq!(v["matches"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["searches_payloads"], false);

    // The queue page offers the search.
    let page = get(&app, "/queues/mail?state=dead").await;
    assert!(page.body.contains("id=\"search\""));
}

async fn hostile_case(store: &DynStore) {
    dead(store, "mail", "<script>alert(1)</script>").await;
    let app = app(store);
    let page = get(
        &app,
        "/queues/mail/search?q=%3Cscript%3Ealert(1)&state=dead",
    )
    .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.body.contains("<script>alert"), "{}", page.body);
    assert!(
        page.body.contains("&lt;script&gt;alert(1)"),
        "{}",
        page.body
    );
    assert!(page.body.contains("1 match in 1"), "{}", page.body);
    let long = "x".repeat(201);
    let r = get(&app, &format!("/queues/mail/search?q={long}")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    for bad in [
        "limit=0",
        "limit=501",
        "limit=abc",
        "state=gone",
        "after=%0A",
    ] {
        let r = get(&app, &format!("/queues/mail/search?q=a&{bad}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {}", r.body);
    }
    let r = get(&app, "/queues/nope/search?q=a").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn select_all_case(store: &DynStore) {
    let ids = ready(store, "bulk", 3).await;
    let app = app(store);
    let page = get(&app, "/queues/bulk?state=ready").await;
    assert!(page.body.contains("id=\"select-all\""), "{}", page.body);
    assert!(!page.body.contains("checked"));
    let page = get(&app, "/queues/bulk?state=ready&select=all").await;
    assert_eq!(page.body.matches("checked").count(), 3, "{}", page.body);
    assert!(page.body.contains("id=\"select-none\""));
    // The form posts every id; the cancel asks first, then runs once.
    let form: String = ids.iter().map(|id| format!("id={id}&")).collect::<String>()
        + "confirm=yes&back=/queues/bulk";
    let r = post(&app, "/items/cancel", &form).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    for id in ids {
        assert!(store.item_get(id).await.unwrap().is_none());
    }
}
