//! A queue's limits: the section of the queue page and `/queues/{queue}/limits`, their
//! JSON twins, the keys at their limit and the leases under each, hostile and long
//! keys, a queue without limits and one with limits alone.

use tenure::{ClaimParams, ItemId, LimitKey, LimitsParams, QueueLimits, Rate};

use super::*;

on_every_store! {
    Fixture in [memory, sqlite, postgres, redis] {
        the_queue_page_shows_its_limits_the_keys_at_their_limit_and_what_runs_under_each => usage_case;
        hostile_keys_are_escaped_and_long_ones_cut_with_the_whole_key_on_hover => hostile_case;
        a_queue_without_limits_says_so_and_one_with_limits_alone_has_a_limits_page => no_limits_case;
    }
}

fn key(s: &str) -> LimitKey {
    LimitKey::new(s).unwrap()
}

/// Enqueues `n` items of `queue` under limit key `k`; their ids.
async fn keyed(store: &DynStore, queue: &str, k: &str, n: usize) -> Vec<ItemId> {
    let mut ids = Vec::new();
    for i in 0..n {
        let item = NewItem::new(q(queue), format!("{k} {i}").into_bytes()).limit_key(key(k));
        ids.push(store.enqueue_one(item).await.unwrap().id);
    }
    ids
}

async fn set(store: &DynStore, queue: &str, limits: QueueLimits) {
    store
        .limits_set(LimitsParams::new(q(queue), limits))
        .await
        .unwrap();
}

/// Claims up to `n` items of `queue`; the claimed ids.
async fn claim(store: &DynStore, queue: &str, n: u32) -> Vec<ItemId> {
    store
        .claim(ClaimParams::new(q(queue), me(), n, LEASE))
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.token.id)
        .collect()
}

fn ids(v: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_owned())
        .collect();
    out.sort();
    out
}

fn strings(ids: &[ItemId]) -> Vec<String> {
    let mut out: Vec<String> = ids.iter().map(ToString::to_string).collect();
    out.sort();
    out
}

async fn usage_case(store: &DynStore) {
    set(
        store,
        "mail",
        QueueLimits::new()
            .concurrency(10)
            .per_key(2)
            .key_override(key("big"), 3)
            .key_rate(Rate::new(100, Duration::from_secs(60))),
    )
    .await;
    let a = keyed(store, "mail", "acme", 3).await;
    let big = keyed(store, "mail", "big", 1).await;
    let free = ready(store, "mail", 1).await;
    let claimed = claim(store, "mail", 10).await;
    assert_eq!(
        claimed.len(),
        4,
        "two of acme (its limit), big's one, the unkeyed one"
    );
    let app = app(store);

    let v = get(&app, "/queues/mail?format=json").await.json();
    let l = &v["limits"];
    assert_eq!(l["supported"], true);
    assert_eq!(l["limits"]["concurrency"], 10);
    assert_eq!(l["limits"]["key_concurrency"], 2);
    assert_eq!(l["limits"]["key_overrides"]["big"], 3);
    assert_eq!(l["limits"]["key_rate"]["starts"], 100);
    assert_eq!(l["limits"]["key_rate"]["per_s"], 60.0);
    assert_eq!(l["running"], 4);
    assert_eq!(l["unkeyed_running"], 1);
    assert_eq!(l["queue_at_limit"], false);
    assert_eq!(l["keys_running"], 2);
    assert_eq!(l["keys_at_limit"], 1);
    let first = &l["keys"][0];
    assert_eq!(first["key"], "acme", "a key at its limit comes first");
    assert_eq!(first["at_limit"], true);
    assert_eq!(
        (first["running"].clone(), first["limit"].clone()),
        (2.into(), 2.into())
    );
    let running_a: Vec<ItemId> = claimed.iter().copied().filter(|i| a.contains(i)).collect();
    assert_eq!(
        ids(&first["leases"]),
        strings(&running_a),
        "what runs under acme"
    );
    assert_eq!(first["leases"][0]["owner"], "worker-a");
    let second = &l["keys"][1];
    assert_eq!(second["key"], "big");
    assert_eq!(
        second["at_limit"], false,
        "1 running under an override of 3"
    );
    assert_eq!(ids(&second["leases"]), strings(&big));
    assert!(!claimed.is_empty() && claimed.contains(&free[0]));

    let page = get(&app, "/queues/mail").await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    let section = &body[body.find("id=\"limits\"").expect("a limits section")..];
    assert!(section.contains("at its limit"), "{section}");
    let row = &section[section.find("data-key=\"acme\"").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        section.contains("class=\"at-limit\" data-key=\"acme\""),
        "the key's row marked at its limit"
    );
    for id in &running_a {
        assert!(
            row.contains(&format!("/items/{id}")),
            "a link to {id} under acme: {row}"
        );
    }
    assert!(
        section.contains("href=\"/queues/mail/limits\""),
        "a link to every key"
    );

    // The limits page and its JSON twin: every key, every lease.
    let full = get(&app, "/queues/mail/limits").await;
    assert_eq!(full.status, StatusCode::OK);
    assert!(full.body.contains("Limits of queue <code>mail</code>"));
    assert!(full.body.contains("data-key=\"big\""));
    let v = get(&app, "/queues/mail/limits?format=json").await.json();
    assert_eq!(v["queue"], "mail");
    assert_eq!(v["keys_at_limit"], 1);
    assert_eq!(v["partial"], false);

    // A slot given back shows on the next read (a fresh dashboard: no shared page).
    let lease = store
        .lease_list(tenure::LeaseListParams::new(q("mail")))
        .await
        .unwrap()
        .leases
        .into_iter()
        .find(|l| l.token.id == running_a[0])
        .unwrap();
    store.complete_one(lease.token).await.unwrap();
    let app = super::app(store);
    let v = get(&app, "/queues/mail/limits?format=json").await.json();
    assert_eq!(v["keys_at_limit"], 0, "acme runs 1 of 2: {v}");

    // Read-only: nothing changes limits here.
    let r = post(&app, "/queues/mail/limits", "").await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
}

