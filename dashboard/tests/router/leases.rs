//! The live leases, and a lease past its expiry that nobody recovered.

use super::*;

on_every_store! {
    leases_are_listed_soonest_expiry_first => leases_case;
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
