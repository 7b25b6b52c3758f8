//! The health check.

use super::*;

on_every_store! {
    healthz_answers_ok_when_the_store_answers => healthz_case;
}

async fn healthz_case(store: &DynStore) {
    let app = app(store);
    let r = get(&app, "/healthz").await;
    assert_eq!((r.status, r.body.as_str()), (StatusCode::OK, "up\n"));
}
