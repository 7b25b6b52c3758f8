//! What every request handler shares: the request context [`Ctx`] (access, actor,
//! HTML or JSON, the one-time notice), the answers it gives (an error page or its
//! JSON, a store error, the redirect after an action), the audit trail of actions,
//! and the lookups several pages make (the shared snapshot, a queue named by a path
//! segment, the item ids of a form).

// A refusal is the response itself, returned at once by the handler: boxing it would
// only add noise.
#![allow(clippy::result_large_err)]

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Json;
use maud::Markup;
use serde_json::{json, Value};
use tenure_core::{ErrorKind, ItemId, QueueName};

use crate::access::{Access, Action};
use crate::cache::Snapshot;
use crate::notice::{Notice, Shown};
use crate::security::{same_origin, AuthUser};
use crate::text::{dashboard_path, queue_segment};
use crate::view::View;
use crate::AppState;

/// Everything a handler needs to know about the request besides its own input.
pub(crate) struct Ctx {
    access: Access,
    actor: String,
    pub(crate) json: bool,
    headers: HeaderMap,
    /// The one-time notice this page was sent with (`?notice=ID`), taken.
    notice: Option<Shown>,
}

impl FromRequestParts<AppState> for Ctx {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let cfg = &state.config;
        let access = cfg
            .authorizer
            .as_ref()
            .map_or(Access::Full, |f| f(parts))
            .capped(cfg.read_only);
        let json = wants_json(parts);
        let actor = cfg
            .actor
            .as_ref()
            .and_then(|f| f(parts))
            .or_else(|| parts.extensions.get::<AuthUser>().map(|u| u.0.clone()))
            .unwrap_or_else(|| "anonymous".to_owned());
        let notice = if parts.method == axum::http::Method::GET {
            parts.uri.query().and_then(|q| {
                q.split('&')
                    .find_map(|kv| kv.strip_prefix("notice="))
                    .map(|id| state.notices.take(id))
            })
        } else {
            None
        };
        let ctx = Ctx {
            access,
            actor,
            json,
            headers: parts.headers.clone(),
            notice,
        };
        if !ctx.access.can_view() {
            return Err(ctx.fail(
                state,
                StatusCode::FORBIDDEN,
                "forbidden",
                "You may not see this dashboard.",
            ));
        }
        Ok(ctx)
    }
}

fn wants_json(parts: &Parts) -> bool {
    let by_query = parts
        .uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "format=json"));
    let by_accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    by_query || by_accept
}

impl Ctx {
    pub(crate) fn view<'a>(&'a self, state: &'a AppState) -> View<'a> {
        View {
            cfg: &state.config,
            access: &self.access,
            notice: self.notice.as_ref(),
        }
    }

    /// An error page, or `{"error": {"kind", "message"}}`.
    pub(crate) fn fail(
        &self,
        state: &AppState,
        status: StatusCode,
        kind: &str,
        message: &str,
    ) -> Response {
        if self.json {
            return (
                status,
                Json(json!({ "error": { "kind": kind, "message": message } })),
            )
                .into_response();
        }
        let title = status.canonical_reason().unwrap_or("Error");
        let page = self.view(state).message(
            &format!("{} {title}", status.as_u16()),
            message,
            Some(("Overview", state.config.link("/"))),
        );
        (status, Html(page.into_string())).into_response()
    }

