//! Dead items: the preview of a requeue or discard by filter
//! (`/queues/{queue}/dead`), those actions, and requeue or discard by id
//! (`/items/requeue`, `/items/discard`); their JSON and the view.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::json;
use tenure_core::{
    DeadFilter, DiscardParams, ItemListParams, ListState, QueueName, RequeueParams, MAX_DEAD_BATCH,
    MAX_PAGE,
};

use crate::access::Action;
use crate::ctx::{ask_first, audit, back_to, confirmed, done, ids_of, known_queue, Ctx};
use crate::notice::Notice;
use crate::text::{parse_age, segment};
use crate::view::{capital, items, View};
use crate::AppState;

/// The routes of this family.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/queues/{queue}/dead", get(dead_preview))
        .route("/queues/{queue}/dead/requeue", post(requeue_filter))
        .route("/queues/{queue}/dead/discard", post(discard_filter))
        .route("/items/requeue", post(requeue_ids))
        .route("/items/discard", post(discard_ids))
}

/// A dead-item filter as a form or query sends it.
#[derive(Debug, Default, Deserialize)]
struct FilterForm {
    action: Option<String>,
    #[serde(default)]
    older_than: String,
    limit: Option<String>,
    confirm: Option<String>,
}

impl FilterForm {
    fn filter(&self, queue: &QueueName) -> Result<(DeadFilter, u32), String> {
        let limit = match self
            .limit
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            None => tenure_core::DEFAULT_DEAD_BATCH,
            Some(s) => s
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_DEAD_BATCH).contains(n))
                .ok_or_else(|| format!("limit: {s:?} is not a number in 1..={MAX_DEAD_BATCH}"))?,
        };
        let mut filter = DeadFilter::new(queue.clone()).limit(limit);
        if let Some(age) = parse_age(&self.older_than).map_err(|e| format!("older_than: {e}"))? {
            filter = filter.older_than(age);
        }
        Ok((filter, limit))
    }
}

/// Dead items of `filter`'s queue that match it, counted from the listing; exact unless
/// more than `max_scan` dead items had to be read.
async fn count_dead(
    state: &AppState,
    filter: &DeadFilter,
    max_scan: u32,
) -> tenure_core::Result<(u64, bool, u64)> {
    let counts = state.store.queue_counts(&filter.queue).await?;
    if filter.older_than.is_none() {
        return Ok((counts.dead, true, counts.dead));
    }
    let mut matching = 0u64;
    let mut scanned = 0u32;
    let mut cursor = None;
    loop {
        let mut params = ItemListParams::new(filter.queue.clone(), ListState::Dead).limit(MAX_PAGE);
        if let Some(c) = cursor.take() {
            params = params.after(c);
        }
        let page = state.store.item_list(params).await?;
        let before = filter.dead_before(page.as_of);
        matching += page.items.iter().filter(|i| i.updated_at <= before).count() as u64;
        scanned = scanned.saturating_add(u32::try_from(page.items.len()).unwrap_or(u32::MAX));
        match page.next {
            Some(c) if scanned < max_scan => cursor = Some(c),
            Some(_) => return Ok((matching, false, counts.dead)),
            None => return Ok((matching, true, counts.dead)),
        }
    }
}

async fn dead_preview(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Query(form): Query<FilterForm>,
) -> Response {
    let queue = match known_queue(&ctx, &state, &raw, false).await {
        Ok(q) => q,
        Err(r) => return r,
    };
    let action = match form.action.as_deref() {
        Some("discard") => Action::Discard,
        None | Some("") | Some("requeue") => Action::Requeue,
        Some(other) => {
            return ctx.fail(
                &state,
                StatusCode::BAD_REQUEST,
                "invalid_input",
                &format!("action: {other:?} is not requeue or discard"),
            )
        }
    };
    let (filter, limit) = match form.filter(&queue) {
        Ok(f) => f,
        Err(m) => return ctx.fail(&state, StatusCode::BAD_REQUEST, "invalid_input", &m),
    };
    let (matching, exact, dead) = match count_dead(&state, &filter, MAX_DEAD_BATCH).await {
        Ok(c) => c,
        Err(e) => return ctx.store_error(&state, &e),
    };
    let older = form.older_than.trim().to_owned();
    ctx.html_or_json(
        || {
            ctx.view(&state)
                .dead_preview(&queue, action, &older, limit, matching, exact, dead)
        },
        || {
            json!({
                "queue": queue.as_str(),
                "action": action.as_str(),
                "older_than": (!older.is_empty()).then_some(older.clone()),
                "limit": limit,
                "matching": matching,
                "exact": exact,
                "dead": dead,
                "takes": matching.min(u64::from(limit)),
            })
        },
    )
}

/// The page after a requeue or discard: how many, and where to go next.
fn dead_done(
    ctx: &Ctx,
    state: &AppState,
    action: Action,
    n: u64,
    asked: Option<usize>,
    queue: Option<&QueueName>,
    back: &str,
) -> Response {
    let verb = if action == Action::Requeue {
        "Requeued"
    } else {
        "Discarded"
    };
    let text = match (asked, queue) {
        (Some(asked), _) => format!(
            "{verb} {n} of {} (items that were not dead are left alone).",
            items(asked as u64)
        ),
        (None, Some(q)) => format!("{verb} {} of queue {q}.", items(n)),
        (None, None) => format!("{verb} {}.", items(n)),
    };
    if ctx.json {
        return Json(json!({ action.as_str(): n, "queue": queue.map(QueueName::as_str) }))
            .into_response();
    }
    done(
        state,
        back,
        Notice {
            title: verb.to_owned(),
            text,
            rows: Vec::new(),
        },
    )
}

