//! A queue's limits (`/queues/{queue}/limits`, and a section of the queue page): its
//! concurrency, rate and fair-share settings (G16, G17, G18), its running items against
//! the queue-wide limit, the limit keys at their limit first, and the leases running
//! under each key. Read-only: limits change with `tenure limits set | clear` or
//! [`Store::limits_set`](tenure_core::Store::limits_set).
//!
//! What runs under a key comes from the queue's live leases
//! ([`LeaseInfo::limit_key`]), read a page at a time through the shared lease cache: the
//! queue page reads one page, this page up to [`FULL_PAGES`]; past that the view says it
//! is partial. A key is at its limit when its live leases (expired ones not yet
//! recovered included: they hold their slot until then) reach its override or the
//! per-key default.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use maud::{html, Markup};
use serde_json::{json, Map, Value};
use tenure_core::{
    Cursor, ErrorKind, LeaseInfo, LeaseListParams, LimitKey, QueueLimits, QueueName, Rate,
    Timestamp, MAX_PAGE,
};

use crate::ctx::{known_queue, parse_queue, Ctx};
use crate::text::{clip, iso, segment, span};
use crate::view::{expiry, View};
use crate::AppState;

/// Lease pages this page reads at most (of [`MAX_PAGE`] each).
const FULL_PAGES: usize = 10;
/// Lease pages the queue page's section reads.
const SECTION_PAGES: usize = 1;
/// Keys the queue page's section lists (those at their limit first).
const SECTION_KEYS: usize = 10;
/// Leases the section lists per key.
const SECTION_LEASES: usize = 5;
/// Characters of a limit key shown in a cell; the whole key is in its title.
const KEY_CHARS: usize = 48;

/// The routes of this family.
pub(super) fn router() -> Router<AppState> {
    Router::new().route("/queues/{queue}/limits", get(limits))
}

/// A queue's limits and what runs under them, as read at `as_of`.
#[derive(Debug)]
pub(super) struct Usage {
    queue: QueueName,
    /// `None`: the queue has no limits.
    limits: Option<QueueLimits>,
    /// The keys with running items, at their limit first, then the busiest.
    keys: Vec<KeyUsage>,
    /// Live leases read, of every key and none.
    running: usize,
    /// Of them, the leases of items without a limit key.
    unkeyed: usize,
    as_of: Timestamp,
    /// More leases than were read: counts are lower bounds.
    partial: bool,
}

/// One limit key's running items.
#[derive(Debug)]
struct KeyUsage {
    key: LimitKey,
    /// Its override or the per-key default; `None`: no limit.
    limit: Option<u32>,
    leases: Vec<LeaseInfo>,
}

impl KeyUsage {
    fn at_limit(&self) -> bool {
        self.limit
            .is_some_and(|n| self.leases.len() >= usize::try_from(n).unwrap_or(usize::MAX))
    }
}

