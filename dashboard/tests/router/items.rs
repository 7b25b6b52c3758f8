//! One item's page, finding an item by id, and cancelling by id.

use super::*;

on_every_store! {
    Fixture in [memory, sqlite, postgres, redis] {
        cancel_answers_an_outcome_per_id => cancel_case;
        the_item_page_hides_the_payload_unless_asked_and_escapes_it => item_case;
        find_by_id_redirects_to_the_item_or_answers_404_or_400 => find_case;
        a_running_item_shows_its_progress_and_is_stopped_after_a_confirmation => stop_case;
    }
}

async fn stop_case(store: &DynStore) {
    let id = ready(store, "emails", 1).await[0];
    let lease = store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    let progress = tenure::Progress::new(0.3, "rows 30 of 100").unwrap();
    store
        .renew(
            tenure::RenewParams::new(vec![lease.token], LEASE).with_progress(vec![Some(progress)]),
        )
        .await
        .unwrap();
    let app = app(store);
    let page = get(&app, &format!("/items/{id}")).await;
    assert!(
        page.body
            .contains(r#"<progress value="0.3" max="1">30%</progress> 30% rows 30 of 100"#),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("Stop this running item"),
        "{}",
        page.body
    );
    let v = get(&app, &format!("/items/{id}?format=json")).await.json();
    assert_eq!(v["progress"]["fraction"], 0.3);
    assert_eq!(v["progress"]["message"], "rows 30 of 100");

    // Unconfirmed: a page asking first, nothing changed.
    let back = format!("%2Fitems%2F{id}");
    let ask = post(
        &app,
        "/items/cancel",
        &format!("id={id}&running=yes&back={back}"),
    )
    .await;
    assert_eq!(ask.status, StatusCode::OK);
    assert!(ask.body.contains("Stop running items?"), "{}", ask.body);
    assert!(ask.body.contains(r#"name="running" value="yes""#));
    assert_eq!(
        store.item_get(id).await.unwrap().unwrap().state,
        tenure::ItemState::Running
    );

    // Confirmed: redirected to a GET showing the outcome; the item is dead and its
    // holder's finish is refused.
    let done = post(
        &app,
        "/items/cancel",
        &format!("id={id}&running=yes&back={back}&confirm=yes"),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    let r = follow(&app, &done).await;
    let text = notice(&r);
    assert!(
        text.contains("stopped: lease of attempt 1 (owner worker-a) revoked"),
        "{text}"
    );
    let item = store.item_get(id).await.unwrap().unwrap();
    assert_eq!(item.state, tenure::ItemState::Dead);
    assert_eq!(tenure::machine::cancelled_by(&item), Some("dashboard"));
    assert_eq!(
        store
            .complete(tenure::CompleteParams::new(vec![lease.token]))
            .await
            .unwrap(),
        vec![tenure::TokenOutcome::LeaseLost]
    );
    let page = get(&app, &format!("/items/{id}")).await;
    assert!(
        page.body
            .contains("Cancelled while running by <strong>dashboard</strong>"),
        "{}",
        page.body
    );
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
