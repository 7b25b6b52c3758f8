//! The overview (`/`): every queue's counts, the instances and the leader; its JSON
//! twin and its view.

use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use maud::{html, Markup};
use serde_json::json;
use tenure_core::{ListState, QueueCounts, QueueName};

use super::queues::queue_json;
use crate::cache::{LeaderView, Snapshot};
use crate::chart::{Series, Span};
use crate::ctx::{snapshot, Ctx};
use crate::text::{iso, relative, span};
use crate::view::{paused_badge, View};
use crate::AppState;

/// The routes of this family.
pub(super) fn router() -> Router<AppState> {
    Router::new().route("/", get(overview))
}

async fn overview(State(state): State<AppState>, ctx: Ctx) -> Response {
    let snap = match snapshot(&state).await {
        Ok(s) => s,
        Err(e) => return ctx.store_error(&state, &e),
    };
    let store = state.store.name();
    let names: Vec<QueueName> = snap.queues.iter().map(|(q, _)| q.clone()).collect();
    let history = match super::history::series_of(&state, &names, Span::Hour).await {
        Ok((all, _)) => all,
        Err(e) => return ctx.store_error(&state, &e),
    };
    ctx.html_or_json(
        || ctx.view(&state).overview(&snap, store, &history),
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
                "history": history.json(),
            })
        },
    )
}

impl View<'_> {
    fn overview(&self, snap: &Snapshot, store: &str, history: &Series) -> Markup {
        let now = snap.as_of;
        let back = self.link("/");
        let body = html! {
            h1 { "Queues" }
            p.meta {
                (store) " store · counts as of " (iso(now)) ", read " (span(snap.age())) " ago; every viewer shares one read per "
                (span(self.cfg.counts_ttl))
            }
            @if snap.queues.is_empty() {
                p.empty { "No queues: nothing has been enqueued in this store." }
            } @else {
                div.scroll { table #queues {
                    thead { tr {
                        th { "Queue" } th { "State" } th { span.sr { "Pause or resume" } }
                        th.num { "Ready" } th.num { "Scheduled" } th.num { "Running" }
                        th.num { "Dead" } th { "Oldest ready" }
                    } }
                    tbody {
                        @for (q, c) in &snap.queues {
                            tr data-queue=(q.as_str()) {
                                td.name { (self.queue_name_link(q)) }
                                td.state { (paused_badge(c.paused)) }
                                td.act { (self.pause_form(q, c.paused, &back)) }
                                td.num.ready { a href=(self.state_link(q, ListState::Ready)) { (c.ready) } }
                                td.num.scheduled { a href=(self.state_link(q, ListState::Scheduled)) { (c.scheduled) } }
                                td.num.running { a href=(self.state_link(q, ListState::Running)) { (c.running) } }
                                td.num.dead.warn[c.dead > 0] { a href=(self.state_link(q, ListState::Dead)) { (c.dead) } }
                                (lag_cell(c))
                            }
                        }
                    }
                } }
            }
            @if !snap.queues.is_empty() { (self.history_section(None, history)) }
            h2 { "Instances" }
            @if snap.instances.is_empty() {
                p.empty { "No instances: no worker is registered." }
            } @else {
                div.scroll { table #instances {
                    thead { tr { th { "Instance" } th { "Started" } th { "Last heartbeat" } } }
                    tbody {
                        @for i in &snap.instances {
                            @let stale = now.duration_since(i.last_seen) > tenure_core::DEFAULT_STALE_AFTER;
                            tr class=[stale.then_some("stale")] {
                                td { (i.id) }
                                td title=(iso(i.started_at)) { (relative(i.started_at, now)) }
                                td title=(iso(i.last_seen)) { (relative(i.last_seen, now)) @if stale { " (stale)" } }
                            }
                        }
                    }
                } }
            }
            h2 { "Leader" }
            p #leader {
                code { (self.cfg.leader_name) } ": "
                @match &snap.leader {
                    LeaderView::Held { holder, term, expires_at } => {
                        strong { (holder) } ", term " strong.term { (term) } ", lease ends "
                        span title=(iso(*expires_at)) { (relative(*expires_at, now)) }
                    }
                    LeaderView::Free => { "none: no worker holds the maintenance lease." }
                }
            }
        };
        self.page("Overview", true, body)
    }
}

/// How old the oldest ready item may be before its age is flagged.
const LAG_WARN_SECS: u64 = 60;

fn lag_cell(c: &QueueCounts) -> Markup {
    html! {
        @match c.oldest_ready_age {
            Some(age) => td.lag.warn[age.as_secs() >= LAG_WARN_SECS] { (span(age)) },
            None => td.lag { "-" },
        }
    }
}
