//! Search a queue's items (`/queues/{queue}/search?q=&state=&limit=&after=`): the items
//! of one state whose payload (when listings show payloads) or last error holds a
//! piece of text, found by paging through `Store::item_list` oldest first.
//!
//! Bounded three ways, and the page says which bound stopped it: at most `limit`
//! matches, at most [`SCAN_MAX`] items read, at most [`TIME_BUDGET`] spent. What was
//! not scanned is said on the page with a link that goes on from there (`after=`).

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::json;
use tenure_core::{Cursor, Item, ItemListParams, ListState, QueueName, MAX_PAGE};
use tokio::time::Instant;

use super::items::item_json;
use crate::ctx::{known_queue, Ctx};
use crate::text::{clip, iso, preview, query_value, relative, segment};
use crate::view::View;
use crate::AppState;

/// Most items one search reads.
pub(crate) const SCAN_MAX: u32 = 10_000;
/// Most time one search spends reading.
pub(crate) const TIME_BUDGET: Duration = Duration::from_secs(2);
/// Matches shown when the request does not say.
const DEFAULT_LIMIT: u32 = 50;
/// Most matches one search shows.
const MAX_LIMIT: u32 = 500;
/// Longest text searched for, in characters.
const MAX_QUERY_CHARS: usize = 200;
/// Payload bytes a search looks in.
const PAYLOAD_BYTES: usize = 64 * 1024;
/// Items read per listing call.
const SCAN_PAGE: u32 = 500;

/// The routes of this family.
pub(super) fn router() -> Router<AppState> {
    Router::new().route("/queues/{queue}/search", get(search))
}

#[derive(Debug, Default, Deserialize)]
struct SearchQuery {
    q: Option<String>,
    state: Option<String>,
    limit: Option<String>,
    after: Option<String>,
}

/// Why a search stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// Every item of the state was read.
    End,
    /// `limit` matches were found.
    Limit,
    /// [`SCAN_MAX`] items were read.
    ScanCap,
    /// [`TIME_BUDGET`] ran out.
    Time,
}

impl Stop {
    fn as_str(self) -> &'static str {
        match self {
            Stop::End => "end",
            Stop::Limit => "limit",
            Stop::ScanCap => "scan_cap",
            Stop::Time => "time",
        }
    }
}

/// What one search found.
struct Found {
    matches: Vec<Item>,
    scanned: u64,
    stop: Stop,
    /// Where a further search goes on from, unless it read to the end.
    next: Option<Cursor>,
}

fn hit(item: &Item, needle: &str, payloads: bool) -> bool {
    if item
        .last_error
        .as_deref()
        .is_some_and(|e| e.to_lowercase().contains(needle))
    {
        return true;
    }
    payloads && {
        let (text, _) = preview(&item.payload, PAYLOAD_BYTES);
        text.to_lowercase().contains(needle)
    }
}

async fn search(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Query(sq): Query<SearchQuery>,
) -> Response {
    let bad = |what: String| ctx.fail(&state, StatusCode::BAD_REQUEST, "invalid_input", &what);
    let queue = match known_queue(&ctx, &state, &raw, false).await {
        Ok(q) => q,
        Err(r) => return r,
    };
    let list_state = match sq.state.as_deref().filter(|s| !s.is_empty()) {
        None => ListState::Dead,
        Some(s) => match s.parse::<ListState>() {
            Ok(s) => s,
            Err(e) => return ctx.store_error(&state, &e),
        },
    };
    let limit = match sq.limit.as_deref().filter(|s| !s.is_empty()) {
        None => DEFAULT_LIMIT,
        Some(s) => match s.parse::<u32>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => return bad(format!("limit: not a number in 1..={MAX_LIMIT}")),
        },
    };
    let text = sq.q.unwrap_or_default();
    if text.chars().count() > MAX_QUERY_CHARS {
        return bad(format!("q: longer than {MAX_QUERY_CHARS} characters"));
    }
    let mut cursor = match sq.after.filter(|a| !a.is_empty()) {
        None => None,
        Some(a) => match Cursor::new(a) {
            Ok(c) => Some(c),
            Err(e) => return ctx.store_error(&state, &e),
        },
    };
    let from = cursor.clone();
    let payloads = state.config.list_payloads;
    let found = if text.trim().is_empty() {
        None
    } else {
        let needle = text.to_lowercase();
        let started = Instant::now();
        let mut found = Found {
            matches: Vec::new(),
            scanned: 0,
            stop: Stop::End,
            next: None,
        };
        loop {
            if found.scanned >= u64::from(SCAN_MAX) {
                found.stop = Stop::ScanCap;
                break;
            }
            if started.elapsed() >= TIME_BUDGET {
                found.stop = Stop::Time;
                break;
            }
            let read_from = cursor.clone();
            let mut params =
                ItemListParams::new(queue.clone(), list_state).limit(SCAN_PAGE.min(MAX_PAGE));
            if let Some(c) = read_from.clone() {
                params = params.after(c);
            }
            let page = match state.store.item_list(params).await {
                Ok(p) => p,
                Err(e) => return ctx.store_error(&state, &e),
            };
            let mut read_here = 0u32;
            for item in page.items {
                found.scanned += 1;
                read_here += 1;
                if hit(&item, &needle, payloads) {
                    found.matches.push(item);
                    if found.matches.len() >= limit as usize {
                        found.stop = Stop::Limit;
                        break;
                    }
                }
            }
            if found.stop == Stop::Limit {
                // The items after the last match are unread: the same page, cut
                // right after it, gives the cursor that goes on from there.
                let mut cut = ItemListParams::new(queue.clone(), list_state).limit(read_here);
                if let Some(c) = read_from {
                    cut = cut.after(c);
                }
                found.next = match state.store.item_list(cut).await {
                    Ok(p) => p.next,
                    Err(e) => return ctx.store_error(&state, &e),
                };
                break;
            }
            match page.next {
                Some(n) => {
                    cursor = Some(n.clone());
                    found.next = Some(n);
                }
                None => {
                    found.next = None;
                    break;
                }
            }
        }
        if found.stop == Stop::End {
            found.next = None;
        }
        Some(found)
    };
    ctx.html_or_json(
        || {
            ctx.view(&state)
                .search(&queue, list_state, &text, limit, found.as_ref(), from.is_some())
        },
        || {
            json!({
                "queue": queue.as_str(),
                "state": list_state.as_str(),
                "q": text,
                "searches_payloads": payloads,
                "limit": limit,
                "matches": found.as_ref().map(|f| f.matches.iter().map(|i| item_json(i, payloads.then(|| preview(&i.payload, 240)))).collect::<Vec<_>>()),
                "scanned": found.as_ref().map(|f| f.scanned),
                "stopped_by": found.as_ref().map(|f| f.stop.as_str()),
                "complete": found.as_ref().map(|f| f.stop == Stop::End),
                "next": found.as_ref().and_then(|f| f.next.as_ref().map(Cursor::as_str)),
            })
        },
    )
}

