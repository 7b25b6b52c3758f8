//! One item (`/items/{id}`), finding an item by id (`/find`) and cancelling items by
//! id (`/items/cancel`); the JSON of an item and the view.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Value};
use tenure_core::{CancelOutcome, CancelParams, Item, ItemId, ListState, Timestamp};

use crate::access::Action;
use crate::ctx::{ask_first, audit, back_to, confirmed, done, ids_of, Ctx};
use crate::notice::Notice;
use crate::text::{iso, preview, relative};
use crate::view::{expiry, items, View};
use crate::AppState;

/// Who a running item stopped from the dashboard names as its canceller.
const STOPPED_BY: &str = "dashboard";

/// The routes of this family.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/items/cancel", post(cancel))
        .route("/items/{id}", get(item))
        .route("/find", get(find))
}

#[derive(Debug, Default, Deserialize)]
struct ItemQuery {
    payload: Option<String>,
}

async fn item(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Query(q): Query<ItemQuery>,
) -> Response {
    let id = match raw.parse::<ItemId>() {
        Ok(id) => id,
        Err(e) => return ctx.store_error(&state, &e),
    };
    let item = match state.store.item_get(id).await {
        Ok(Some(item)) => item,
        Ok(None) => {
            return ctx.fail(
                &state,
                StatusCode::NOT_FOUND,
                "not_found",
                &format!(
                    "No item {id}: never enqueued, cancelled, discarded, or finished and purged."
                ),
            )
        }
        Err(e) => return ctx.store_error(&state, &e),
    };
    let show = q.payload.as_deref() == Some("show");
    let now = state.config.clock.now();
    ctx.html_or_json(
        || ctx.view(&state).item(&item, now, show),
        || {
            let mut v = item_json(
                &item,
                show.then(|| crate::text::preview(&item.payload, state.config.preview_bytes)),
            );
            v["listing"] = json!(list_state(&item, now));
            v
        },
    )
}

#[derive(Debug, Default, Deserialize)]
struct FindQuery {
    id: Option<String>,
}

async fn find(State(state): State<AppState>, ctx: Ctx, Query(q): Query<FindQuery>) -> Response {
    let raw = q.id.unwrap_or_default();
    let id = match raw.trim().parse::<ItemId>() {
        Ok(id) => id,
        Err(_) => {
            return ctx.fail(
                &state,
                StatusCode::BAD_REQUEST,
                "invalid_input",
                &format!(
                    "id: {:?} is not an item id (a UUID)",
                    crate::text::clip(&raw, 80)
                ),
            )
        }
    };
    match state.store.item_get(id).await {
        Ok(Some(item)) => {
            if ctx.json {
                Json(item_json(&item, None)).into_response()
            } else {
                Redirect::to(&state.config.link(&format!("/items/{id}"))).into_response()
            }
        }
        Ok(None) => ctx.fail(
            &state,
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("No item {id}."),
        ),
        Err(e) => ctx.store_error(&state, &e),
    }
}

async fn cancel(
    State(state): State<AppState>,
    ctx: Ctx,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    if let Err(r) = ctx.guard(&state, Action::Cancel) {
        return r;
    }
    let ids = match ids_of(&ctx, &state, &fields) {
        Ok(ids) => ids,
        Err(r) => return r,
    };
    // `running=yes` stops running items too (their lease is revoked; they go dead).
    let stop = fields.iter().any(|(k, v)| k == "running" && v == "yes");
    if !confirmed(&fields) {
        if stop && !ctx.json {
            let back = back_to(&state, &fields, "/");
            return axum::response::Html(ctx.view(&state).confirm_stop(&ids, &back).into_string())
                .into_response();
        }
        return ask_first(
            &ctx,
            &state,
            Action::Cancel,
            &ids,
            &back_to(&state, &fields, "/"),
        );
    }
    let mut params = CancelParams::new(ids.clone());
    if stop {
        params = params.stop_running(STOPPED_BY);
    }
    let res = state.store.item_cancel(params).await;
    state.cache.invalidate().await;
    let outcomes = match res {
        Ok(o) => o,
        Err(e) => {
            audit(&ctx, Action::Cancel, "failed", None, 0);
            return ctx.store_error(&state, &e);
        }
    };
    let rows: Vec<(String, tenure_core::CancelOutcome)> =
        ids.iter().map(ToString::to_string).zip(outcomes).collect();
    let n = rows
        .iter()
        .filter(|(_, o)| o.is_cancelled() || o.is_stopped())
        .count() as u64;
    let subject = rows
        .iter()
        .map(|(id, _)| id.as_str())
        .collect::<Vec<_>>()
        .join(",");
    audit(&ctx, Action::Cancel, "done", Some(&subject), n);
    let back = back_to(&state, &fields, "/");
    if !ctx.json {
        return done(
            &state,
            &back,
            Notice {
                title: "Cancelled".to_owned(),
                text: format!("Cancelled {n} of {}.", items(rows.len() as u64)),
                rows: rows
                    .iter()
                    .map(|(id, o)| (id.clone(), cancel_text(o)))
                    .collect(),
            },
        );
    }
    Json(json!({
        "cancelled": n,
        "results": rows.iter().map(|(id, o)| {
            let mut d = json!({ "id": id, "outcome": cancel_name(o) });
            if let tenure_core::CancelOutcome::Running { attempt, owner }
            | tenure_core::CancelOutcome::Stopped { attempt, owner } = o
            {
                d["attempt"] = json!(attempt);
                d["owner"] = json!(owner.as_str());
            }
            d
        }).collect::<Vec<_>>(),
    }))
    .into_response()
}