    /// A store error as a response: bad input 400, unavailable 503, not found 404, the
    /// rest 500. The text of an unavailable or internal error (a file path, a host, a
    /// driver's message) goes to the log, not to the page.
    pub(crate) fn store_error(&self, state: &AppState, e: &tenure_core::Error) -> Response {
        let (status, kind) = match e.kind() {
            ErrorKind::InvalidInput => (StatusCode::BAD_REQUEST, "invalid_input"),
            ErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            ErrorKind::Conflict => (StatusCode::CONFLICT, "conflict"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        match kind {
            "unavailable" | "internal" => {
                tracing::warn!(error = %e, kind, "dashboard: the store failed a request");
                let text = if kind == "unavailable" {
                    "The store does not answer; the dashboard's log says why."
                } else {
                    "The store failed this request; the dashboard's log says why."
                };
                self.fail(state, status, kind, text)
            }
            _ => self.fail(state, status, kind, &e.to_string()),
        }
    }

    pub(crate) fn html_or_json(
        &self,
        markup: impl FnOnce() -> Markup,
        value: impl FnOnce() -> Value,
    ) -> Response {
        if self.json {
            Json(value()).into_response()
        } else {
            Html(markup().into_string()).into_response()
        }
    }

    /// Refuses an action unless it is same-origin and allowed; answers the refusal.
    pub(crate) fn guard(&self, state: &AppState, action: Action) -> Result<(), Response> {
        if !same_origin(&self.headers, &state.config.hosts) {
            audit(self, action, "refused_cross_site", None, 0);
            return Err(self.fail(
                state,
                StatusCode::FORBIDDEN,
                "cross_site",
                "Actions are accepted only from the dashboard's own pages (same origin).",
            ));
        }
        if !self.access.allows(action) {
            audit(self, action, "refused_forbidden", None, 0);
            let why = if state.config.read_only {
                "This dashboard is read-only."
            } else {
                "You may not do this here."
            };
            return Err(self.fail(state, StatusCode::FORBIDDEN, "forbidden", why));
        }
        Ok(())
    }
}

/// One audit event and one counter per action (refusals included), naming the actor.
pub(crate) fn audit(
    ctx: &Ctx,
    action: Action,
    outcome: &'static str,
    subject: Option<&str>,
    count: u64,
) {
    tracing::info!(
        target: "tenure_dashboard::audit",
        actor = %ctx.actor,
        action = action.as_str(),
        outcome,
        subject = subject.unwrap_or(""),
        count,
        "dashboard action"
    );
    metrics::counter!(
        "tenure_dashboard_actions_total",
        "action" => action.as_str(),
        "actor" => ctx.actor.clone(),
        "outcome" => outcome,
    )
    .increment(1);
}

pub(crate) async fn snapshot(state: &AppState) -> tenure_core::Result<std::sync::Arc<Snapshot>> {
    let now = state.config.clock.now();
    state
        .cache
        .get(&*state.store, &state.config.leader_name, now)
        .await
}

/// The queue a path segment names (see [`segment`](crate::text::segment)), checked for validity only.
pub(crate) fn parse_queue(ctx: &Ctx, state: &AppState, raw: &str) -> Result<QueueName, Response> {
    QueueName::new(queue_segment(raw)).map_err(|e| ctx.store_error(state, &e))
}

/// The queue a path segment names, when the store knows it ([`Store::queue_list`]
/// names it); 404 with a way back otherwise. `fresh` skips the shared snapshot (for
/// actions: nothing may pause a queue into existence).
///
/// [`Store::queue_list`]: tenure_core::Store::queue_list
pub(crate) async fn known_queue(
    ctx: &Ctx,
    state: &AppState,
    raw: &str,
    fresh: bool,
) -> Result<QueueName, Response> {
    let queue = parse_queue(ctx, state, raw)?;
    if !fresh {
        if let Ok(snap) = snapshot(state).await {
            if snap.counts(&queue).is_some() {
                return Ok(queue);
            }
        }
    }
    match state.store.queue_list().await {
        Ok(names) if names.contains(&queue) => Ok(queue),
        Ok(_) => Err(ctx.fail(
            state,
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("No queue {queue}: the store has no item in it and it is not paused."),
        )),
        Err(e) => Err(ctx.store_error(state, &e)),
    }
}

/// The answer to an action that ran: `303 See Other` to `back` with the one-time
/// `notice` (POST-redirect-GET: a reload of the page after it repeats nothing).
pub(crate) fn done(state: &AppState, back: &str, notice: Notice) -> Response {
    let id = state.notices.put(notice);
    let sep = if back.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{back}{sep}notice={id}")).into_response()
}

/// True when an action's form says it was confirmed (`confirm=yes`).
pub(crate) fn confirmed(fields: &[(String, String)]) -> bool {
    fields.iter().any(|(k, v)| k == "confirm" && v == "yes")
}

/// Where to go after an action: the `back` field when it is a path of this dashboard.
/// Anything else (another site, a tab or newline, a step out of the base path) is
/// ignored for `fallback`.
pub(crate) fn back_to(state: &AppState, fields: &[(String, String)], fallback: &str) -> String {
    let base = &state.config.base_path;
    fields
        .iter()
        .find(|(k, _)| k == "back")
        .map(|(_, v)| v.clone())
        .filter(|v| dashboard_path(v, base))
        .unwrap_or_else(|| state.config.link(fallback))
}

/// The `id` fields of a form, parsed; 400 naming the first bad one.
pub(crate) fn ids_of(
    ctx: &Ctx,
    state: &AppState,
    fields: &[(String, String)],
) -> Result<Vec<ItemId>, Response> {
    let mut ids = Vec::new();
    for (k, v) in fields {
        if k == "id" {
            match v.trim().parse::<ItemId>() {
                Ok(id) if !ids.contains(&id) => ids.push(id),
                Ok(_) => {}
                Err(_) => {
                    return Err(ctx.fail(
                        state,
                        StatusCode::BAD_REQUEST,
                        "invalid_input",
                        &format!("id: {:?} is not an item id", crate::text::clip(v, 80)),
                    ))
                }
            }
        }
    }
    if ids.is_empty() {
        return Err(ctx.fail(
            state,
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "id: select at least one item",
        ));
    }
    let max = state.store.limits().max_batch.max(1);
    if ids.len() > max {
        return Err(ctx.fail(
            state,
            StatusCode::BAD_REQUEST,
            "invalid_input",
            &format!("id: at most {max} items at once"),
        ));
    }
    Ok(ids)
}

/// The page that asks before a destructive action by id runs: the same form again
/// with `confirm=yes` (JSON: 400 `unconfirmed`). Nothing has run.
pub(crate) fn ask_first(
    ctx: &Ctx,
    state: &AppState,
    action: Action,
    ids: &[ItemId],
    back: &str,
) -> Response {
    if ctx.json {
        return ctx.fail(
            state,
            StatusCode::BAD_REQUEST,
            "unconfirmed",
            &format!("confirm: send confirm=yes to {action} these items"),
        );
    }
    Html(ctx.view(state).confirm(action, ids, back).into_string()).into_response()
}

/// Any path no page answers: 404, as a page or JSON.
pub(crate) async fn not_found(State(state): State<AppState>, ctx: Ctx) -> Response {
    ctx.fail(&state, StatusCode::NOT_FOUND, "not_found", "No such page.")
}
