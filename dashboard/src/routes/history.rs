//! Work over time: every queue's history (`/history`) and one queue's
//! (`/queues/{queue}/history`), each for the last hour or day (`?span=`), as an SVG
//! chart and as JSON; and the charts the overview and the queue page embed.
//!
//! The figures are the store's ([`Store::history`](tenure_core::Store::history)):
//! what workers added, so they survive a dashboard restart and every dashboard on the
//! store shows the same. Each queue's read is shared by every viewer for the cache's
//! reuse period, like the counts.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::json;
use tenure_core::{HistoryParams, HistoryPoint, QueueName, Timestamp};

use crate::chart::{counts_json, merge, Series, Span};
use crate::ctx::{known_queue, snapshot, Ctx};
use crate::text::{iso, segment};
use crate::view::View;
use crate::AppState;

/// The routes of this family.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/history", get(all))
        .route("/queues/{queue}/history", get(one))
}

#[derive(Debug, Default, Deserialize)]
struct SpanQuery {
    span: Option<String>,
}

/// `queue`'s minutes over `span` ending at `now`, read once per reuse period.
pub(crate) async fn points(
    state: &AppState,
    queue: &QueueName,
    span: Span,
    now: Timestamp,
) -> tenure_core::Result<Vec<HistoryPoint>> {
    let (since, until) = span.range(now);
    let key = format!("{queue}\u{0}{}\u{0}{}", span.as_str(), since.as_micros());
    let read = state
        .store
        .history(HistoryParams::new(queue.clone(), since, until));
    state.cache.history(key, read).await
}

/// Every listed queue's history over `span`, each queue's own and their sum.
pub(crate) async fn series_of(
    state: &AppState,
    queues: &[QueueName],
    span: Span,
) -> tenure_core::Result<(Series, Vec<(QueueName, Series)>)> {
    let now = state.config.clock.now();
    let mut all = Vec::new();
    let mut each = Vec::with_capacity(queues.len());
    for q in queues {
        let p = points(state, q, span, now).await?;
        merge(&mut all, &p);
        each.push((q.clone(), Series::new(span, now, &p)));
    }
    Ok((Series::new(span, now, &all), each))
}

// A refusal is the response itself, returned at once by the handler.
#[allow(clippy::result_large_err)]
fn span_of(ctx: &Ctx, state: &AppState, q: &SpanQuery) -> Result<Span, Response> {
    Span::parse(q.span.as_deref())
        .map_err(|e| ctx.fail(state, StatusCode::BAD_REQUEST, "invalid_input", &e))
}

async fn all(State(state): State<AppState>, ctx: Ctx, Query(q): Query<SpanQuery>) -> Response {
    let span = match span_of(&ctx, &state, &q) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let snap = match snapshot(&state).await {
        Ok(s) => s,
        Err(e) => return ctx.store_error(&state, &e),
    };
    let names: Vec<QueueName> = snap.queues.iter().map(|(q, _)| q.clone()).collect();
    let (total, each) = match series_of(&state, &names, span).await {
        Ok(s) => s,
        Err(e) => return ctx.store_error(&state, &e),
    };
    ctx.html_or_json(
        || ctx.view(&state).history_page(None, &total, &each),
        || {
            json!({
                "as_of": iso(state.config.clock.now()),
                "all": total.json(),
                "queues": each.iter().map(|(q, s)| json!({
                    "queue": q.as_str(),
                    "total": counts_json(&s.total()),
                })).collect::<Vec<_>>(),
            })
        },
    )
}

async fn one(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(raw): Path<String>,
    Query(q): Query<SpanQuery>,
) -> Response {
    let span = match span_of(&ctx, &state, &q) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let queue = match known_queue(&ctx, &state, &raw, false).await {
        Ok(q) => q,
        Err(r) => return r,
    };
    let (series, _) = match series_of(&state, std::slice::from_ref(&queue), span).await {
        Ok(s) => s,
        Err(e) => return ctx.store_error(&state, &e),
    };
    ctx.html_or_json(
        || ctx.view(&state).history_page(Some(&queue), &series, &[]),
        || {
            json!({
                "queue": queue.as_str(),
                "as_of": iso(state.config.clock.now()),
                "history": series.json(),
            })
        },
    )
}

impl View<'_> {
    /// The history section a page embeds: the chart and the links to either span.
    pub(crate) fn history_section(&self, queue: Option<&QueueName>, series: &Series) -> Markup {
        let base = match queue {
            Some(q) => self.link(&format!("/queues/{}/history", segment(q.as_str()))),
            None => self.link("/history"),
        };
        let label = queue.map_or_else(|| "every queue".to_owned(), |q| format!("queue {q}"));
        html! {
            section.history #history {
                h2 { "Work over time" }
                nav.tabs {
                    @for s in [Span::Hour, Span::Day] {
                        a class=[(s == series.span).then_some("on")] href=(format!("{base}?span={}", s.as_str())) {
                            "last " (s.as_str())
                        }
                    }
                }
                (series.chart(&label))
            }
        }
    }

    fn history_page(
        &self,
        queue: Option<&QueueName>,
        series: &Series,
        each: &[(QueueName, Series)],
    ) -> Markup {
        let body = html! {
            @match queue {
                Some(q) => h1.wrap { "History of queue " a href=(self.queue_link(q)) { code { (q) } } },
                None => h1 { "History" },
            }
            p.meta { "Finished, failed (retrying) and dead attempts per " (if series.span == Span::Hour { "minute" } else { "15 minutes" }) ", as workers report them to the store every few seconds." }
            (self.history_section(queue, series))
            @if !each.is_empty() {
                div.scroll { table #history-queues {
                    thead { tr { th { "Queue" } th.num { "Finished" } th.num { "Failed" } th.num { "Dead" } } }
                    tbody {
                        @for (q, s) in each {
                            @let t = s.total();
                            tr data-queue=(q.as_str()) {
                                td.name { a.clip href=(self.link(&format!("/queues/{}/history?span={}", segment(q.as_str()), s.span.as_str()))) title=(q.as_str()) { (q) } }
                                td.num { (t.finished) }
                                td.num.warn[t.failed > 0] { (t.failed) }
                                td.num.dead.warn[t.dead > 0] { (t.dead) }
                            }
                        }
                    }
                } }
            }
        };
        let title = match queue {
            Some(q) => format!("History of {q}"),
            None => "History".to_owned(),
        };
        self.page(&title, true, body)
    }
}
