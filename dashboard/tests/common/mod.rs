//! What the dashboard's tests share: stores of their own on every backend, requests
//! sent to the router without a socket, and items put in each state.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use tenure::{DynStore, Failure, ItemId, NewItem, OwnerId, QueueName, StoreExt};
use tenure_test_support::every::Place;
use tower::ServiceExt;

/// A store of a test's own on one backend (memory, a SQLite file, a PostgreSQL schema
/// or a Redis prefix, removed afterwards); it dereferences to the store.
pub struct Fixture {
    pub store: DynStore,
    place: Place,
}

impl Fixture {
    async fn at(place: Option<Place>) -> Option<Fixture> {
        let place = place?;
        Some(Fixture {
            store: tenure::open(place.url()).await.unwrap(),
            place,
        })
    }

    pub async fn memory() -> Option<Fixture> {
        Fixture::at(Place::memory().await).await
    }

    pub async fn sqlite() -> Option<Fixture> {
        Fixture::at(Place::sqlite().await).await
    }

    /// A fresh schema, or `None` (the case skips) when the server is down and stores
    /// are not required.
    pub async fn postgres() -> Option<Fixture> {
        Fixture::at(Place::postgres().await).await
    }

    /// A fresh key prefix, or `None` (the case skips) when the server is down and
    /// stores are not required.
    pub async fn redis() -> Option<Fixture> {
        Fixture::at(Place::redis().await).await
    }

    pub async fn remove(self) {
        drop(self.store);
        self.place.remove().await;
    }
}

impl std::ops::Deref for Fixture {
    type Target = DynStore;

    fn deref(&self) -> &DynStore {
        &self.store
    }
}

pub fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

pub fn me() -> OwnerId {
    OwnerId::new("worker-a").unwrap()
}

pub const LEASE: Duration = Duration::from_secs(60);

/// Enqueues `n` ready items of `queue`; their ids in enqueue order.
pub async fn ready(store: &DynStore, queue: &str, n: usize) -> Vec<ItemId> {
    let mut ids = Vec::new();
    for i in 0..n {
        let e = store
            .enqueue_one(NewItem::new(q(queue), format!("item {i}").into_bytes()))
            .await
            .unwrap();
        ids.push(e.id);
    }
    ids
}

/// Makes one item of `queue` dead with `error` (the queue must hold no other ready
/// item); its id.
pub async fn dead(store: &DynStore, queue: &str, error: &str) -> ItemId {
    let id = ready(store, queue, 1).await[0];
    let lease = store
        .claim_one(q(queue), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.token.id, id, "the queue held only this ready item");
    store
        .fail_one(Failure::permanent(lease.token, error))
        .await
        .unwrap();
    id
}

/// A response, read whole.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("JSON ({e}): {}", self.body))
    }

    pub fn location(&self) -> &str {
        self.headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

pub async fn send(app: &Router, req: Request<Body>) -> Reply {
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

pub async fn get(app: &Router, path: &str) -> Reply {
    send(app, Request::get(path).body(Body::empty()).unwrap()).await
}

/// A form POST as the dashboard's own pages send it (`Sec-Fetch-Site: same-origin`).
pub async fn post(app: &Router, path: &str, form: &str) -> Reply {
    post_from(app, path, form, Some("same-origin")).await
}

/// A form POST with this `Sec-Fetch-Site` (or none).
pub async fn post_from(app: &Router, path: &str, form: &str, site: Option<&str>) -> Reply {
    let mut req =
        Request::post(path).header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(site) = site {
        req = req.header("sec-fetch-site", site);
    }
    send(app, req.body(Body::from(form.to_owned())).unwrap()).await
}

/// The page an action redirected to (`303 See Other`), read with a GET.
pub async fn follow(app: &Router, r: &Reply) -> Reply {
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    get(app, r.location()).await
}

/// The text of the one-time notice on a page (`div#notice`, before `main`), tags
/// dropped; empty without one.
pub fn notice(page: &Reply) -> String {
    let Some(start) = page.body.find("id=\"notice\"") else {
        return String::new();
    };
    let rest = &page.body[start..];
    let rest = &rest[rest.find('>').map_or(0, |i| i + 1)..];
    let end = rest.find("<main").unwrap_or(rest.len());
    let mut text = String::new();
    let mut in_tag = false;
    for c in rest[..end].chars() {
        match c {
            '<' => {
                in_tag = true;
                text.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The overview's JSON counts of `queue`: (ready, scheduled, running, dead, paused).
pub async fn counts(app: &Router, queue: &str) -> (u64, u64, u64, u64, bool) {
    let r = get(app, "/?format=json").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let v = r.json();
    let row = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["queue"] == queue)
        .unwrap_or_else(|| panic!("queue {queue} in {v}"))
        .clone();
    (
        row["ready"].as_u64().unwrap(),
        row["scheduled"].as_u64().unwrap(),
        row["running"].as_u64().unwrap(),
        row["dead"].as_u64().unwrap(),
        row["paused"].as_bool().unwrap(),
    )
}
