//! `tenure dashboard <url>`: the web dashboard of `tenure-dashboard`, served on its own.
//!
//! Loopback by default. A non-loopback address is refused unless basic auth is
//! configured (from `TENURE_DASHBOARD_USER` and `TENURE_DASHBOARD_PASSWORD`, or from
//! `--auth-file` holding `user:password`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use tenure_dashboard::{BasicAuth, DashboardConfig};

use crate::error::CliError;

/// The options of `tenure dashboard`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tenure dashboard sqlite://work.db\n  \
    tenure dashboard 'postgres://app@db/prod?tenure_schema=jobs' --env production --read-only\n  \
    TENURE_DASHBOARD_USER=ops TENURE_DASHBOARD_PASSWORD=... \
    tenure dashboard postgres://app@db/prod --bind 0.0.0.0:8080\n\n\
    Binds 127.0.0.1 unless told otherwise; any other address needs basic auth \
    (TENURE_DASHBOARD_USER and TENURE_DASHBOARD_PASSWORD, or --auth-file with \
    user:password on its first line). Put TLS in front of it when it leaves the machine.")]
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

pub(crate) async fn run(args: DashboardArgs) -> Result<(), CliError> {
    let auth = credentials(&args)?;
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
        .counts_ttl(Duration::from_millis(args.counts_ttl_ms));
    if let Some(env) = &args.environment {
        config = config.environment(env.clone());
    }
    if let Some(auth) = auth {
        config = config.basic_auth(auth);
    }
    let base = config_base(&args.base_path);
    let app = if base.is_empty() {
        tenure_dashboard::router(store.clone(), config)
    } else {
        axum::Router::new().nest(&base, tenure_dashboard::router(store.clone(), config))
    };
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .map_err(|e| CliError::Usage(format!("cannot listen on {}: {e}", args.bind)))?;
    let local = listener
        .local_addr()
        .map_err(|e| CliError::Usage(format!("cannot listen on {}: {e}", args.bind)))?;
    println!(
        "Tenure dashboard for the {} store on http://{local}{base}/ (Ctrl-C stops it){}",
        store.name(),
        if args.read_only { ", read-only" } else { "" }
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| CliError::Usage(format!("the dashboard stopped: {e}")))?;
    Ok(())
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
}