async fn hostile_case(store: &DynStore) {
    let nasty = "<script>alert(\"x\")</script> & 'y'";
    let long = "k".repeat(200) + "-end";
    set(
        store,
        "hostile",
        QueueLimits::new().per_key(1).key_override(key(nasty), 1),
    )
    .await;
    keyed(store, "hostile", nasty, 2).await;
    keyed(store, "hostile", &long, 1).await;
    assert_eq!(claim(store, "hostile", 10).await.len(), 2);
    let app = app(store);
    for path in ["/queues/hostile", "/queues/hostile/limits"] {
        let page = get(&app, path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(
            !page.body.contains("<script>alert"),
            "{path}: the key is escaped"
        );
        assert!(
            page.body
                .contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; 'y'"),
            "{path}: the key shown as text"
        );
        // The long key: cut in its cell, whole on hover.
        let title = format!("title=\"{long}\"");
        assert!(page.body.contains(&title), "{path}: the whole key on hover");
        let cut = format!(">{}…<", &long[..47]);
        assert!(page.body.contains(&cut), "{path}: the cell is cut");
        assert!(
            !page.body.contains(&format!(">{long}<")),
            "{path}: the whole key is not in the cell"
        );
    }
    let v = get(&app, "/queues/hostile/limits?format=json").await.json();
    let keys: Vec<&str> = v["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        vec![nasty, long.as_str()],
        "exact keys, at their limit first"
    );
    assert_eq!(v["limits"]["key_overrides"][nasty], 1);
}

async fn no_limits_case(store: &DynStore) {
    ready(store, "plain", 1).await;
    keyed(store, "plain", "t", 1).await;
    assert_eq!(
        claim(store, "plain", 10).await.len(),
        2,
        "nothing limits them"
    );
    let app = app(store);
    let v = get(&app, "/queues/plain?format=json").await.json();
    assert_eq!(v["limits"]["supported"], true);
    assert!(v["limits"]["limits"].is_null());
    assert_eq!(v["limits"]["keys"][0]["key"], "t");
    assert!(v["limits"]["keys"][0]["limit"].is_null());
    assert_eq!(v["limits"]["keys_at_limit"], 0);
    let page = get(&app, "/queues/plain").await;
    assert!(page.body.contains("No limits"), "{}", page.body);

    // A queue with limits and no items has a limits page; an unknown queue has none.
    set(store, "only-limits", QueueLimits::new().concurrency(3)).await;
    let page = get(&app, "/queues/only-limits/limits").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("id=\"limit-settings\""));
    let r = get(&app, "/queues/nope/limits").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = get(&app, "/queues/nope/limits?format=json").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}
