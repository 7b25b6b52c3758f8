//! The headers every response carries, the `Host` check, basic auth with its
//! throttle, the same-origin rule of actions and the body read timeout.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

use crate::hosts::HostRules;
use crate::AppState;

/// Largest action body read (a form of ids).
const MAX_BODY: usize = 1 << 20;

/// The content security policy: nothing but the dashboard's own script, stylesheet and
/// requests; no inline script or style; never framed.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; \
    frame-ancestors 'none'";

/// Adds the security headers to every response.
pub(crate) async fn headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "x-robots-tag",
        HeaderValue::from_static("noindex, nofollow"),
    );
    res
}

/// Answers `421 Misdirected Request` unless the request's `Host` is one the dashboard
/// is configured for; runs before every page, asset and action (DNS rebinding). A
/// request with no `Host` at all (HTTP/1.0) is not from a browser and passes; the
/// authority of an absolute-form request line is checked like `Host`.
pub(crate) async fn allowed_host(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let rules = &state.config.hosts;
    let host = req.headers().get(header::HOST);
    let host_ok = host.is_none_or(|h| h.to_str().is_ok_and(|h| rules.allows(h)));
    let authority_ok = req
        .uri()
        .authority()
        .is_none_or(|a| rules.allows(a.as_str()));
    if host_ok && authority_ok {
        return next.run(req).await;
    }
    tracing::warn!(
        target: "tenure_dashboard::audit",
        method = %req.method(),
        path = req.uri().path(),
        "dashboard request refused: Host not allowed"
    );
    (
        StatusCode::MISDIRECTED_REQUEST,
        "421 Misdirected Request: this dashboard does not answer to this host name. Reach it \
         by a name it is configured for (loopback by default; add a proxy's name with \
         --allowed-host or DashboardConfig::allowed_host).\n",
    )
        .into_response()
}

/// Reads an action's body within [`crate::DashboardConfig::body_timeout`]
/// (`408 Request Timeout` otherwise) and at most 1 MiB (`413`), before any handler
/// runs; GET and HEAD carry no body and pass.
pub(crate) async fn read_body(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if req.method() == Method::GET || req.method() == Method::HEAD {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let read = tokio::time::timeout(
        state.config.body_timeout,
        axum::body::to_bytes(body, MAX_BODY),
    )
    .await;
    match read {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(_)) => (
            StatusCode::PAYLOAD_TOO_LARGE,
            "413 Payload Too Large: an action's form is at most 1 MiB.\n",
        )
            .into_response(),
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            "408 Request Timeout: the request body did not arrive in time; nothing was done.\n",
        )
            .into_response(),
    }
}

/// Failed basic-auth attempts a client may make before it must wait.
pub(crate) const FREE_FAILURES: u32 = 5;
/// The first wait after [`FREE_FAILURES`]; each further failure doubles it.
pub(crate) const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(60);
/// A client with no failure for this long is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// Clients remembered at most; past it the oldest half is forgotten.
const MAX_CLIENTS: usize = 10_000;

/// Failed basic-auth attempts per client (peer IP address; one shared entry when
/// the server gives none): after [`FREE_FAILURES`] failures a client waits, 1 s
/// doubling up to 60 s, and every attempt it makes meanwhile answers
/// `429 Too Many Requests` without the credentials being looked at. A success
/// forgets the client.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    clients: std::sync::Mutex<HashMap<Option<IpAddr>, Failures>>,
}

#[derive(Clone, Copy, Debug)]
struct Failures {
    count: u32,
    last: Instant,
    wait_until: Instant,
}

impl Throttle {
    /// How long `client` must still wait, if at all.
    fn must_wait(&self, client: Option<IpAddr>, now: Instant) -> Option<Duration> {
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients
            .get(&client)
            .and_then(|f| f.wait_until.checked_duration_since(now))
            .filter(|d| !d.is_zero())
    }

    fn failed(&self, client: Option<IpAddr>, now: Instant) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if clients.len() >= MAX_CLIENTS {
            clients.retain(|_, f| now.duration_since(f.last) < FORGET_AFTER);
            if clients.len() >= MAX_CLIENTS {
                let mut lasts: Vec<Instant> = clients.values().map(|f| f.last).collect();
                lasts.sort_unstable();
                let cut = lasts[lasts.len() / 2];
                clients.retain(|_, f| f.last > cut);
            }
        }
        let f = clients.entry(client).or_insert(Failures {
            count: 0,
            last: now,
            wait_until: now,
        });
        if now.duration_since(f.last) >= FORGET_AFTER {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
        if f.count >= FREE_FAILURES {
            let doublings = (f.count - FREE_FAILURES).min(16);
            let wait = FIRST_WAIT.saturating_mul(1 << doublings).min(MAX_WAIT);
            f.wait_until = now + wait;
        }
    }

    fn succeeded(&self, client: Option<IpAddr>) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.remove(&client);
    }
}

/// The basic-auth user of a request that passed [`basic_auth`].
#[derive(Clone, Debug)]
pub(crate) struct AuthUser(pub(crate) String);

