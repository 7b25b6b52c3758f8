//! The dashboard's routes, one module per page family, each holding its route(s),
//! handler(s), JSON twin and view (shared pieces: `ctx.rs` for the request, `view.rs`
//! for the page frame). [`guarded`] is every route behind the dashboard's guards;
//! [`open`] the ones outside them.

use axum::Router;

use crate::AppState;

mod assets;
mod dead;
mod health;
pub(crate) mod history;
mod items;
mod leases;
mod limits;
mod overview;
mod queues;
mod search;

/// Every page, action and asset, behind the guards the caller layers on; a path
/// no route answers is a 404 page.
pub(crate) fn guarded() -> Router<AppState> {
    Router::new()
        .merge(overview::router())
        .merge(queues::router())
        .merge(dead::router())
        .merge(items::router())
        .merge(leases::router())
        .merge(limits::router())
        .merge(history::router())
        .merge(search::router())
        .merge(assets::router())
        .fallback(crate::ctx::not_found)
}

/// The routes outside the guards: the health check.
pub(crate) fn open() -> Router<AppState> {
    health::router()
}
