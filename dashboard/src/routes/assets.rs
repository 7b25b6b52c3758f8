//! The stylesheet and the script, compiled in: nothing is fetched at build or run time.

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::AppState;

/// The stylesheet.
pub(crate) const CSS: &str = include_str!("../assets/app.css");
/// The refresher: reloads the page's content at the picked interval while the tab is
/// visible. Everything else works without it.
pub(crate) const JS: &str = include_str!("../assets/app.js");

/// The asset route.
pub(super) fn router() -> Router<AppState> {
    Router::new().route("/assets/{name}", get(serve))
}

async fn serve(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "app.css" => ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response(),
        "app.js" => (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            JS,
        )
            .into_response(),
        _ => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
