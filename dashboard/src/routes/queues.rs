//! A queue's page (`/queues/{queue}`): its items in one state, paged by cursor, and
//! the pause and resume actions; the JSON of a queue's counts; the view.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Value};
use tenure_core::{
    Cursor, ItemListParams, ItemPage, ListOrder, ListState, PauseParams, QueueCounts, QueueName,
    MAX_PAGE,
};

use super::items::item_json;
use crate::access::Action;
use crate::chart::{Series, Span};
use crate::ctx::{audit, back_to, done, known_queue, snapshot, Ctx};
use crate::notice::Notice;
use crate::text::{clip, iso, preview, query_value, relative, segment};
use crate::view::{expiry, paused_badge, View};
use crate::AppState;

/// The routes of this family.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/queues/{queue}", get(queue))
        .route("/queues/{queue}/pause", post(pause))
        .route("/queues/{queue}/resume", post(resume))
}

#[derive(Debug, Default, Deserialize)]
struct QueueQuery {
    state: Option<String>,
    order: Option<String>,
    after: Option<String>,
    /// `1`: the last page (the newest items in oldest-first order, or the oldest in
    /// newest-first order).
    last: Option<String>,
    /// `all`: every item of the page shown selected.
    select: Option<String>,
}

async fn queue(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Query(q): Query<QueueQuery>,
) -> Response {
    let queue = match known_queue(&ctx, &state, &raw, false).await {
        Ok(q) => q,
        Err(r) => return r,
    };
    let list_state = match q.state.as_deref().filter(|s| !s.is_empty()) {
        None => ListState::Ready,
        Some(s) => match s.parse::<ListState>() {
            Ok(s) => s,
            Err(e) => return ctx.store_error(&state, &e),
        },
    };
    let order = match q.order.as_deref() {
        None | Some("") | Some("oldest") => ListOrder::OldestFirst,
        Some("newest") => ListOrder::NewestFirst,
        Some(other) => {
            return ctx.fail(
                &state,
                StatusCode::BAD_REQUEST,
                "invalid_input",
                &format!("order: {other:?} is not oldest or newest"),
            )
        }
    };
    let last = q.last.as_deref() == Some("1");
    let select_all = q.select.as_deref() == Some("all");
    // The last page is the first page of the other order, turned round: the contract's
    // two orders are exact mirrors of each other.
    let read_order = match (last, order) {
        (false, o) => o,
        (true, ListOrder::NewestFirst) => ListOrder::OldestFirst,
        (true, _) => ListOrder::NewestFirst,
    };
    let mut params = ItemListParams::new(queue.clone(), list_state)
        .order(read_order)
        .limit(state.config.page_size.min(MAX_PAGE));
    let after = q.after.filter(|a| !a.is_empty() && !last);
    if let Some(a) = &after {
        match Cursor::new(a.clone()) {
            Ok(c) => params = params.after(c),
            Err(e) => return ctx.store_error(&state, &e),
        }
    }
    let key = format!(
        "{}\u{0}{}\u{0}{}\u{0}{}",
        queue,
        list_state.as_str(),
        order_str(read_order),
        after.as_deref().unwrap_or("")
    );
    let mut page = match state
        .cache
        .item_page(key, state.store.item_list(params))
        .await
    {
        Ok(p) => p,
        Err(e) => return ctx.store_error(&state, &e),
    };
    if last {
        page.items.reverse();
        page.next = None;
    }
    let previews = state.config.list_payloads;
    let snap = match snapshot(&state).await {
        Ok(s) => s,
        Err(e) => return ctx.store_error(&state, &e),
    };
    let counts = snap.counts(&queue);
    let limits = match super::limits::read_section(&state, &queue).await {
        Ok(u) => u,
        Err(e) => return ctx.store_error(&state, &e),
    };
    let history =
        match super::history::series_of(&state, std::slice::from_ref(&queue), Span::Hour).await {
            Ok((s, _)) => s,
            Err(e) => return ctx.store_error(&state, &e),
        };
    ctx.html_or_json(
        || {
            ctx.view(&state).queue(
                &queue,
                counts,
                list_state,
                order,
                &page,
                after.as_deref(),
                last,
                limits.as_ref(),
                &history,
                select_all,
            )
        },
        || {
            json!({
                "queue": queue.as_str(),
                "state": list_state.as_str(),
                "order": order_str(order),
                "counts": counts.map(|c| queue_json(&queue, c)),
                "as_of": iso(page.as_of),
                "last_page": last,
                "items": page.items.iter().map(|i| item_json(
                    i,
                    previews.then(|| crate::text::preview(&i.payload, LIST_PREVIEW_BYTES)),
                )).collect::<Vec<_>>(),
                "next": page.next.as_ref().map(Cursor::as_str),
                "limits": limits.as_ref().map(super::limits::section_json),
                "history": history.json(),
            })
        },
    )
}

