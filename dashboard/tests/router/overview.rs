//! The overview: every queue's counts, the leader, the shared counts cache and
//! its highlighting.

use super::*;

on_every_store! {
    overview_shows_every_queue_with_its_counts_and_a_json_twin => overview_case;
    the_overview_shows_the_leader_and_its_term_without_taking_the_lease => leader_case;
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