impl View<'_> {
    fn item(&self, item: &Item, now: Timestamp, show_payload: bool) -> Markup {
        let state = list_state(item, now);
        let here = self.item_link(item.id);
        let back = here.clone();
        let body = html! {
            h1 { "Item " code { (item.id) } }
            p.meta.wrap { "Queue " a href=(self.queue_link(&item.queue)) { (item.queue) } " · state " strong #state { (state) } }
            table.fields {
                tbody {
                    tr { th { "Attempt" } td { (item.attempt) " of " (item.max_attempts) } }
                    tr { th { "Stalls" } td { (item.stalls) " of " (item.max_stalls) } }
                    tr { th { "Renewals" } td { (item.renewals) " of " (item.max_renewals) " in this attempt" } }
                    tr { th { "Owner" } td { @if let Some(o) = &item.owner { (o) } @else { "-" } } }
                    tr { th { "Lease ends" } td { @if let Some(t) = item.lease_expires_at { (expiry(t, now)) " (" (iso(t)) ")" } @else { "-" } } }
                    tr { th { "Run at" } td { (relative(item.run_at, now)) " (" (iso(item.run_at)) ")" } }
                    tr { th { "Priority" } td { (item.priority) } }
                    tr { th { "Stream" } td { @if let Some(k) = &item.stream { code { (k.as_str()) } } @else { "-" } } }
                    tr { th { "Scope" } td { @if let Some(k) = &item.scope { code { (k.as_str()) } } @else { "-" } } }
                    tr { th { "Dedup key" } td { @if let Some(k) = &item.dedup_key { code { (k.as_str()) } } @else { "-" } } }
                    tr { th { "Enqueued" } td { (relative(item.created_at, now)) " (" (iso(item.created_at)) ")" } }
                    tr { th { "Updated" } td { (relative(item.updated_at, now)) " (" (iso(item.updated_at)) ")" } }
                    tr { th { "Last error" } td { @if let Some(e) = &item.last_error { pre.error { (e) } } @else { "-" } } }
                }
            }
            h2 { "Payload" }
            @if show_payload {
                @let (text, cut) = preview(&item.payload, self.cfg.preview_bytes);
                pre #payload { (text) }
                @if cut { p.meta { "First " (self.cfg.preview_bytes) " of " (item.payload.len()) " bytes." } }
                p { a href=(here) { "Hide payload" } }
            } @else {
                p { a #show-payload href=(format!("{here}?payload=show")) { "Show payload (" (item.payload.len()) " bytes)" } }
            }
            @if state == "ready" || state == "scheduled" {
                @if self.can(Action::Cancel) {
                    form method="post" action=(self.link("/items/cancel")) {
                        input type="hidden" name="id" value=(item.id);
                        // A cancelled item is gone: its queue is where to go after.
                        input type="hidden" name="back" value=(self.queue_link(&item.queue));
                        button.danger type="submit" { "Cancel this item…" }
                    }
                }
            }
            @if state == "running" {
                @if let Some(p) = item.progress.as_ref().filter(|p| p.attempt() == item.attempt) {
                    h2 { "Progress" }
                    p #progress {
                        progress value=(p.fraction()) max="1" { (p.percent()) "%" }
                        " " (p.to_string())
                    }
                }
                @if self.can(Action::Cancel) {
                    form method="post" action=(self.link("/items/cancel")) {
                        input type="hidden" name="id" value=(item.id);
                        input type="hidden" name="running" value="yes";
                        input type="hidden" name="back" value=(back);
                        button.danger type="submit" { "Stop this running item…" }
                    }
                }
            }
            @if let Some(by) = tenure_core::machine::cancelled_by(item) {
                p.meta #cancelled { "Cancelled while running by " strong { (by) } " " (relative(item.updated_at, now)) "." }
            }
            @if state == "dead" {
                p.actions {
                    @if self.can(Action::Requeue) {
                        form.inline method="post" action=(self.link("/items/requeue")) {
                            input type="hidden" name="id" value=(item.id);
                            input type="hidden" name="back" value=(back);
                            button type="submit" { "Requeue" }
                        }
                    }
                    @if self.can(Action::Discard) {
                        form.inline method="post" action=(self.link("/items/discard")) {
                            input type="hidden" name="id" value=(item.id);
                            input type="hidden" name="back" value=(self.queue_link(&item.queue));
                            button.danger type="submit" { "Discard…" }
                        }
                    }
                }
            }
        };
        self.page(&format!("Item {}", item.id), true, body)
    }

    /// Asks before stopping running items (`running=yes` carried on).
    fn confirm_stop(&self, ids: &[ItemId], back: &str) -> Markup {
        let title = "Stop running items?";
        let body = html! {
            h1 { (title) }
            p.message #confirm-text {
                "Their lease is revoked: the worker is told at its next renewal, nothing it \
                 finishes afterwards is written, and the items go dead (requeue runs them \
                 again). Ready and scheduled items are cancelled. "
                (crate::view::capital(&items(ids.len() as u64))) ":"
            }
            ul #confirm-ids { @for id in ids { li { code { (id) } } } }
            form #confirm method="post" action=(self.link("/items/cancel")) {
                @for id in ids { input type="hidden" name="id" value=(id); }
                input type="hidden" name="back" value=(back);
                input type="hidden" name="running" value="yes";
                input type="hidden" name="confirm" value="yes";
                button.danger type="submit" { "Stop " (items(ids.len() as u64)) } " "
                a href=(back) { "Keep them running" }
            }
        };
        self.page(title, false, body)
    }
}

