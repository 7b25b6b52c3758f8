//! The headers every response carries, basic auth, and the same-origin rule of actions.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;

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

/// The basic-auth user of a request that passed [`basic_auth`].
#[derive(Clone, Debug)]
pub(crate) struct AuthUser(pub(crate) String);

/// Answers 401 unless the request carries the configured credentials (when any are
/// configured).
pub(crate) async fn basic_auth(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(auth) = &state.config.basic_auth else {
        return next.run(req).await;
    };
    let user = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| auth.check(v.as_bytes()))
        .map(str::to_owned);
    match user {
        Some(user) => {
            req.extensions_mut().insert(AuthUser(user));
            next.run(req).await
        }
        None => {
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
pub(crate) async fn same_origin_only(req: Request, next: Next) -> Response {
    let safe = req.method() == Method::GET || req.method() == Method::HEAD;
    if safe || same_origin(req.headers()) {
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
/// whose host is the request's `Host`. A request with neither is refused.
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
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
    match origin.split_once("://") {
        Some((scheme, rest)) if scheme == "http" || scheme == "https" => rest == host,
        _ => false,
    }
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
    }
}