impl Usage {
    /// True when the running items reach the queue-wide limit.
    fn queue_at_limit(&self) -> bool {
        self.limits
            .as_ref()
            .and_then(|l| l.concurrency)
            .is_some_and(|n| self.running >= usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn keys_at_limit(&self) -> usize {
        self.keys.iter().filter(|k| k.at_limit()).count()
    }
}

/// The limits of `queue` and its live leases by limit key, reading at most `pages`
/// lease pages; `None` on a store without limits (G16 is optional).
pub(super) async fn read(
    state: &AppState,
    queue: &QueueName,
    pages: usize,
) -> tenure_core::Result<Option<Usage>> {
    if !state.store.capabilities().limits {
        return Ok(None);
    }
    let limits = match state.store.limits_get(queue).await {
        Ok(l) => l,
        Err(e) if e.kind() == ErrorKind::Unsupported => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut leases = Vec::new();
    let mut after: Option<Cursor> = None;
    let mut as_of = state.config.clock.now();
    let mut partial = false;
    for n in 0..pages {
        let mut params = LeaseListParams::new(queue.clone()).limit(MAX_PAGE);
        if let Some(c) = after.take() {
            params = params.after(c);
        }
        // The key the leases page gives the same page, so the two share one read.
        let key = format!(
            "{queue}\u{0}{}\u{0}{MAX_PAGE}",
            params.cursor.as_ref().map_or("", Cursor::as_str)
        );
        let page = state
            .cache
            .lease_page(key, state.store.lease_list(params))
            .await?;
        if n == 0 {
            as_of = page.as_of;
        }
        leases.extend(page.leases);
        match page.next {
            Some(c) if n + 1 < pages => after = Some(c),
            Some(_) => partial = true,
            None => break,
        }
    }
    let running = leases.len();
    let mut by_key: BTreeMap<LimitKey, Vec<LeaseInfo>> = BTreeMap::new();
    let mut unkeyed = 0;
    for l in leases {
        match l.limit_key.clone() {
            Some(k) => by_key.entry(k).or_default().push(l),
            None => unkeyed += 1,
        }
    }
    let mut keys: Vec<KeyUsage> = by_key
        .into_iter()
        .map(|(key, mut leases)| {
            leases.sort_by_key(|l| (l.expires_at, l.token.id));
            KeyUsage {
                limit: limits.as_ref().and_then(|l| l.key_limit(&key)),
                key,
                leases,
            }
        })
        .collect();
    keys.sort_by(|a, b| {
        b.at_limit()
            .cmp(&a.at_limit())
            .then(b.leases.len().cmp(&a.leases.len()))
            .then(a.key.cmp(&b.key))
    });
    Ok(Some(Usage {
        queue: queue.clone(),
        limits,
        keys,
        running,
        unkeyed,
        as_of,
        partial,
    }))
}

async fn limits(State(state): State<AppState>, ctx: Ctx, Path(raw): Path<String>) -> Response {
    let queue = match parse_queue(&ctx, &state, &raw) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let usage = match read(&state, &queue, FULL_PAGES).await {
        Ok(u) => u,
        Err(e) => return ctx.store_error(&state, &e),
    };
    // A queue with limits is one even with no items; any other must be known.
    if usage.as_ref().is_none_or(|u| u.limits.is_none()) {
        if let Err(r) = known_queue(&ctx, &state, &raw, false).await {
            return r;
        }
    }
    ctx.html_or_json(
        || ctx.view(&state).limits_page(&queue, usage.as_ref()),
        || match &usage {
            Some(u) => usage_json(u, None),
            None => json!({ "queue": queue.as_str(), "supported": false }),
        },
    )
}

/// A rate as `{"starts", "per_s"}`.
fn rate_json(r: &Rate) -> Value {
    json!({ "starts": r.starts, "per_s": r.per.as_secs_f64() })
}

/// A queue's limits in JSON, as `tenure limits list --json` names their fields.
fn limits_json(l: &QueueLimits) -> Value {
    let overrides: Map<String, Value> = l
        .key_overrides
        .iter()
        .map(|(k, n)| (k.as_str().to_owned(), json!(n)))
        .collect();
    let weights: Map<String, Value> = l
        .weights
        .iter()
        .map(|(k, w)| (k.as_str().to_owned(), json!(w)))
        .collect();
    json!({
        "concurrency": l.concurrency,
        "key_concurrency": l.key_concurrency,
        "key_overrides": overrides,
        "rate": l.rate.as_ref().map(rate_json),
        "key_rate": l.key_rate.as_ref().map(rate_json),
        "weights": weights,
    })
}

/// The JSON of a queue's limits and what runs under them; at most `keys` keys (those
/// at their limit first) when given, with `keys_listed` saying how many there were.
pub(super) fn usage_json(u: &Usage, keys: Option<usize>) -> Value {
    let shown = keys.unwrap_or(usize::MAX);
    json!({
        "queue": u.queue.as_str(),
        "supported": true,
        "limits": u.limits.as_ref().map(limits_json),
        "running": u.running,
        "queue_at_limit": u.queue_at_limit(),
        "unkeyed_running": u.unkeyed,
        "keys_running": u.keys.len(),
        "keys_at_limit": u.keys_at_limit(),
        "keys": u.keys.iter().take(shown).map(|k| json!({
            "key": k.key.as_str(),
            "limit": k.limit,
            "running": k.leases.len(),
            "at_limit": k.at_limit(),
            "leases": k.leases.iter().map(|l| json!({
                "id": l.token.id.to_string(),
                "attempt": l.token.attempt,
                "owner": l.owner.as_str(),
                "expires_at": iso(l.expires_at),
                "expired": l.expires_at <= u.as_of,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "as_of": iso(u.as_of),
        "partial": u.partial,
    })
}

/// The queue page's section reads one lease page.
pub(super) async fn read_section(
    state: &AppState,
    queue: &QueueName,
) -> tenure_core::Result<Option<Usage>> {
    read(state, queue, SECTION_PAGES).await
}

/// The JSON of the queue page's section: its first keys.
pub(super) fn section_json(u: &Usage) -> Value {
    usage_json(u, Some(SECTION_KEYS))
}

fn rate_text(r: &Rate) -> String {
    format!("{} starts per {}", r.starts, span(r.per))
}

impl View<'_> {
    fn limits_link(&self, queue: &QueueName) -> String {
        self.link(&format!("/queues/{}/limits", segment(queue.as_str())))
    }

    /// A key in a cell: cut with an ellipsis when long, the whole key on hover.
    fn key_cell(&self, text: &str) -> Markup {
        let cut = clip(text, KEY_CHARS);
        html! {
            @if cut != text {
                code.clip title=(text) { (cut) }
            } @else {
                code { (text) }
            }
        }
    }

    /// A queue's settings as a table of fields.
    fn limits_fields(&self, l: &QueueLimits) -> Markup {
        let none = || html! { span.meta { "none" } };
        html! {
            table.fields #limit-settings { tbody {
                tr { th { "Queue-wide" } td { @if let Some(n) = l.concurrency { (n) " running" } @else { (none()) } } }
                tr { th { "Per key" } td { @if let Some(n) = l.key_concurrency { (n) " running" } @else { (none()) } } }
                tr { th { "Key overrides" } td {
                    @if l.key_overrides.is_empty() { (none()) }
                    @for (k, n) in &l.key_overrides { span.pair { (self.key_cell(k.as_str())) " " (n) } " " }
                } }
                tr { th { "Rate" } td { @if let Some(r) = &l.rate { (rate_text(r)) } @else { (none()) } } }
                tr { th { "Rate per key" } td { @if let Some(r) = &l.key_rate { (rate_text(r)) } @else { (none()) } } }
                tr { th { "Weights" } td {
                    @if l.weights.is_empty() { (none()) }
                    @for (k, w) in &l.weights { span.pair { (self.key_cell(k.as_str())) " " (w) } " " }
                } }
            } }
        }
    }

    /// The keys with running items and their leases, `keys` and `per_key` at most.
    fn key_table(&self, u: &Usage, keys: usize, per_key: usize) -> Markup {
        html! {
            @if u.keys.is_empty() {
                p.empty { "No running item names a limit key." }
            } @else {
                div.scroll { table #limit-keys {
                    thead { tr { th { "Limit key" } th.num { "Running" } th.num { "Limit" } th { "State" } th { "Running under it" } } }
                    tbody {
                        @for k in u.keys.iter().take(keys) {
                            tr.at-limit[k.at_limit()] data-key=(k.key.as_str()) {
                                td.key { (self.key_cell(k.key.as_str())) }
                                td.num { (k.leases.len()) }
                                td.num { @if let Some(n) = k.limit { (n) } @else { span.meta { "none" } } }
                                td.state { @if k.at_limit() { span.badge.limit { "at its limit" } } }
                                td.leases {
                                    @for l in k.leases.iter().take(per_key) {
                                        span.lease {
                                            a.id href=(self.item_link(l.token.id)) { (l.token.id) }
                                            " " span.meta { "by " (l.owner) ", " }
                                            span.meta title=(iso(l.expires_at)) { (expiry(l.expires_at, u.as_of)) }
                                        }
                                        br;
                                    }
                                    @if k.leases.len() > per_key {
                                        span.meta { "and " (k.leases.len() - per_key) " more" }
                                    }
                                }
                            }
                        }
                    }
                } }
                @if u.keys.len() > keys {
                    p.meta { (u.keys.len() - keys) " more keys with running items." }
                }
            }
        }
    }

    /// The summary line: running against the queue-wide limit, keys at their limit.
    fn usage_line(&self, u: &Usage) -> Markup {
        let queue_limit = u.limits.as_ref().and_then(|l| l.concurrency);
        html! {
            p #limit-usage {
                (u.running) @if u.partial { "+" } " running"
                @if let Some(n) = queue_limit { " of at most " (n) }
                @if u.queue_at_limit() { " " span.badge.limit { "queue at its limit" } }
                "; " (u.keys_at_limit()) " of " (u.keys.len()) " limit keys with running items at their limit"
                @if u.unkeyed > 0 { "; " (u.unkeyed) " running without a key" }
                "."
            }
        }
    }

    /// The queue page's section.
    pub(super) fn limits_section(&self, u: &Usage) -> Markup {
        html! {
            section #limits {
                h2 { "Limits" }
                @match &u.limits {
                    None => p.meta { "No limits: every item is claimed as soon as a worker has room (" code { "tenure limits set" } " sets some)." },
                    Some(l) => (self.limits_fields(l)),
                }
                (self.usage_line(u))
                (self.key_table(u, SECTION_KEYS, SECTION_LEASES))
                p { a #limits-link href=(self.limits_link(&u.queue)) { "Every key and lease under the limits →" } }
            }
        }
    }

    fn limits_page(&self, queue: &QueueName, usage: Option<&Usage>) -> Markup {
        let body = html! {
            h1.wrap { "Limits of queue " code { (queue) } }
            p.meta { a href=(self.queue_link(queue)) { "← Queue " (clip(queue.as_str(), KEY_CHARS)) } }
            @match usage {
                None => p.empty { "This store does not keep queue limits." },
                Some(u) => {
                    @match &u.limits {
                        None => p.meta { "No limits set." },
                        Some(l) => (self.limits_fields(l)),
                    }
                    (self.usage_line(u))
                    (self.key_table(u, usize::MAX, usize::MAX))
                    p.meta {
                        "Read from the live leases as of " (iso(u.as_of))
                        @if u.partial { ", the first " (FULL_PAGES * MAX_PAGE as usize) " of them: counts are at least these" }
                        ". An expired lease holds its slot until it is recovered; a rate's window is not shown. Change limits with "
                        code { "tenure limits set" } " or " code { "tenure limits clear" } "."
                    }
                }
            }
        };
        self.page(&format!("Limits of {queue}"), true, body)
    }
}
