//! Dead items: requeue by id, discard by filter, and the preview of a filter.

use super::*;

on_every_store! {
    requeue_by_id_moves_a_dead_item_back_to_ready => requeue_case;
    discard_by_filter_without_the_typed_queue_name_is_400_and_discards_nothing => discard_case;
    the_dead_preview_counts_what_a_filter_takes_before_it_runs => preview_case;
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
