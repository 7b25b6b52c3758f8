//! `/healthz`: whether the store answers, and nothing else.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::AppState;

/// The health route, outside every guard but the allowed hosts.
pub(super) fn router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz))
}

/// `200 up` when the store answers, `503 down` when it does not: nothing else, so
/// nobody learns a file, host or error text from it (the error goes to the log).
async fn healthz(State(state): State<AppState>) -> Response {
    match state.store.queue_list().await {
        Ok(_) => (StatusCode::OK, "up\n").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "dashboard health check: the store does not answer");
            (StatusCode::SERVICE_UNAVAILABLE, "down\n").into_response()
        }
    }
}
