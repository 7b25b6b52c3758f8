//! Work over time: the charts on the overview and the queue page, the history pages
//! and their JSON twins, read from the store, so a new dashboard shows the same.

use tenure::{history_minute, HistoryAddParams, HistoryCounts, HistoryEntry, SystemClock};

use super::*;

on_every_store! {
    Fixture in [memory, sqlite, postgres, redis] {
        history_is_charted_from_the_store_and_a_new_dashboard_shows_the_same => history_case;
        a_bad_span_or_unknown_queue_is_refused_and_nothing_is_echoed => hostile_case;
    }
}

async fn seed(store: &DynStore) {
    ready(store, "mail", 1).await;
    ready(store, "thumbs", 1).await;
    let now = history_minute(SystemClock.now());
    let entries = vec![
        HistoryEntry::new(q("mail"), now, HistoryCounts::new(5, 2, 1)),
        HistoryEntry::new(
            q("mail"),
            now - Duration::from_secs(30 * 60),
            HistoryCounts::new(3, 0, 0),
        ),
        // Three hours ago: in the day, not in the hour.
        HistoryEntry::new(
            q("mail"),
            now - Duration::from_secs(3 * 3600),
            HistoryCounts::new(100, 0, 0),
        ),
        HistoryEntry::new(q("thumbs"), now, HistoryCounts::new(4, 0, 0)),
    ];
    store
        .history_add(HistoryAddParams::new(entries))
        .await
        .unwrap();
}

fn total(v: &serde_json::Value) -> (u64, u64, u64) {
    (
        v["total"]["finished"].as_u64().unwrap(),
        v["total"]["failed"].as_u64().unwrap(),
        v["total"]["dead"].as_u64().unwrap(),
    )
}

async fn history_case(store: &DynStore) {
    seed(store).await;
    // Two dashboards, one after the other: the second (a restart, or another
    // process) reads the same history from the store.
    for _ in 0..2 {
        let app = app(store);
        let page = get(&app, "/").await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(page.body.contains("<svg"), "{}", page.body);
        assert!(page.body.contains(r#"<rect class="finished""#));
        assert!(page.body.contains(r#"<rect class="dead""#));
        let v = get(&app, "/?format=json").await.json();
        assert_eq!(v["history"]["span"], "hour");
        assert_eq!(total(&v["history"]), (12, 2, 1), "{}", v["history"]);
        assert_eq!(v["history"]["buckets"].as_array().unwrap().len(), 60);

        let v = get(&app, "/queues/mail?format=json").await.json();
        assert_eq!(total(&v["history"]), (8, 2, 1));
        let page = get(&app, "/queues/mail").await;
        assert!(page.body.contains("<svg") && page.body.contains("Work over time"));

        let v = get(&app, "/queues/mail/history?span=day&format=json")
            .await
            .json();
        assert_eq!(v["history"]["span"], "day");
        assert_eq!(v["history"]["bucket_minutes"], 15);
        assert_eq!(total(&v["history"]), (108, 2, 1));

        let v = get(&app, "/history?format=json").await.json();
        assert_eq!(total(&v["all"]), (12, 2, 1));
        let queues = v["queues"].as_array().unwrap();
        assert_eq!(queues.len(), 2, "{v}");
        assert_eq!(queues[1]["queue"], "thumbs");
        assert_eq!(queues[1]["total"]["finished"], 4);
        let page = get(&app, "/history?span=day").await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(page.body.contains("id=\"history-queues\""));
        // Reloads read the shared cache and change nothing.
        let again = get(&app, "/history?span=day&format=json").await.json();
        assert_eq!(total(&again["all"]), (112, 2, 1));
    }
}

async fn hostile_case(store: &DynStore) {
    seed(store).await;
    let app = app(store);
    let bad = get(&app, "/history?span=%3Cscript%3Ealert(1)%3C/script%3E").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(!bad.body.contains("<script>alert"), "{}", bad.body);
    let bad = get(&app, "/queues/mail/history?span=week&format=json").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let none = get(&app, "/queues/nope/history").await;
    assert_eq!(none.status, StatusCode::NOT_FOUND);
    let none = get(&app, "/queues/%3Cb%3E/history").await;
    assert!(none.status.is_client_error(), "{}", none.status);
    assert!(!none.body.contains("<b>"), "{}", none.body);
}
