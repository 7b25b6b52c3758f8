//! The request handlers: each reads the store (or the cache), then answers HTML or its
//! JSON twin; actions check origin and access first and leave an audit trail.

// A refusal is the response itself, returned at once by the handler: boxing it would
// only add noise.
#![allow(clippy::result_large_err)]

use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::{Form, Json};
use maud::Markup;
use serde::Deserialize;
use serde_json::{json, Value};
use tenure_core::{
    CancelParams, Cursor, DeadFilter, DiscardParams, ErrorKind, Item, ItemId, ItemListParams,
    LeaseInfo, LeaseListParams, ListOrder, ListState, PauseParams, QueueCounts, QueueName,
    RequeueParams, MAX_DEAD_BATCH, MAX_PAGE,
};

use crate::access::{Access, Action};
use crate::cache::{LeaderView, Snapshot};
use crate::notice::{Notice, Shown};
use crate::pages::{self, View};
use crate::security::{same_origin, AuthUser};
use crate::text::{dashboard_path, iso, parse_age, queue_segment, segment};
use crate::AppState;

/// Everything a handler needs to know about the request besides its own input.
pub(crate) struct Ctx {
    access: Access,
    actor: String,
    json: bool,
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
    fn view<'a>(&'a self, state: &'a AppState) -> View<'a> {
        View {
            cfg: &state.config,
            access: &self.access,
            notice: self.notice.as_ref(),
        }
    }