async fn pause_or_resume(
    state: AppState,
    ctx: Ctx,
    raw: String,
    fields: Vec<(String, String)>,
    pause: bool,
) -> Response {
    let action = if pause { Action::Pause } else { Action::Resume };
    if let Err(r) = ctx.guard(&state, action) {
        return r;
    }
    let queue = match known_queue(&ctx, &state, &raw, true).await {
        Ok(q) => q,
        Err(r) => return r,
    };
    let params = PauseParams::new(queue.clone());
    let res = if pause {
        state.store.queue_pause(params).await
    } else {
        state.store.queue_resume(params).await
    };
    state.cache.invalidate().await;
    match res {
        Ok(changed) => {
            audit(
                &ctx,
                action,
                "done",
                Some(queue.as_str()),
                u64::from(changed),
            );
            if ctx.json {
                return Json(
                    json!({ "queue": queue.as_str(), "paused": pause, "changed": changed }),
                )
                .into_response();
            }
            let back = back_to(
                &state,
                &fields,
                &format!("/queues/{}", segment(queue.as_str())),
            );
            let (title, text) = match (pause, changed) {
                (true, true) => (
                    "Paused",
                    format!(
                        "Paused queue {queue}: nothing is claimed from it until it is resumed."
                    ),
                ),
                (true, false) => ("Paused", format!("Queue {queue} was already paused.")),
                (false, true) => ("Resumed", format!("Resumed queue {queue}.")),
                (false, false) => ("Resumed", format!("Queue {queue} was not paused.")),
            };
            done(
                &state,
                &back,
                Notice {
                    title: title.to_owned(),
                    text,
                    rows: Vec::new(),
                },
            )
        }
        Err(e) => {
            audit(&ctx, action, "failed", Some(queue.as_str()), 0);
            ctx.store_error(&state, &e)
        }
    }
}

async fn pause(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    pause_or_resume(state, ctx, raw, fields, true).await
}

async fn resume(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    pause_or_resume(state, ctx, raw, fields, false).await
}

