//! `tenure dashboard <url>`: the web dashboard of `tenure-dashboard`, served on its own.
//!
//! Loopback by default. A non-loopback address is refused unless basic auth is
//! configured (from `TENURE_DASHBOARD_USER` and `TENURE_DASHBOARD_PASSWORD`, or from
//! `--auth-file` holding `user:password`). Only loopback names, the bound address and
//! `--allowed-host` names are answered as `Host` (DNS rebinding); headers and bodies
//! are read within `--read-timeout-ms`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use axum::response::Redirect;
use clap::Args;
use tenure_dashboard::{BasicAuth, DashboardConfig, ServeOptions};

use crate::error::CliError;

/// The options of `tenure dashboard`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tenure dashboard sqlite://work.db\n  \
    tenure dashboard 'postgres://app@db/prod?tenure_schema=jobs' --env production --read-only\n  \
    TENURE_DASHBOARD_USER=ops TENURE_DASHBOARD_PASSWORD=... \
    tenure dashboard postgres://app@db/prod --bind 0.0.0.0:8080\n\n\
    tenure dashboard sqlite://work.db --base-path /ops/tenure \
    --allowed-host https://ops.example.com\n\n\
    Binds 127.0.0.1 unless told otherwise; any other address needs basic auth \
    (TENURE_DASHBOARD_USER and TENURE_DASHBOARD_PASSWORD, or --auth-file with \
    user:password on its first line). Put TLS in front of it when it leaves the machine. \
    Only these Host names are answered: localhost, 127.0.0.1, [::1], the bound address \
    (any IP address when bound to 0.0.0.0 or ::), and each --allowed-host.")]
pub(crate) struct DashboardArgs {
    /// The store: memory://, sqlite://PATH, postgres://..., redis://...
    #[arg(env = "TENURE_URL")]
    pub(crate) url: String,

    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    pub(crate) bind: SocketAddr,

    /// A label shown on every page, such as production or staging.
    #[arg(long = "env", value_name = "LABEL")]
    pub(crate) environment: Option<String>,

    /// Refuse every action: pages only.
    #[arg(long)]
    pub(crate) read_only: bool,

    /// A file whose first line is user:password (instead of the environment).
    #[arg(long, value_name = "PATH")]
    pub(crate) auth_file: Option<PathBuf>,

    /// The path prefix a reverse proxy serves the dashboard under, such as /tenure.
    #[arg(long, default_value = "", value_name = "PATH")]
    pub(crate) base_path: String,

    /// How long counts are reused for every viewer, in milliseconds.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub(crate) counts_ttl_ms: u64,

    /// Also answer this Host: the name a reverse proxy or users reach the dashboard
    /// by (NAME, NAME:PORT, or https://NAME when a proxy serves it over TLS).
    /// Repeatable. Other names get 421, so no web page can rebind its name to this
    /// machine and drive the dashboard.
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub(crate) allowed_hosts: Vec<String>,

    /// How long a client may take to send a request's headers, and then its body,
    /// in milliseconds; a slower client is disconnected (or answered 408).
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub(crate) read_timeout_ms: u64,
}

/// The credentials from `--auth-file`, or from the environment, or none.
fn credentials(args: &DashboardArgs) -> Result<Option<BasicAuth>, CliError> {
    if let Some(path) = &args.auth_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::Usage(format!("--auth-file {}: {e}", path.display())))?;
        return BasicAuth::from_file_text(&text)
            .map(Some)
            .map_err(|e| CliError::Usage(format!("--auth-file {}: {e}", path.display())));
    }
    match (
        std::env::var("TENURE_DASHBOARD_USER").ok(),
        std::env::var("TENURE_DASHBOARD_PASSWORD").ok(),
    ) {
        (Some(user), Some(password)) => BasicAuth::new(user, password)
            .map(Some)
            .map_err(|e| CliError::Usage(format!("TENURE_DASHBOARD_USER/PASSWORD: {e}"))),
        (None, None) => Ok(None),
        _ => Err(CliError::Usage(
            "set both TENURE_DASHBOARD_USER and TENURE_DASHBOARD_PASSWORD, or neither".to_owned(),
        )),
    }
}

