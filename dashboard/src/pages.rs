//! The HTML of every page, rendered with maud (every value escaped).

use maud::{html, Markup, DOCTYPE};
use tenure_core::{
    CancelOutcome, Item, ItemId, ItemPage, LeaseInfo, ListOrder, ListState, QueueCounts, QueueName,
    Timestamp,
};

use crate::access::{Access, Action};
use crate::cache::{LeaderView, Snapshot};
use crate::config::DashboardConfig;
use crate::notice::Shown;
use crate::text::{clip, iso, preview, query_value, relative, segment, span};

/// Payload bytes read for a listing's preview column (and its JSON).
pub(crate) const LIST_PREVIEW_BYTES: usize = 240;
/// Characters of a payload or last error shown in a listing's cell.
const CELL_CHARS: usize = 60;
/// Characters of a last error in its cell's title (on hover).
const TITLE_CHARS: usize = 1000;

/// How old the oldest ready item may be before its age is flagged.
const LAG_WARN_SECS: u64 = 60;

/// What every page knows: the configuration and what this viewer may do.
pub(crate) struct View<'a> {
    pub(crate) cfg: &'a DashboardConfig,
    pub(crate) access: &'a Access,
    /// The one-time notice of the action that led here.
    pub(crate) notice: Option<&'a Shown>,
}

