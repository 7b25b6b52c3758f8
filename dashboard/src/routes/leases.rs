//! The live leases (`/leases`), soonest expiry first, of one queue or of all; the
//! JSON of a lease and the view.

use axum::extract::{Query, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Value};
use tenure_core::{Cursor, LeaseInfo, LeaseListParams, QueueName, Timestamp, MAX_PAGE};

use crate::ctx::{parse_queue, snapshot, Ctx};
use crate::text::{iso, query_value, relative, segment};
use crate::view::View;
use crate::AppState;

/// The routes of this family.
pub(super) fn router() -> Router<AppState> {
    Router::new().route("/leases", get(leases))
}

#[derive(Debug, Default, Deserialize)]
struct LeasesQuery {
    queue: Option<String>,
    after: Option<String>,
}

async fn leases(State(state): State<AppState>, ctx: Ctx, Query(q): Query<LeasesQuery>) -> Response {
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

impl View<'_> {
    fn leases(
        &self,
        queue: Option<&QueueName>,
        queues: &[QueueName],
        leases: &[LeaseInfo],
        as_of: Timestamp,
        next: Option<String>,
        partial: bool,
    ) -> Markup {
        let body = html! {
            h1 { "Leases" @if let Some(q) = queue { " of " code { (q) } } }
            nav.tabs {
                a href=(self.link("/leases")) class=[queue.is_none().then_some("on")] { "all queues" }
                @for q in queues {
                    a.clip href=(format!("{}?queue={}", self.link("/leases"), query_value(q.as_str()))) class=[(Some(q) == queue).then_some("on")] title=(q.as_str()) { (q) }
                }
            }
            p.meta { "Soonest expiry first, as of " (iso(as_of)) ". A lease past its expiry waits for recovery (its item is claimable again once recovered)." }
            @if partial { p.meta { "Each queue's first " (self.cfg.page_size) " leases, merged; pick a queue to page through all of them." } }
            @if leases.is_empty() {
                p.empty { "No live leases." }
            } @else {
                div.scroll { table #leases {
                    thead { tr { th { "Item" } th { "Queue" } th { "Attempt" } th { "Owner" } th { "Expires" } th { "Renewals" } } }
                    tbody {
                        @for l in leases {
                            @let expired = l.expires_at <= as_of;
                            tr class=[expired.then_some("expired")] {
                                td { a.id href=(self.item_link(l.token.id)) { (l.token.id) } }
                                td.name { (self.queue_name_link(&l.queue)) }
                                td.num { (l.token.attempt) }
                                td { (l.owner) }
                                td title=(iso(l.expires_at)) {
                                    (relative(l.expires_at, as_of))
                                    @if expired { " " span.badge.expired { "expired, not recovered" } }
                                }
                                td.num { (l.renewals) " / " (l.max_renewals) }
                            }
                        }
                    }
                } }
            }
            @if let Some(n) = next { p.paging { a #next href=(n) { "Next page →" } } }
        };
        self.page("Leases", true, body)
    }
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