/// True for addresses only this machine reaches.
fn loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}

/// A dashboard bound and configured, not serving yet.
struct Prepared {
    listener: tokio::net::TcpListener,
    app: axum::Router,
    /// The address printed: one that answers the overview.
    url: String,
    store_name: &'static str,
}

async fn prepare(args: &DashboardArgs) -> Result<Prepared, CliError> {
    let auth = credentials(args)?;
    if !loopback(args.bind.ip()) && auth.is_none() {
        return Err(CliError::Usage(format!(
            "refusing to serve the dashboard on {} without authentication: set \
             TENURE_DASHBOARD_USER and TENURE_DASHBOARD_PASSWORD (or --auth-file), or bind 127.0.0.1",
            args.bind
        )));
    }
    let store = crate::connect::open(&args.url, false).await?;
    let mut config = DashboardConfig::new()
        .base_path(args.base_path.clone())
        .read_only(args.read_only)
        .counts_ttl(Duration::from_millis(args.counts_ttl_ms))
        .body_timeout(Duration::from_millis(args.read_timeout_ms));
    for host in &args.allowed_hosts {
        config = config
            .allowed_host(host)
            .map_err(|e| CliError::Usage(format!("--allowed-host: {e}")))?;
    }
    if let Some(env) = &args.environment {
        config = config.environment(env.clone());
    }
    if let Some(auth) = auth {
        config = config.basic_auth(auth);
    }
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .map_err(|e| CliError::Usage(format!("cannot listen on {}: {e}", args.bind)))?;
    let local = listener
        .local_addr()
        .map_err(|e| CliError::Usage(format!("cannot listen on {}: {e}", args.bind)))?;
    // The bound address answers as Host; bound to every interface, any IP address
    // does (a request to an IP address cannot carry a rebound name).
    config = if local.ip().is_unspecified() {
        config.any_ip_host(true)
    } else {
        config
            .allowed_host(&local.ip().to_string())
            .map_err(|e| CliError::Usage(format!("--bind: {e}")))?
    };
    let base = config_base(&args.base_path);
    let app = app(tenure_dashboard::router(store.clone(), config), &base);
    Ok(Prepared {
        listener,
        app,
        url: start_url(local, &base),
        store_name: store.name(),
    })
}

pub(crate) async fn run(args: DashboardArgs) -> Result<(), CliError> {
    let prepared = prepare(&args).await?;
    println!(
        "Tenure dashboard for the {} store on {} (Ctrl-C stops it){}",
        prepared.store_name,
        prepared.url,
        if args.read_only { ", read-only" } else { "" }
    );
    tenure_dashboard::serve(
        prepared.listener,
        prepared.app,
        ServeOptions::new().header_read_timeout(Duration::from_millis(args.read_timeout_ms)),
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    )
    .await
    .map_err(|e| CliError::Usage(format!("the dashboard stopped: {e}")))?;
    Ok(())
}

/// The dashboard at the root, or nested under `base` with `base/` sent on to `base`
/// (a nested router answers `base` itself, which is what every page links to).
fn app(dashboard: axum::Router, base: &str) -> axum::Router {
    if base.is_empty() {
        return dashboard;
    }
    let to = base.to_owned();
    axum::Router::new()
        .route(
            &format!("{base}/"),
            axum::routing::get(move || async move { Redirect::permanent(&to) }),
        )
        .nest(base, dashboard)
}

/// The overview's address: the bound address (a loopback one when bound to every
/// interface, as this machine reaches it) and the base path, with no trailing `/`
/// under a base path.
fn start_url(local: SocketAddr, base: &str) -> String {
    let ip = match local.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let path = if base.is_empty() { "/" } else { base };
    format!("http://{}{path}", SocketAddr::new(ip, local.port()))
}