impl View<'_> {
    fn link(&self, path: &str) -> String {
        self.cfg.link(path)
    }

    fn queue_link(&self, queue: &QueueName) -> String {
        self.link(&format!("/queues/{}", segment(queue.as_str())))
    }

    fn item_link(&self, id: impl std::fmt::Display) -> String {
        self.link(&format!("/items/{id}"))
    }

    fn can(&self, action: Action) -> bool {
        self.access.allows(action)
    }

    /// A queue's name as a link, cut with an ellipsis when long; the whole name on
    /// hover.
    fn queue_name_link(&self, queue: &QueueName) -> Markup {
        let href = self.queue_link(queue);
        html! { a.clip href=(href) title=(queue.as_str()) { (queue) } }
    }

    /// The notice of the action that led here, above the page's refreshed content.
    fn notice(&self) -> Markup {
        html! {
            @match self.notice {
                Some(Shown::Fresh(n)) => {
                    div #notice.notice role="status" {
                        strong { (n.title) } " " span.text { (n.text) }
                        @if !n.rows.is_empty() {
                            div.scroll { table #outcomes {
                                thead { tr { th { "Item" } th { "Outcome" } } }
                                tbody { @for (id, o) in &n.rows { tr { td { code { (id) } } td { (o) } } } }
                            } }
                        }
                    }
                }
                Some(Shown::Gone) => {
                    div #notice.notice.gone role="status" {
                        "This result was shown once already; reloading the page did not repeat the action."
                    }
                }
                None => {}
            }
        }
    }

    /// The whole page around `body`; `refresh` marks pages the script may reload.
    #[allow(clippy::needless_pass_by_value)] // every caller hands its body over
    pub(crate) fn page(&self, title: &str, refresh: bool, body: Markup) -> Markup {
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (title) " · Tenure" }
                    link rel="stylesheet" href=(self.link("/assets/app.css"));
                    script src=(self.link("/assets/app.js")) defer {}
                }
                body data-refresh=[refresh.then_some("on")] {
                    header.top {
                        a.brand href=(self.link("/")) { "Tenure" }
                        @if let Some(env) = &self.cfg.environment {
                            span.env title="environment" { (env) }
                        }
                        nav {
                            a href=(self.link("/")) { "Overview" }
                            a href=(self.link("/leases")) { "Leases" }
                        }
                        form.find method="get" action=(self.link("/find")) {
                            input type="search" name="id" placeholder="item id" aria-label="Find an item by id" required;
                            button type="submit" { "Find" }
                        }
                        @if refresh {
                            label.refresh hidden {
                                "Refresh "
                                select #refresh name="refresh" {
                                    @for s in &self.cfg.refresh_choices {
                                        option value=(s) { @if *s == 0 { "off" } @else { "every " (s) " s" } }
                                    }
                                }
                            }
                        }
                        @if !matches!(self.access, Access::Full) {
                            span.mode { "read-only" @if let Access::Actions(_) = self.access { " (some actions)" } }
                        }
                    }
                    (self.notice())
                    main #content { (body) }
                }
            }
        }
    }

    /// A page that only says something: an error, a result.
    pub(crate) fn message(&self, title: &str, text: &str, back: Option<(&str, String)>) -> Markup {
        self.page(
            title,
            false,
            html! {
                h1 { (title) }
                p.message { (text) }
                @if let Some((label, href)) = back { p { a href=(href) { (label) } } }
            },
        )
    }

    fn pause_form(&self, queue: &QueueName, paused: bool, back: &str) -> Markup {
        let (action, label) = if paused {
            (Action::Resume, "Resume")
        } else {
            (Action::Pause, "Pause")
        };
        html! {
            @if self.can(action) {
                form.inline method="post" action=(format!("{}/{}", self.queue_link(queue), action.as_str())) {
                    input type="hidden" name="back" value=(back);
                    button type="submit" name="do" value=(action.as_str()) data-queue=(queue.as_str()) { (label) }
                }
            }
        }
    }

    pub(crate) fn overview(&self, snap: &Snapshot, store: &str) -> Markup {
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

    fn state_link(&self, queue: &QueueName, state: ListState) -> String {
        format!("{}?state={}", self.queue_link(queue), state.as_str())
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn queue(
        &self,
        queue: &QueueName,
        counts: Option<&QueueCounts>,
        state: ListState,
        order: ListOrder,
        page: &ItemPage,
        after: Option<&str>,
        last: bool,
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
                            @if selectable { td { input type="checkbox" name="id" value=(item.id) aria-label=(format!("select {}", item.id)); } }
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
            @if last { p.meta #last-page { "The last page: the " (if order == ListOrder::NewestFirst { "oldest" } else { "newest" }) " " (page.items.len()) " items." } }
            @else if after.is_some() { p.meta { "A later page." } }
            @if page.items.is_empty() {
                p.empty { "No " (state.as_str()) " items." }
            } @else if selectable {
                form #select method="post" action=(self.link(if state == ListState::Dead { "/items/requeue" } else { "/items/cancel" })) {
                    input type="hidden" name="back" value=(back);
                    (rows)
                    p.actions {
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
        };
        self.page(&format!("Queue {queue}"), true, body)
    }

    pub(crate) fn item(&self, item: &Item, now: Timestamp, show_payload: bool) -> Markup {
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

    pub(crate) fn leases(
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

    /// The count before a requeue or discard by filter, and the form that runs it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dead_preview(
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

    /// Asks before a cancel or discard by id: the same form again with `confirm=yes`.
    pub(crate) fn confirm(&self, action: Action, ids: &[ItemId], back: &str) -> Markup {
        let n = ids.len() as u64;
        let (title, warning, button) = if action == Action::Discard {
            (
                "Discard dead items?",
                "Discarded items are deleted for good.",
                format!("Discard {}", items(n)),
            )
        } else {
            (
                "Cancel items?",
                "Cancelled items are deleted and never run (a running item is left alone).",
                format!("Cancel {}", items(n)),
            )
        };
        let body = html! {
            h1 { (title) }
            p.message #confirm-text { (warning) " " (capital(&items(n))) ":" }
            ul #confirm-ids { @for id in ids { li { code { (id) } } } }
            form #confirm method="post" action=(self.link(&format!("/items/{}", action.as_str()))) {
                @for id in ids { input type="hidden" name="id" value=(id); }
                input type="hidden" name="back" value=(back);
                input type="hidden" name="confirm" value="yes";
                button.danger type="submit" { (button) } " "
                a href=(back) { "Keep them" }
            }
        };
        self.page(title, false, body)
    }
}

/// What a cancel outcome means, for people.
pub(crate) fn cancel_text(o: &CancelOutcome) -> String {
    match o {
        CancelOutcome::Cancelled => "cancelled".to_owned(),
        CancelOutcome::Running { attempt, owner } => format!(
            "not cancelled: running (attempt {attempt}, owner {owner}); cancel does not stop a running item"
        ),
        CancelOutcome::Dead => "not cancelled: dead (discard it instead)".to_owned(),
        CancelOutcome::Done => "not cancelled: already finished".to_owned(),
        CancelOutcome::NotFound => "not found".to_owned(),
    }
}

/// The short name of a cancel outcome, for JSON.
pub(crate) fn cancel_name(o: &CancelOutcome) -> &'static str {
    match o {
        CancelOutcome::Cancelled => "cancelled",
        CancelOutcome::Running { .. } => "running",
        CancelOutcome::Dead => "dead",
        CancelOutcome::Done => "done",
        CancelOutcome::NotFound => "not_found",
    }
}

/// The listing an item belongs to at `now` (or its stored state when finished).
pub(crate) fn list_state(item: &Item, now: Timestamp) -> &'static str {
    ListState::ALL
        .into_iter()
        .find(|s| s.matches(item, now))
        .map_or(item.state.as_str(), ListState::as_str)
}

pub(crate) fn order_str(order: ListOrder) -> &'static str {
    match order {
        ListOrder::NewestFirst => "newest",
        _ => "oldest",
    }
}

pub(crate) fn count_of(c: &QueueCounts, s: ListState) -> u64 {
    match s {
        ListState::Ready => c.ready,
        ListState::Scheduled => c.scheduled,
        ListState::Running => c.running,
        ListState::Dead => c.dead,
    }
}

/// `1 item`, `2 items`.
pub(crate) fn items(n: u64) -> String {
    if n == 1 {
        "1 item".to_owned()
    } else {
        format!("{n} items")
    }
}

fn capital(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

fn paused_badge(paused: bool) -> Markup {
    html! {
        @if paused { span.badge.paused { "paused" } } @else { span.badge.active { "active" } }
    }
}

fn lag_cell(c: &QueueCounts) -> Markup {
    html! {
        @match c.oldest_ready_age {
            Some(age) => td.lag.warn[age.as_secs() >= LAG_WARN_SECS] { (span(age)) },
            None => td.lag { "-" },
        }
    }
}

fn expiry(t: Timestamp, now: Timestamp) -> Markup {
    html! {
        (relative(t, now))
        @if t <= now { " " span.badge.expired { "expired, not recovered" } }
    }
}
