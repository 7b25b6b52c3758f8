//! A web dashboard over any Tenure store: see every queue, steer the work.
//!
//! [`router`] returns an [`axum::Router`] that an application mounts under any prefix,
//! or that `tenure dashboard URL` serves on its own. Pages are rendered on the server
//! (maud, every value escaped); the one stylesheet and the one small script are
//! compiled into the binary; every action is a plain form POST that works with
//! JavaScript off. The script only refreshes the page's content at the interval the
//! user picks, and stops while the tab is hidden.
//!
//! # Pages
//!
//! | path | page | JSON twin |
//! |---|---|---|
//! | `/` | every queue's ready / scheduled / running / dead counts, paused flag and oldest ready age; the instances and their last heartbeat; the leader and its term | `/?format=json` |
//! | `/queues/{queue}?state=&order=&after=&last=&select=` | a queue's items in one state, oldest or newest first, paged by cursor (`last=1`: the last page; `select=all`: every item of the page selected for the bulk cancel, requeue or discard), with the start of each payload and last error ([`DashboardConfig::list_payloads`]); 404 for a queue `Store::queue_list` does not name | `?format=json` |
//! | `/items/{id}?payload=show` | one item: attempt of max, stalls, renewals, owner, lease expiry, run_at, keys, last error; the payload preview only when asked for | `?format=json` |
//! | `/queues/{queue}/limits` | a queue's limits (G16..G18): its settings, its running items against the queue-wide limit, the limit keys with running items (those at their limit first) and the leases under each; read-only, and a shorter *Limits* section on the queue page (in its JSON as `limits`) | `?format=json` |
//! | `/leases?queue=&after=` | live leases, soonest expiry first; expired leases nobody recovered yet are marked | `?format=json` |
//! | `/find?id=` | find an item by id (the box on every page) | `?format=json` |
//! | `/queues/{queue}/search?q=&state=&limit=&after=` | the items of one state whose last error (and payload, where listings show payloads) holds `q`, ignoring case; at most `limit` matches (50, up to 500), 10,000 items read and 2 s, and the page says which bound stopped it, with a link that goes on from there | `?format=json` |
//! | `/history?span=hour\|day` | work over time: finished, failed (retrying) and dead attempts per minute (last hour) or per 15 minutes (last day), summed over every queue as an SVG chart, and each queue's totals; the overview embeds the last hour's chart | `?format=json` |
//! | `/queues/{queue}/history?span=hour\|day` | one queue's work over time; the queue page embeds the last hour's chart | `?format=json` |
//! | `/queues/{queue}/dead?action=&older_than=&limit=` | what a requeue or discard by filter would take, counted before it runs | `?format=json` |
//! | `/healthz` | `200 up` when the store answers, `503 down` when it does not (nothing else: no file, host or error) | text |
//!
//! A request asks for JSON with `?format=json` or `Accept: application/json`.
//!
//! `{queue}` is one path segment, percent-encoded; a name of dots only is written
//! behind a `~` (`/queues/~%2E%2E` is the queue `..`), because browsers resolve a
//! `..` segment away even when it is percent-encoded. Pages link that way; `~` is
//! never part of a queue name.
//!
//! # Actions
//!
//! All by POST, each refused (403) unless the request is same-origin
//! (`Sec-Fetch-Site: same-origin`, or an `http://` `Origin` that matches `Host`;
//! `https://` only for a host configured with it), unless the dashboard is read-only,
//! and unless the [`Authorizer`] allows that [`Action`]:
//!
//! | path | action |
//! |---|---|
//! | `/queues/{queue}/pause`, `/queues/{queue}/resume` | [`Action::Pause`], [`Action::Resume`] |
//! | `/items/cancel` (`id` repeated, `confirm=yes`) | [`Action::Cancel`]: ready or scheduled items, an outcome per id |
//! | `/items/requeue`, `/items/discard` (`id` repeated; a discard `confirm=yes`) | [`Action::Requeue`], [`Action::Discard`] of dead items by id |
//! | `/queues/{queue}/dead/requeue`, `/queues/{queue}/dead/discard` (`older_than`, `limit`) | by filter, one bounded batch; a discard needs the queue's name typed in `confirm` (else 400) |
//!
//! A cancel or discard by id without `confirm=yes` runs nothing: it answers a page
//! that asks first (JSON: 400 `unconfirmed`). Pause, resume and the filters answer 404
//! for a queue the store does not list, so none of them creates a queue.
//!
//! Every action that ran answers `303 See Other` to the page it came from (the form's
//! `back`, only ever a path under the base path) with a one-time `notice`: that page
//! shows the result once, and a reload shows only that it was shown, never running the
//! action again (POST-redirect-GET). With JSON asked for, an action answers its result
//! as JSON instead.
//!
//! Each action emits one `tracing` event (target `tenure_dashboard::audit`) and bumps
//! the `tenure_dashboard_actions_total` counter (labels `action`, `actor`, `outcome`).
//!
//! # Load on the store
//!
//! The overview's counts, instances and leader are read at most once per
//! [`DashboardConfig::counts_ttl`] per router, however many tabs are open: one shared
//! cache, refreshed by one request while the others wait for it. Listings are bounded
//! pages ([`DashboardConfig::page_size`]). An action clears the cache, so its effect
//! shows at once.
//!
//! # Safety
//!
//! Only the `Host` names the dashboard is configured for are answered: loopback
//! (`localhost`, `127.0.0.1`, `[::1]`) by default, plus each
//! [`DashboardConfig::allowed_host`]; any other answers `421 Misdirected Request`
//! before any handler runs, `/healthz` and the assets included. A web page that
//! rebinds its own DNS name to this machine is same-origin in the browser's eyes;
//! the `Host` it sends is the one thing that gives it away. Mounted in an application
//! reached by another name, give that name.
//!
//! Responses carry a strict content security policy (`default-src 'none'`, scripts and
//! styles from the dashboard only, no inline script, `frame-ancestors 'none'`),
//! `X-Content-Type-Options: nosniff`, `Cache-Control: no-store`, `Referrer-Policy:
//! same-origin` and `X-Robots-Tag: noindex`. Mounted in an application, put the
//! application's own auth layer in front and give an [`Authorizer`]; standalone,
//! [`BasicAuth`] guards every page but `/healthz`, and a client (by peer address,
//! from [`serve`]) that failed it five times waits 1 s, doubling to 60 s, answered
//! `429` meanwhile. Action bodies are read within [`DashboardConfig::body_timeout`];
//! [`serve`] drops a client that does not finish its headers in time.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn tenure_core::Store>) -> Result<(), Box<dyn std::error::Error>> {
//! use tenure_dashboard::{Access, DashboardConfig};
//!
//! let config = DashboardConfig::new()
//!     .base_path("/ops/tenure")
//!     .allowed_host("https://ops.example.com")? // the proxy's name, served over TLS
//!     .environment("production")
//!     .authorizer(|parts: &axum::http::request::Parts| {
//!         // The host's auth layer put its user in the extensions; look at it here.
//!         if parts.headers.contains_key("x-admin") { Access::Full } else { Access::ReadOnly }
//!     });
//! let app = axum::Router::new().nest("/ops/tenure", tenure_dashboard::router(store, config));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod access;
mod cache;
mod chart;
mod config;
mod ctx;
mod hosts;
mod notice;
mod routes;
mod security;
mod serve;
mod text;
mod view;

use std::sync::Arc;

use axum::Router;
use tenure_core::Store;

pub use access::{Access, Action, Authorizer};
pub use config::{BasicAuth, DashboardConfig};
pub use serve::{serve, ServeOptions};

/// What every handler shares: the store, the configuration and the one counts cache.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) config: DashboardConfig,
    pub(crate) cache: cache::CountsCache,
    pub(crate) notices: notice::Notices,
    pub(crate) throttle: security::Throttle,
}

pub(crate) type AppState = Arc<Shared>;

/// The dashboard over `store`, to mount under [`DashboardConfig::base_path`] (or serve
/// at the root). Every request of this router shares one counts cache.
pub fn router(store: Arc<dyn Store>, config: DashboardConfig) -> Router {
    let cache = cache::CountsCache::new(config.counts_ttl);
    let state: AppState = Arc::new(Shared {
        store,
        config,
        cache,
        notices: notice::Notices::default(),
        throttle: security::Throttle::default(),
    });
    let guarded = routes::guarded()
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            security::read_body,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            security::same_origin_only,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            security::basic_auth,
        ));
    routes::open()
        .merge(guarded)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            security::allowed_host,
        ))
        .layer(axum::middleware::from_fn(security::headers))
        .with_state(state)
}
