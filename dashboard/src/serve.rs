//! [`serve`]: the dashboard on a listener of its own, with a header read timeout.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt as _;

/// How [`serve`] treats its connections.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    header_read_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions::new()
    }
}

impl ServeOptions {
    /// Headers read within 10 s.
    pub fn new() -> Self {
        ServeOptions {
            header_read_timeout: Duration::from_secs(10),
        }
    }

    /// How long a client may take to send a request's headers (default 10 s; at least
    /// 10 ms). A client that does not finish them in time is disconnected, so idle or
    /// trickling connections cannot pile up.
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout.max(Duration::from_millis(10));
        self
    }
}

/// Serves `app` (a [`crate::router`], maybe nested under a base path) on `listener`
/// over HTTP/1.1 until `shutdown` completes.
///
/// Unlike `axum::serve` it drops a client that does not finish its headers within
/// [`ServeOptions::header_read_timeout`] (the router reads bodies within
/// [`crate::DashboardConfig::body_timeout`]), and it gives every request its peer
/// address (`ConnectInfo<SocketAddr>`), by which failed basic-auth attempts are
/// throttled. `tenure dashboard` serves with it.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors or a reset before accept: not fatal.
                    tracing::warn!(error = %e, "dashboard: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let app = app.clone();
        let options = options.clone();
        tokio::spawn(async move {
            let service = app.map_request(move |req: Request<Incoming>| {
                let mut req = req.map(Body::new);
                req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                req
            });
            let result = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(options.header_read_timeout)
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                .await;
            if let Err(e) = result {
                tracing::debug!(error = %e, %peer, "dashboard: connection ended");
            }
        });
    }
}