impl View<'_> {
    fn search(
        &self,
        queue: &QueueName,
        state: ListState,
        text: &str,
        limit: u32,
        found: Option<&Found>,
        later: bool,
    ) -> Markup {
        let here = self.link(&format!("/queues/{}/search", segment(queue.as_str())));
        let now = tenure_core::Clock::now(&*self.cfg.clock);
        let body = html! {
            h1.wrap { "Search queue " a href=(self.queue_link(queue)) { code { (queue) } } }
            form.filter #search method="get" action=(here) {
                label { "Text " input type="search" name="q" value=(text) maxlength=(MAX_QUERY_CHARS) size="30"; }
                label { "In " select name="state" {
                    @for s in ListState::ALL {
                        option value=(s.as_str()) selected[s == state] { (s.as_str()) }
                    }
                } " items" }
                label { "At most " input type="number" name="limit" value=(limit) min="1" max=(MAX_LIMIT); " matches" }
                button type="submit" { "Search" }
            }
            p.meta {
                "Looks for the text, ignoring case, in each item's last error"
                @if self.cfg.list_payloads { " and the first " (PAYLOAD_BYTES / 1024) " KiB of its payload" }
                @else { " (payloads are not searched: listings here do not show them)" }
                ", oldest first, reading at most " (SCAN_MAX) " items or for " (TIME_BUDGET.as_secs()) " s per search."
            }
            @if let Some(f) = found {
                p #search-status .warn[f.stop != Stop::End] {
                    (f.matches.len()) " match" @if f.matches.len() != 1 { "es" } " in " (f.scanned) " " (state.as_str()) " items read"
                    @if later { " (from where the last search stopped)" }
                    ". "
                    @match f.stop {
                        Stop::End => { "Every " (state.as_str()) " item was read." }
                        Stop::Limit => { "Stopped at " (limit) " matches: the items after the last match were not read." }
                        Stop::ScanCap => { "Stopped after " (SCAN_MAX) " items: the rest of the queue was not read." }
                        Stop::Time => { "Stopped after " (TIME_BUDGET.as_secs()) " s: the rest of the queue was not read." }
                    }
                    @if let Some(next) = &f.next {
                        " " a #search-more href=(format!("{here}?q={}&state={}&limit={limit}&after={}", query_value(text), state.as_str(), query_value(next.as_str()))) { "Search the rest →" }
                    }
                }
                @if !f.matches.is_empty() {
                    div.scroll { table #items {
                        thead { tr { th { "Item" } th { "Attempt" } th { "Enqueued" } @if self.cfg.list_payloads { th { "Payload" } } th { "Last error" } } }
                        tbody {
                            @for item in &f.matches {
                                tr data-id=(item.id) {
                                    td { a.id href=(self.item_link(item.id)) { (item.id) } }
                                    td.num { (item.attempt) " / " (item.max_attempts) }
                                    td title=(iso(item.created_at)) { (relative(item.created_at, now)) }
                                    @if self.cfg.list_payloads {
                                        @let (p, _) = preview(&item.payload, 240);
                                        td.payload { code { (clip(&p, 60)) } }
                                    }
                                    td.error { @if let Some(e) = &item.last_error { (clip(e, 120)) } }
                                }
                            }
                        }
                    } }
                }
            }
        };
        self.page(&format!("Search {queue}"), false, body)
    }
}