/// Answers 401 unless the request carries the configured credentials (when any are
/// configured), and 429 while its client waits after failed attempts ([`Throttle`]).
pub(crate) async fn basic_auth(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(auth) = &state.config.basic_auth else {
        return next.run(req).await;
    };
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let now = Instant::now();
    if let Some(wait) = state.throttle.must_wait(client, now) {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let mut res = (
            StatusCode::TOO_MANY_REQUESTS,
            "429 Too Many Requests: too many wrong passwords from this address; try again later.\n",
        )
            .into_response();
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return res;
    }
    let user = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| auth.check(v.as_bytes()))
        .map(str::to_owned);
    match user {
        Some(user) => {
            state.throttle.succeeded(client);
            req.extensions_mut().insert(AuthUser(user));
            next.run(req).await
        }
        None => {
            // A request with no credentials at all is how every browser starts: only a
            // wrong answer counts.
            if req.headers().contains_key(header::AUTHORIZATION) {
                state.throttle.failed(client, now);
            }
            let mut res = (
                StatusCode::UNAUTHORIZED,
                Body::from("401 Unauthorized: this dashboard needs a user name and password.\n"),
            )
                .into_response();
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"tenure dashboard\", charset=\"UTF-8\""),
            );
            res
        }
    }
}

/// Refuses (403) every request but GET and HEAD that is not [`same_origin`], before
/// its body is read; the action handlers check again, with the authorizer.
pub(crate) async fn same_origin_only(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let safe = req.method() == Method::GET || req.method() == Method::HEAD;
    if safe || same_origin(req.headers(), &state.config.hosts) {
        return next.run(req).await;
    }
    tracing::warn!(
        target: "tenure_dashboard::audit",
        method = %req.method(),
        path = req.uri().path(),
        "dashboard action refused: not same-origin"
    );
    (
        StatusCode::FORBIDDEN,
        "403 Forbidden: actions are accepted only from the dashboard's own pages (same origin).\n",
    )
        .into_response()
}

/// True when a state-changing request comes from the dashboard's own pages:
/// `Sec-Fetch-Site: same-origin`, or (for browsers that do not send it) an `Origin`
/// that is `http://` and the request's `Host` (`https://` only for a host configured
/// with it, see [`HostRules::same_origin`]). A request with neither is refused. The
/// `Host` itself was checked first ([`allowed_host`]): a rebound page is same-origin
/// in the browser's eyes.
pub(crate) fn same_origin(headers: &HeaderMap, hosts: &HostRules) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return site.as_bytes() == b"same-origin";
    }
    let (Some(origin), Some(host)) = (headers.get(header::ORIGIN), headers.get(header::HOST))
    else {
        return false;
    };
    let (Ok(origin), Ok(host)) = (origin.to_str(), host.to_str()) else {
        return false;
    };
    hosts.same_origin(origin, host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.insert(*k, HeaderValue::from_static(v));
        }
        m
    }

    fn same_origin(headers: &HeaderMap) -> bool {
        let mut hosts = HostRules::loopback();
        hosts.add("a:1").unwrap();
        super::same_origin(headers, &hosts)
    }

    #[test]
    fn only_same_origin_requests_pass() {
        assert!(same_origin(&h(&[("sec-fetch-site", "same-origin")])));
        assert!(!same_origin(&h(&[("sec-fetch-site", "cross-site")])));
        assert!(!same_origin(&h(&[("sec-fetch-site", "same-site")])));
        assert!(!same_origin(&h(&[
            ("sec-fetch-site", "cross-site"),
            ("origin", "http://a:1"),
            ("host", "a:1")
        ])));
        assert!(same_origin(&h(&[
            ("origin", "http://a:1"),
            ("host", "a:1")
        ])));
        assert!(!same_origin(&h(&[
            ("origin", "http://evil:1"),
            ("host", "a:1")
        ])));
        assert!(!same_origin(&h(&[("origin", "null"), ("host", "a:1")])));
        assert!(!same_origin(&h(&[("host", "a:1")])));
        assert!(
            !same_origin(&h(&[("origin", "https://a:1"), ("host", "a:1")])),
            "an https page is another origin than this http server"
        );
    }

    #[test]
    fn a_client_waits_after_five_failures_doubling_up_to_a_minute() {
        let t = Throttle::default();
        let me = Some(IpAddr::from([10, 0, 0, 1]));
        let other = Some(IpAddr::from([10, 0, 0, 2]));
        let start = Instant::now();
        for _ in 0..FREE_FAILURES - 1 {
            t.failed(me, start);
            assert_eq!(t.must_wait(me, start), None);
        }
        t.failed(me, start);
        assert_eq!(t.must_wait(me, start), Some(FIRST_WAIT));
        assert_eq!(t.must_wait(other, start), None, "per client");
        let later = start + FIRST_WAIT;
        assert_eq!(t.must_wait(me, later), None);
        t.failed(me, later);
        assert_eq!(t.must_wait(me, later), Some(FIRST_WAIT * 2));
        for _ in 0..20 {
            t.failed(me, later);
        }
        assert_eq!(t.must_wait(me, later), Some(MAX_WAIT));
        t.succeeded(me);
        assert_eq!(t.must_wait(me, later), None);
    }
}