/// The base path as the router nests it: `""` or `/a/b` without a trailing `/`.
fn config_base(path: &str) -> String {
    let trimmed = path.trim().trim_end_matches('/');
    if trimmed.is_empty() {
        String::new()
    } else if trimmed.starts_with('/') {
        trimmed.to_owned()
    } else {
        format!("/{trimmed}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_count_as_local() {
        assert!(loopback("127.0.0.1".parse().unwrap()));
        assert!(loopback("::1".parse().unwrap()));
        assert!(!loopback("0.0.0.0".parse().unwrap()));
        assert!(!loopback("10.1.2.3".parse().unwrap()));
    }

    #[test]
    fn base_paths_nest_with_one_leading_slash() {
        assert_eq!(config_base(""), "");
        assert_eq!(config_base("/"), "");
        assert_eq!(config_base("tenure/"), "/tenure");
    }

    fn args(base: &str, bind: &str, hosts: &[&str]) -> DashboardArgs {
        DashboardArgs {
            url: "memory://".to_owned(),
            bind: bind.parse().unwrap(),
            environment: None,
            read_only: false,
            auth_file: None,
            base_path: base.to_owned(),
            counts_ttl_ms: 2000,
            allowed_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            read_timeout_ms: 10_000,
        }
    }

    /// `GET path` with this `Host` on a new connection to `addr`: the status line and
    /// headers of the answer.
    async fn head_of(addr: SocketAddr, path: &str, host: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
            .await
            .unwrap()
            .unwrap();
        let text = String::from_utf8_lossy(&out).into_owned();
        text.split("\r\n\r\n").next().unwrap().to_owned()
    }

    /// Serves `args` on a free loopback port; the printed URL and the bound address.
    async fn serve(args: &DashboardArgs) -> (String, SocketAddr) {
        let p = prepare(args).await.unwrap();
        let addr = p.listener.local_addr().unwrap();
        tokio::spawn(tenure_dashboard::serve(
            p.listener,
            p.app,
            ServeOptions::new(),
            std::future::pending(),
        ));
        (p.url, addr)
    }

    #[tokio::test]
    async fn the_printed_url_answers_the_overview_under_a_base_path() {
        for base in ["/ops/tenure", "/ops/tenure/", "ops", ""] {
            let (url, addr) = serve(&args(base, "127.0.0.1:0", &[])).await;
            assert!(!url.ends_with("//"), "{url}");
            let path = url.strip_prefix(&format!("http://{addr}")).unwrap();
            assert!(path.starts_with('/'), "{url}");
            let head = head_of(addr, path, &addr.to_string()).await;
            assert!(head.starts_with("HTTP/1.1 200"), "{base:?}: {url}: {head}");
            if path.len() > 1 {
                // With a trailing slash too, by a redirect to the printed path.
                let head = head_of(addr, &format!("{path}/"), &addr.to_string()).await;
                assert!(head.starts_with("HTTP/1.1 308"), "{head}");
                assert!(head.contains(&format!("location: {path}\r\n")), "{head}");
            }
        }
    }

    #[tokio::test]
    async fn only_loopback_the_bound_address_and_allowed_hosts_are_answered() {
        let (url, addr) = serve(&args("", "127.0.0.1:0", &["ops.example.com"])).await;
        assert_eq!(url, format!("http://{addr}/"));
        for host in [
            addr.to_string(),
            format!("localhost:{}", addr.port()),
            "ops.example.com".to_owned(),
        ] {
            let head = head_of(addr, "/", &host).await;
            assert!(head.starts_with("HTTP/1.1 200"), "{host}: {head}");
        }
        let head = head_of(addr, "/", "attacker.example").await;
        assert!(head.starts_with("HTTP/1.1 421"), "{head}");
        let mut bad = args("", "127.0.0.1:0", &["ops.example.com/path"]);
        assert!(prepare(&bad).await.is_err(), "a path is no host");
        bad.allowed_hosts.clear();
        assert!(prepare(&bad).await.is_ok());
    }

    #[test]
    fn bound_to_every_interface_the_url_names_loopback() {
        assert_eq!(
            start_url("0.0.0.0:8080".parse().unwrap(), "/ops"),
            "http://127.0.0.1:8080/ops"
        );
        assert_eq!(
            start_url("[::]:8080".parse().unwrap(), ""),
            "http://[::1]:8080/"
        );
    }
}