async fn dead_by_ids(
    state: AppState,
    ctx: Ctx,
    fields: Vec<(String, String)>,
    action: Action,
) -> Response {
    if let Err(r) = ctx.guard(&state, action) {
        return r;
    }
    let ids = match ids_of(&ctx, &state, &fields) {
        Ok(ids) => ids,
        Err(r) => return r,
    };
    if action == Action::Discard && !confirmed(&fields) {
        return ask_first(&ctx, &state, action, &ids, &back_to(&state, &fields, "/"));
    }
    let asked = ids.len();
    let subject = ids
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let res = if action == Action::Requeue {
        state.store.dead_requeue(RequeueParams::new(ids)).await
    } else {
        state.store.dead_discard(DiscardParams::new(ids)).await
    };
    state.cache.invalidate().await;
    match res {
        Ok(n) => {
            audit(&ctx, action, "done", Some(&subject), n);
            let back = back_to(&state, &fields, "/");
            dead_done(&ctx, &state, action, n, Some(asked), None, &back)
        }
        Err(e) => {
            audit(&ctx, action, "failed", Some(&subject), 0);
            ctx.store_error(&state, &e)
        }
    }
}

async fn requeue_ids(
    State(state): State<AppState>,
    ctx: Ctx,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    dead_by_ids(state, ctx, fields, Action::Requeue).await
}

async fn discard_ids(
    State(state): State<AppState>,
    ctx: Ctx,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    dead_by_ids(state, ctx, fields, Action::Discard).await
}

async fn dead_by_filter(
    state: AppState,
    ctx: Ctx,
    raw: String,
    form: FilterForm,
    action: Action,
) -> Response {
    if let Err(r) = ctx.guard(&state, action) {
        return r;
    }
    let queue = match known_queue(&ctx, &state, &raw, true).await {
        Ok(q) => q,
        Err(r) => return r,
    };
    let (filter, _) = match form.filter(&queue) {
        Ok(f) => f,
        Err(m) => return ctx.fail(&state, StatusCode::BAD_REQUEST, "invalid_input", &m),
    };
    if action == Action::Discard && form.confirm.as_deref().map(str::trim) != Some(queue.as_str()) {
        audit(&ctx, action, "refused_unconfirmed", Some(queue.as_str()), 0);
        return ctx.fail(
            &state,
            StatusCode::BAD_REQUEST,
            "unconfirmed",
            &format!(
                "confirm: type the queue's name, {queue}, to discard its dead items for good."
            ),
        );
    }
    let res = if action == Action::Requeue {
        state
            .store
            .dead_requeue(RequeueParams::matching(filter))
            .await
    } else {
        state
            .store
            .dead_discard(DiscardParams::matching(filter))
            .await
    };
    state.cache.invalidate().await;
    match res {
        Ok(n) => {
            audit(&ctx, action, "done", Some(queue.as_str()), n);
            let back = state
                .config
                .link(&format!("/queues/{}?state=dead", segment(queue.as_str())));
            dead_done(&ctx, &state, action, n, None, Some(&queue), &back)
        }
        Err(e) => {
            audit(&ctx, action, "failed", Some(queue.as_str()), 0);
            ctx.store_error(&state, &e)
        }
    }
}

async fn requeue_filter(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Form(form): Form<FilterForm>,
) -> Response {
    dead_by_filter(state, ctx, raw, form, Action::Requeue).await
}

async fn discard_filter(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Form(form): Form<FilterForm>,
) -> Response {
    dead_by_filter(state, ctx, raw, form, Action::Discard).await
}

impl View<'_> {
    /// The count before a requeue or discard by filter, and the form that runs it.
    #[allow(clippy::too_many_arguments)]
    fn dead_preview(
        &self,
        queue: &QueueName,
        action: Action,
        older_than: &str,
        limit: u32,
        matching: u64,
        exact: bool,
        dead_total: u64,
    ) -> Markup {
        let takes = matching.min(u64::from(limit));
        let age = if older_than.is_empty() {
            String::new()
        } else {
            format!(" dead for longer than {older_than}")
        };
        let body = html! {
            h1.wrap { (capital(action.as_str())) " dead items of " code { (queue) } }
            p #preview-count.message {
                @if exact { strong { (matching) } } @else { "at least " strong { (matching) } }
                " of " (dead_total) " dead items of " code { (queue) } (age) " match. "
                "This " (action.as_str()) " takes " strong #takes { (takes) } " of them (at most " (limit) " per run)."
            }
            @if takes == 0 {
                p { "Nothing to do. " a href=(format!("{}?state=dead", self.queue_link(queue))) { "Back to the dead items" } }
            } @else {
                form method="post" action=(format!("{}/dead/{}", self.queue_link(queue), action.as_str())) {
                    input type="hidden" name="older_than" value=(older_than);
                    input type="hidden" name="limit" value=(limit);
                    @if action == Action::Discard {
                        p { "Discarded items are deleted for good. Type the queue's name, " code { (queue) } ", to confirm:" }
                        input type="text" name="confirm" required autocomplete="off" aria-label="queue name to confirm";
                        " "
                        button.danger type="submit" { "Discard " (items(takes)) }
                    } @else {
                        button type="submit" { "Requeue " (items(takes)) }
                    }
                    " "
                    a href=(format!("{}?state=dead", self.queue_link(queue))) { "Cancel" }
                }
            }
        };
        self.page(
            &format!("{} by filter", capital(action.as_str())),
            false,
            body,
        )
    }
}