    /// An error page, or `{"error": {"kind", "message"}}`.
    fn fail(&self, state: &AppState, status: StatusCode, kind: &str, message: &str) -> Response {
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
    fn store_error(&self, state: &AppState, e: &tenure_core::Error) -> Response {
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

    fn html_or_json(
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
    fn guard(&self, state: &AppState, action: Action) -> Result<(), Response> {
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
fn audit(ctx: &Ctx, action: Action, outcome: &'static str, subject: Option<&str>, count: u64) {
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

fn queue_json(q: &QueueName, c: &QueueCounts) -> Value {
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

fn item_json(item: &Item, payload: Option<(String, bool)>) -> Value {
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
    });
    if let Some((text, cut)) = payload {
        v["payload_preview"] = json!(text);
        v["payload_truncated"] = json!(cut);
    }
    v
}

fn lease_json(l: &LeaseInfo, as_of: tenure_core::Timestamp) -> Value {
    json!({
        "id": l.token.id.to_string(),
        "attempt": l.token.attempt,
        "queue": l.queue.as_str(),
        "owner": l.owner.as_str(),
        "expires_at": iso(l.expires_at),
        "expired": l.expires_at <= as_of,
        "renewals": l.renewals,
        "max_renewals": l.max_renewals,
    })
}

async fn snapshot(state: &AppState) -> tenure_core::Result<std::sync::Arc<Snapshot>> {
    let now = state.config.clock.now();
    state
        .cache
        .get(&*state.store, &state.config.leader_name, now)
        .await
}

/// The queue a path segment names (see [`segment`]), checked for validity only.
fn parse_queue(ctx: &Ctx, state: &AppState, raw: &str) -> Result<QueueName, Response> {
    QueueName::new(queue_segment(raw)).map_err(|e| ctx.store_error(state, &e))
}

/// The queue a path segment names, when the store knows it ([`Store::queue_list`]
/// names it); 404 with a way back otherwise. `fresh` skips the shared snapshot (for
/// actions: nothing may pause a queue into existence).
///
/// [`Store::queue_list`]: tenure_core::Store::queue_list
async fn known_queue(
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

/// `200 up` when the store answers, `503 down` when it does not: nothing else, so
/// nobody learns a file, host or error text from it (the error goes to the log).
pub(crate) async fn healthz(State(state): State<AppState>) -> Response {
    match state.store.queue_list().await {
        Ok(_) => (StatusCode::OK, "up\n").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "dashboard health check: the store does not answer");
            (StatusCode::SERVICE_UNAVAILABLE, "down\n").into_response()
        }
    }
}

/// The answer to an action that ran: `303 See Other` to `back` with the one-time
/// `notice` (POST-redirect-GET: a reload of the page after it repeats nothing).
fn done(state: &AppState, back: &str, notice: Notice) -> Response {
    let id = state.notices.put(notice);
    let sep = if back.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{back}{sep}notice={id}")).into_response()
}

/// True when an action's form says it was confirmed (`confirm=yes`).
fn confirmed(fields: &[(String, String)]) -> bool {
    fields.iter().any(|(k, v)| k == "confirm" && v == "yes")
}

pub(crate) async fn not_found(State(state): State<AppState>, ctx: Ctx) -> Response {
    ctx.fail(&state, StatusCode::NOT_FOUND, "not_found", "No such page.")
}

pub(crate) async fn overview(State(state): State<AppState>, ctx: Ctx) -> Response {
    let snap = match snapshot(&state).await {
        Ok(s) => s,
        Err(e) => return ctx.store_error(&state, &e),
    };
    let store = state.store.name();
    ctx.html_or_json(
        || ctx.view(&state).overview(&snap, store),
        || {
            let leader = match &snap.leader {
                LeaderView::Held {
                    holder,
                    term,
                    expires_at,
                } => json!({
                    "name": state.config.leader_name,
                    "holder": holder.as_str(),
                    "term": term,
                    "expires_at": iso(*expires_at),
                }),
                LeaderView::Free => {
                    json!({ "name": state.config.leader_name, "holder": null, "term": null })
                }
            };
            json!({
                "store": store,
                "environment": state.config.environment,
                "as_of": iso(snap.as_of),
                "queues": snap.queues.iter().map(|(q, c)| queue_json(q, c)).collect::<Vec<_>>(),
                "instances": snap.instances.iter().map(|i| json!({
                    "id": i.id.as_str(),
                    "started_at": iso(i.started_at),
                    "last_seen": iso(i.last_seen),
                })).collect::<Vec<_>>(),
                "leader": leader,
            })
        },
    )
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct QueueQuery {
    state: Option<String>,
    order: Option<String>,
    after: Option<String>,
    /// `1`: the last page (the newest items in oldest-first order, or the oldest in
    /// newest-first order).
    last: Option<String>,
}

pub(crate) async fn queue(
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
        pages::order_str(read_order),
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
            )
        },
        || {
            json!({
                "queue": queue.as_str(),
                "state": list_state.as_str(),
                "order": pages::order_str(order),
                "counts": counts.map(|c| queue_json(&queue, c)),
                "as_of": iso(page.as_of),
                "last_page": last,
                "items": page.items.iter().map(|i| item_json(
                    i,
                    previews.then(|| crate::text::preview(&i.payload, pages::LIST_PREVIEW_BYTES)),
                )).collect::<Vec<_>>(),
                "next": page.next.as_ref().map(Cursor::as_str),
            })
        },
    )
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ItemQuery {
    payload: Option<String>,
}

pub(crate) async fn item(
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
            v["listing"] = json!(pages::list_state(&item, now));
            v
        },
    )
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct FindQuery {
    id: Option<String>,
}

pub(crate) async fn find(
    State(state): State<AppState>,
    ctx: Ctx,
    Query(q): Query<FindQuery>,
) -> Response {
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

#[derive(Debug, Default, Deserialize)]
pub(crate) struct LeasesQuery {
    queue: Option<String>,
    after: Option<String>,
}

pub(crate) async fn leases(
    State(state): State<AppState>,
    ctx: Ctx,
    Query(q): Query<LeasesQuery>,
) -> Response {
    let limit = state.config.page_size.min(MAX_PAGE);
    let queues = match snapshot(&state).await {
        Ok(s) => s.queues.iter().map(|(q, _)| q.clone()).collect::<Vec<_>>(),
        Err(e) => return ctx.store_error(&state, &e),
    };
    let one = match q.queue.as_deref().filter(|s| !s.is_empty()) {
        Some(raw) => match parse_queue(&ctx, &state, raw) {
            Ok(q) => Some(q),
            Err(r) => return r,
        },
        None => None,
    };
    let (mut leases, as_of, next, partial) = match &one {
        Some(queue) => {
            let mut params = LeaseListParams::new(queue.clone()).limit(limit);
            if let Some(a) = q.after.as_deref().filter(|a| !a.is_empty()) {
                match Cursor::new(a) {
                    Ok(c) => params = params.after(c),
                    Err(e) => return ctx.store_error(&state, &e),
                }
            }
            let key = format!(
                "{queue}\u{0}{}\u{0}{limit}",
                q.after.as_deref().unwrap_or("")
            );
            match state
                .cache
                .lease_page(key, state.store.lease_list(params))
                .await
            {
                Ok(p) => {
                    let next = p.next.map(|c| {
                        format!(
                            "{}?queue={}&after={}",
                            state.config.link("/leases"),
                            segment(queue.as_str()),
                            segment(c.as_str())
                        )
                    });
                    (p.leases, p.as_of, next, false)
                }
                Err(e) => return ctx.store_error(&state, &e),
            }
        }
        None => {
            // Every queue's first page, merged: bounded by queues x page size.
            let mut all = Vec::new();
            let mut as_of = state.config.clock.now();
            let mut partial = false;
            for queue in &queues {
                let key = format!("{queue}\u{0}\u{0}{limit}");
                let read = state
                    .store
                    .lease_list(LeaseListParams::new(queue.clone()).limit(limit));
                match state.cache.lease_page(key, read).await {
                    Ok(p) => {
                        partial |= p.next.is_some();
                        as_of = p.as_of;
                        all.extend(p.leases);
                    }
                    Err(e) => return ctx.store_error(&state, &e),
                }
            }
            (all, as_of, None, partial)
        }
    };
    leases.sort_by_key(|l| (l.expires_at, l.token.id));
    if one.is_none() {
        leases.truncate(limit as usize);
    }
    ctx.html_or_json(
        || {
            ctx.view(&state)
                .leases(one.as_ref(), &queues, &leases, as_of, next.clone(), partial)
        },
        || {
            json!({
                "queue": one.as_ref().map(QueueName::as_str),
                "as_of": iso(as_of),
                "leases": leases.iter().map(|l| lease_json(l, as_of)).collect::<Vec<_>>(),
                "next": next,
            })
        },
    )
}

/// A dead-item filter as a form or query sends it.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FilterForm {
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

pub(crate) async fn dead_preview(
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

/// Where to go after an action: the `back` field when it is a path of this dashboard.
/// Anything else (another site, a tab or newline, a step out of the base path) is
/// ignored for `fallback`.
fn back_to(state: &AppState, fields: &[(String, String)], fallback: &str) -> String {
    let base = &state.config.base_path;
    fields
        .iter()
        .find(|(k, _)| k == "back")
        .map(|(_, v)| v.clone())
        .filter(|v| dashboard_path(v, base))
        .unwrap_or_else(|| state.config.link(fallback))
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

pub(crate) async fn pause(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    pause_or_resume(state, ctx, raw, fields, true).await
}

pub(crate) async fn resume(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    pause_or_resume(state, ctx, raw, fields, false).await
}

/// The `id` fields of a form, parsed; 400 naming the first bad one.
fn ids_of(
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

pub(crate) async fn cancel(
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
    if !confirmed(&fields) {
        return ask_first(
            &ctx,
            &state,
            Action::Cancel,
            &ids,
            &back_to(&state, &fields, "/"),
        );
    }
    let res = state
        .store
        .item_cancel(CancelParams::new(ids.clone()))
        .await;
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
    let n = rows.iter().filter(|(_, o)| o.is_cancelled()).count() as u64;
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
                text: format!("Cancelled {n} of {}.", pages::items(rows.len() as u64)),
                rows: rows
                    .iter()
                    .map(|(id, o)| (id.clone(), pages::cancel_text(o)))
                    .collect(),
            },
        );
    }
    Json(json!({
        "cancelled": n,
        "results": rows.iter().map(|(id, o)| {
            let mut d = json!({ "id": id, "outcome": pages::cancel_name(o) });
            if let tenure_core::CancelOutcome::Running { attempt, owner } = o {
                d["attempt"] = json!(attempt);
                d["owner"] = json!(owner.as_str());
            }
            d
        }).collect::<Vec<_>>(),
    }))
    .into_response()
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
            pages::items(asked as u64)
        ),
        (None, Some(q)) => format!("{verb} {} of queue {q}.", pages::items(n)),
        (None, None) => format!("{verb} {}.", pages::items(n)),
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

/// The page that asks before a destructive action by id runs: the same form again
/// with `confirm=yes` (JSON: 400 `unconfirmed`). Nothing has run.
fn ask_first(ctx: &Ctx, state: &AppState, action: Action, ids: &[ItemId], back: &str) -> Response {
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

pub(crate) async fn requeue_ids(
    State(state): State<AppState>,
    ctx: Ctx,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    dead_by_ids(state, ctx, fields, Action::Requeue).await
}

pub(crate) async fn discard_ids(
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

pub(crate) async fn requeue_filter(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Form(form): Form<FilterForm>,
) -> Response {
    dead_by_filter(state, ctx, raw, form, Action::Requeue).await
}

pub(crate) async fn discard_filter(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Form(form): Form<FilterForm>,
) -> Response {
    dead_by_filter(state, ctx, raw, form, Action::Discard).await
}