impl View<'_> {
    #[allow(clippy::too_many_arguments)]
    fn queue(
        &self,
        queue: &QueueName,
        counts: Option<&QueueCounts>,
        state: ListState,
        order: ListOrder,
        page: &ItemPage,
        after: Option<&str>,
        last: bool,
        limits: Option<&super::limits::Usage>,
        history: &Series,
        select_all: bool,
    ) -> Markup {
        let now = page.as_of;
        let here = self.queue_link(queue);
        let order_name = order_str(order);
        let back = format!("{here}?state={}&order={order_name}", state.as_str());
        let selectable = match state {
            ListState::Ready | ListState::Scheduled => self.can(Action::Cancel),
            ListState::Dead => self.can(Action::Requeue) || self.can(Action::Discard),
            ListState::Running => false,
        };
        let rows = html! {
            div.scroll { table #items {
                thead { tr {
                    @if selectable { th { span.sr { "Select" } } }
                    th { "Item" } th { "Attempt" } th { "Run at" } th { "Enqueued" }
                    @if state == ListState::Running { th { "Owner" } th { "Lease ends" } }
                    @if state == ListState::Dead { th { "Died" } }
                    @if self.cfg.list_payloads { th { "Payload" } }
                    th { "Last error" }
                } }
                tbody {
                    @for item in &page.items {
                        tr data-id=(item.id) {
                            @if selectable { td { input type="checkbox" name="id" value=(item.id) checked[select_all] aria-label=(format!("select {}", item.id)); } }
                            td { a.id href=(self.item_link(item.id)) { (item.id) } }
                            td.num { (item.attempt) " / " (item.max_attempts) }
                            td title=(iso(item.run_at)) { (relative(item.run_at, now)) }
                            td title=(iso(item.created_at)) { (relative(item.created_at, now)) }
                            @if state == ListState::Running {
                                td { @if let Some(o) = &item.owner { (o) } }
                                td { @if let Some(t) = item.lease_expires_at { (expiry(t, now)) } }
                            }
                            @if state == ListState::Dead { td title=(iso(item.updated_at)) { (relative(item.updated_at, now)) } }
                            @if self.cfg.list_payloads {
                                @let (text, cut) = preview(&item.payload, LIST_PREVIEW_BYTES);
                                @let shown = clip(&text, CELL_CHARS);
                                @let more = cut || shown.chars().count() < text.chars().count();
                                td.payload title=[more.then(|| clip(&text, LIST_PREVIEW_BYTES))] {
                                    @if item.payload.is_empty() { span.meta { "empty" } } @else { code { (shown) } }
                                }
                            }
                            td.error title=[item.last_error.as_deref().filter(|e| e.chars().count() > CELL_CHARS).map(|e| clip(e, TITLE_CHARS))] {
                                @if let Some(e) = &item.last_error { (clip(e, CELL_CHARS)) }
                            }
                        }
                    }
                }
            } }
        };
        let body = html! {
            h1.wrap { "Queue " code { (queue) } }
            div.meta {
                @if let Some(c) = counts { (paused_badge(c.paused)) " " }
                (self.pause_form(queue, counts.is_some_and(|c| c.paused), &back))
            }
            nav.tabs {
                @for s in ListState::ALL {
                    a href=(format!("{here}?state={}&order={order_name}", s.as_str())) class=[(s == state).then_some("on")] {
                        (s.as_str())
                        @if let Some(c) = counts { " (" (count_of(c, s)) ")" }
                    }
                }
                span.order {
                    "Order: "
                    @for (o, label) in [(ListOrder::OldestFirst, "oldest first"), (ListOrder::NewestFirst, "newest first")] {
                        a href=(format!("{here}?state={}&order={}", state.as_str(), order_str(o))) class=[(o == order).then_some("on")] { (label) }
                    }
                }
            }
            form.filter #search method="get" action=(format!("{here}/search")) {
                input type="hidden" name="state" value=(state.as_str());
                label { "Search " (state.as_str()) " items " input type="search" name="q" maxlength="200" size="24" placeholder="text in payload or last error"; }
                button type="submit" { "Search" }
            }
            @if last { p.meta #last-page { "The last page: the " (if order == ListOrder::NewestFirst { "oldest" } else { "newest" }) " " (page.items.len()) " items." } }
            @else if after.is_some() { p.meta { "A later page." } }
            @if page.items.is_empty() {
                p.empty { "No " (state.as_str()) " items." }
            } @else if selectable {
                form #select method="post" action=(self.link(if state == ListState::Dead { "/items/requeue" } else { "/items/cancel" })) {
                    input type="hidden" name="back" value=(back);
                    (rows)
                    p.actions {
                        @let page_link = format!("{here}?state={}&order={order_name}{}{}", state.as_str(), after.map(|a| format!("&after={}", query_value(a))).unwrap_or_default(), if last { "&last=1" } else { "" });
                        @if select_all { a #select-none href=(page_link) { "Select none" } " " }
                        @else { a #select-all href=(format!("{page_link}&select=all")) { "Select all " (page.items.len()) " on this page" } " " }
                        @if state == ListState::Dead {
                            @if self.can(Action::Requeue) { button type="submit" formaction=(self.link("/items/requeue")) { "Requeue selected" } }
                            @if self.can(Action::Discard) { button.danger type="submit" formaction=(self.link("/items/discard")) { "Discard selected…" } }
                        } @else {
                            button.danger type="submit" formaction=(self.link("/items/cancel")) { "Cancel selected…" }
                        }
                    }
                }
            } @else {
                (rows)
            }
            @if after.is_some() || last || page.next.is_some() {
                nav.paging {
                    @if after.is_some() || last { a #first href=(format!("{here}?state={}&order={order_name}", state.as_str())) { "← First page" } " " }
                    @if let Some(next) = &page.next {
                        a #next href=(format!("{here}?state={}&order={order_name}&after={}", state.as_str(), query_value(next.as_str()))) { "Next page →" } " "
                        a #last href=(format!("{here}?state={}&order={order_name}&last=1", state.as_str())) { "Last page ⇥" }
                    }
                }
            }
            (self.history_section(Some(queue), history))
            p.meta { "Listed as of " (iso(page.as_of)) "; every viewer shares one read of this page for a few seconds (longer when it is slow to read), and an action here reads it again." }
            @if state == ListState::Dead && (self.can(Action::Requeue) || self.can(Action::Discard)) {
                h2 { "By filter" }
                form.filter method="get" action=(format!("{here}/dead")) {
                    label { "Action " select name="action" {
                        @if self.can(Action::Requeue) { option value="requeue" { "requeue" } }
                        @if self.can(Action::Discard) { option value="discard" { "discard" } }
                    } }
                    label { "Dead for longer than " input type="text" name="older_than" placeholder="e.g. 7d, 6h (empty: all)" size="14"; }
                    label { "At most " input type="number" name="limit" value="1000" min="1" max=(tenure_core::MAX_DEAD_BATCH); " items" }
                    button type="submit" { "Count first" }
                }
            }
            @if let Some(u) = limits { (self.limits_section(u)) }
        };
        self.page(&format!("Queue {queue}"), true, body)
    }
}

/// A queue's counts, as the overview and the queue page give them in JSON.
pub(super) fn queue_json(q: &QueueName, c: &QueueCounts) -> Value {
    json!({
        "queue": q.as_str(),
        "ready": c.ready,
        "scheduled": c.scheduled,
        "running": c.running,
        "dead": c.dead,
        "paused": c.paused,
        "oldest_ready_age_s": c.oldest_ready_age.map(|d| d.as_secs_f64()),
    })
}

/// Payload bytes read for a listing's preview column (and its JSON).
const LIST_PREVIEW_BYTES: usize = 240;
/// Characters of a payload or last error shown in a listing's cell.
const CELL_CHARS: usize = 60;
/// Characters of a last error in its cell's title (on hover).
const TITLE_CHARS: usize = 1000;

fn order_str(order: ListOrder) -> &'static str {
    match order {
        ListOrder::NewestFirst => "newest",
        _ => "oldest",
    }
}

fn count_of(c: &QueueCounts, s: ListState) -> u64 {
    match s {
        ListState::Ready => c.ready,
        ListState::Scheduled => c.scheduled,
        ListState::Running => c.running,
        ListState::Dead => c.dead,
    }
}