/// An item, as its page and the queue page give it in JSON, with the start of its
/// payload when asked for (the text, and whether it was cut).
pub(super) fn item_json(item: &Item, payload: Option<(String, bool)>) -> Value {
    let mut v = json!({
        "id": item.id.to_string(),
        "queue": item.queue.as_str(),
        "state": item.state.as_str(),
        "attempt": item.attempt,
        "max_attempts": item.max_attempts,
        "stalls": item.stalls,
        "max_stalls": item.max_stalls,
        "renewals": item.renewals,
        "max_renewals": item.max_renewals,
        "owner": item.owner.as_ref().map(|o| o.as_str()),
        "lease_expires_at": item.lease_expires_at.map(iso),
        "run_at": iso(item.run_at),
        "priority": item.priority,
        "stream": item.stream.as_ref().map(|k| k.as_str()),
        "scope": item.scope.as_ref().map(|k| k.as_str()),
        "dedup_key": item.dedup_key.as_ref().map(|k| k.as_str()),
        "last_error": item.last_error,
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
        "payload_bytes": item.payload.len(),
        "cancelled_by": tenure_core::machine::cancelled_by(item),
        "progress": item.progress.as_ref().map(|p| json!({
            "fraction": p.fraction(),
            "message": p.message(),
            "attempt": p.attempt(),
        })),
    });
    if let Some((text, cut)) = payload {
        v["payload_preview"] = json!(text);
        v["payload_truncated"] = json!(cut);
    }
    v
}

/// What a cancel outcome means, for people.
fn cancel_text(o: &CancelOutcome) -> String {
    match o {
        CancelOutcome::Cancelled => "cancelled".to_owned(),
        CancelOutcome::Running { attempt, owner } => format!(
            "not cancelled: running (attempt {attempt}, owner {owner}); cancel does not stop a running item"
        ),
        CancelOutcome::Stopped { attempt, owner } => format!(
            "stopped: lease of attempt {attempt} (owner {owner}) revoked; now dead"
        ),
        CancelOutcome::Dead => "not cancelled: dead (discard it instead)".to_owned(),
        CancelOutcome::Done => "not cancelled: already finished".to_owned(),
        CancelOutcome::NotFound => "not found".to_owned(),
    }
}

/// The short name of a cancel outcome, for JSON.
fn cancel_name(o: &CancelOutcome) -> &'static str {
    match o {
        CancelOutcome::Cancelled => "cancelled",
        CancelOutcome::Running { .. } => "running",
        CancelOutcome::Stopped { .. } => "stopped",
        CancelOutcome::Dead => "dead",
        CancelOutcome::Done => "done",
        CancelOutcome::NotFound => "not_found",
    }
}

/// The listing an item belongs to at `now` (or its stored state when finished).
fn list_state(item: &Item, now: Timestamp) -> &'static str {
    ListState::ALL
        .into_iter()
        .find(|s| s.matches(item, now))
        .map_or(item.state.as_str(), ListState::as_str)
}
