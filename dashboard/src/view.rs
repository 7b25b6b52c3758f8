//! What every page shares, rendered with maud (every value escaped): the [`View`]
//! of a request (configuration, access, notice), the frame around each page, the
//! message page, the confirmation of an action by id, and the small pieces several
//! pages show (links, badges, counts in words). Each page's own view is in its
//! module under `routes/`.

use maud::{html, Markup, DOCTYPE};
use tenure_core::{ItemId, ListState, QueueName, Timestamp};

use crate::access::{Access, Action};
use crate::config::DashboardConfig;
use crate::notice::Shown;
use crate::text::{relative, segment};

/// What every page knows: the configuration and what this viewer may do.
pub(crate) struct View<'a> {
    pub(crate) cfg: &'a DashboardConfig,
    pub(crate) access: &'a Access,
    /// The one-time notice of the action that led here.
    pub(crate) notice: Option<&'a Shown>,
}

impl View<'_> {
    pub(crate) fn link(&self, path: &str) -> String {
        self.cfg.link(path)
    }

    pub(crate) fn queue_link(&self, queue: &QueueName) -> String {
        self.link(&format!("/queues/{}", segment(queue.as_str())))
    }

    pub(crate) fn item_link(&self, id: impl std::fmt::Display) -> String {
        self.link(&format!("/items/{id}"))
    }

    pub(crate) fn can(&self, action: Action) -> bool {
        self.access.allows(action)
    }

    /// A queue's name as a link, cut with an ellipsis when long; the whole name on
    /// hover.
    pub(crate) fn queue_name_link(&self, queue: &QueueName) -> Markup {
        let href = self.queue_link(queue);
        html! { a.clip href=(href) title=(queue.as_str()) { (queue) } }
    }

    /// The notice of the action that led here, above the page's refreshed content.
    pub(crate) fn notice(&self) -> Markup {
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

    pub(crate) fn pause_form(&self, queue: &QueueName, paused: bool, back: &str) -> Markup {
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

    pub(crate) fn state_link(&self, queue: &QueueName, state: ListState) -> String {
        format!("{}?state={}", self.queue_link(queue), state.as_str())
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

/// `1 item`, `2 items`.
pub(crate) fn items(n: u64) -> String {
    if n == 1 {
        "1 item".to_owned()
    } else {
        format!("{n} items")
    }
}

pub(crate) fn capital(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

pub(crate) fn paused_badge(paused: bool) -> Markup {
    html! {
        @if paused { span.badge.paused { "paused" } } @else { span.badge.active { "active" } }
    }
}

pub(crate) fn expiry(t: Timestamp, now: Timestamp) -> Markup {
    html! {
        (relative(t, now))
        @if t <= now { " " span.badge.expired { "expired, not recovered" } }
    }
}
