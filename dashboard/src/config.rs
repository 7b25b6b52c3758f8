//! [`DashboardConfig`] and [`BasicAuth`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use base64::Engine as _;
use subtle::ConstantTimeEq;
use tenure_core::DEFAULT_LEADER_NAME;
use tenure_core::{SharedClock, SystemClock};

use crate::access::{Access, Authorizer};
use crate::hosts::HostRules;

/// Names who made a request, for audit events and metrics.
pub(crate) type ActorFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// How the dashboard is mounted, who may do what, and how hard it may lean on the
/// store. Built with [`DashboardConfig::new`] and its setters.
#[derive(Clone)]
pub struct DashboardConfig {
    pub(crate) base_path: String,
    pub(crate) environment: Option<String>,
    pub(crate) read_only: bool,
    pub(crate) authorizer: Option<Authorizer>,
    pub(crate) actor: Option<ActorFn>,
    pub(crate) basic_auth: Option<BasicAuth>,
    pub(crate) counts_ttl: Duration,
    pub(crate) page_size: u32,
    pub(crate) preview_bytes: usize,
    pub(crate) leader_name: String,
    pub(crate) refresh_choices: Vec<u32>,
    pub(crate) clock: SharedClock,
    pub(crate) hosts: HostRules,
    pub(crate) body_timeout: Duration,
    pub(crate) list_payloads: bool,
}

impl fmt::Debug for DashboardConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DashboardConfig")
            .field("base_path", &self.base_path)
            .field("environment", &self.environment)
            .field("read_only", &self.read_only)
            .field("authorizer", &self.authorizer.is_some())
            .field("basic_auth", &self.basic_auth)
            .field("counts_ttl", &self.counts_ttl)
            .field("page_size", &self.page_size)
            .field("preview_bytes", &self.preview_bytes)
            .field("leader_name", &self.leader_name)
            .field("hosts", &self.hosts)
            .field("body_timeout", &self.body_timeout)
            .field("list_payloads", &self.list_payloads)
            .finish_non_exhaustive()
    }
}

impl Default for DashboardConfig {
    fn default() -> Self {
        DashboardConfig::new()
    }
}

impl DashboardConfig {
    /// Served at the root, every action allowed (put auth in front), answering only
    /// loopback `Host` names, counts cached for 2 s, pages of 50 items, payload previews
    /// of 4 KiB, request bodies read within 10 s.
    pub fn new() -> Self {
        DashboardConfig {
            base_path: String::new(),
            environment: None,
            read_only: false,
            authorizer: None,
            actor: None,
            basic_auth: None,
            counts_ttl: Duration::from_secs(2),
            page_size: 50,
            preview_bytes: 4096,
            leader_name: DEFAULT_LEADER_NAME.to_owned(),
            refresh_choices: vec![0, 1, 2, 5, 15, 30],
            clock: Arc::new(SystemClock),
            hosts: HostRules::loopback(),
            body_timeout: Duration::from_secs(10),
            list_payloads: true,
        }
    }

    /// Shows the start of each item's payload in a column of the queue listings and
    /// their JSON (default on; escaped, one line, cut with an ellipsis). Off, payloads
    /// are shown only on an item's page, when asked for.
    pub fn list_payloads(mut self, show: bool) -> Self {
        self.list_payloads = show;
        self
    }

    /// Also answers requests whose `Host` is `host`: the name a reverse proxy or the
    /// users reach the dashboard by. Call it once per name.
    ///
    /// Without any, only loopback names answer (`localhost`, `127.0.0.1`, `[::1]`, any
    /// port); every other `Host` gets `421 Misdirected Request` before any handler runs,
    /// so a web page that rebinds its own DNS name to this machine can neither read
    /// nor steer the work (DNS rebinding).
    ///
    /// `host` is `name`, `name:port` (then only that port), an IP address, or any of
    /// these after `https://`: the dashboard is served over TLS under that name (by a
    /// proxy), so an action whose `Origin` is `https://name` is same-origin. A bare
    /// name accepts `http://` origins only. Answers an error for anything else (a
    /// path, a user, an empty name).
    pub fn allowed_host(mut self, host: &str) -> Result<Self, String> {
        self.hosts.add(host)?;
        Ok(self)
    }

    /// Also answers any `Host` that is an IP address (not a name). A page's DNS name
    /// can be rebound to this machine, but a request to an IP address carries that
    /// address, never the attacker's name; `tenure dashboard` sets it when bound to
    /// every interface (`0.0.0.0`, `::`), where the dashboard is reached by any of the
    /// machine's addresses. Off by default.
    pub fn any_ip_host(mut self, allow: bool) -> Self {
        self.hosts.any_ip = allow;
        self
    }

    /// How long a client may take to send an action's body (default 10 s; at least
    /// 100 ms); past it the request answers `408 Request Timeout` and nothing runs.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout.max(Duration::from_millis(100));
        self
    }

    /// The path the router is mounted under (`"/ops/tenure"`), which every link and
    /// form of the pages starts with. A trailing `/` is dropped; `""` or `"/"` is the
    /// root.
    pub fn base_path(mut self, path: impl Into<String>) -> Self {
        let path = path.into();
        let trimmed = path.trim_end_matches('/');
        self.base_path = if trimmed.is_empty() || trimmed.starts_with('/') {
            trimmed.to_owned()
        } else {
            format!("/{trimmed}")
        };
        self
    }

    /// A label shown as a badge on every page (`"production"`, `"staging"`), so nobody
    /// steers the wrong deployment.
    pub fn environment(mut self, label: impl Into<String>) -> Self {
        let label = label.into();
        self.environment = (!label.trim().is_empty()).then_some(label);
        self
    }

    /// Refuses every action (403) whatever the [`Authorizer`] says, and hides their
    /// buttons.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Decides each request's [`Access`]. Without one every request has
    /// [`Access::Full`]: the host's auth layer (or [`BasicAuth`]) is the only gate.
    pub fn authorizer(mut self, f: impl Fn(&Parts) -> Access + Send + Sync + 'static) -> Self {
        self.authorizer = Some(Arc::new(f));
        self
    }

    /// Names who made a request, for the audit event and metric of each action (for
    /// example the user the host's auth layer put in the extensions). Without one, the
    /// basic-auth user or `"anonymous"`.
    pub fn actor(mut self, f: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static) -> Self {
        self.actor = Some(Arc::new(f));
        self
    }

    /// Requires these credentials on every page but `/healthz` (401 otherwise).
    ///
    /// After five failed attempts a client waits 1 s, doubling up to 60 s, and is
    /// answered `429` meanwhile. Clients are told apart by peer address, which
    /// [`crate::serve`] gives each request (`ConnectInfo<SocketAddr>`); without it
    /// (or behind one proxy) all share one count, so guessing slows everyone.
    pub fn basic_auth(mut self, auth: BasicAuth) -> Self {
        self.basic_auth = Some(auth);
        self
    }

    /// How long the overview's counts, instances and leader are reused before the
    /// store is asked again (default 2 s; at least 100 ms). One read per period per
    /// router, however many tabs poll; and never more than 2% of the time: a read
    /// that took 200 ms (a count over a large backlog) is reused for 10 s. Every page
    /// says how old its counts are.
    pub fn counts_ttl(mut self, ttl: Duration) -> Self {
        self.counts_ttl = ttl.max(Duration::from_millis(100));
        self
    }

    /// Items or leases per page (default 50; 1 to 500).
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = n.clamp(1, 500);
        self
    }

    /// Most payload bytes an item page shows when asked (default 4096).
    pub fn preview_bytes(mut self, n: usize) -> Self {
        self.preview_bytes = n;
        self
    }

    /// The leader lease the overview shows (default: the workers' maintenance lease).
    pub fn leader_name(mut self, name: impl Into<String>) -> Self {
        self.leader_name = name.into();
        self
    }

    /// The refresh intervals offered, in seconds (`0` is "off").
    pub fn refresh_choices(mut self, seconds: Vec<u32>) -> Self {
        if !seconds.is_empty() {
            self.refresh_choices = seconds;
        }
        self
    }

    /// The clock ages and expiries are shown against (default: the system clock; give
    /// the store's clock when it is not the system's).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The link to `path` (which starts with `/`) under the base path.
    /// The overview is the base path itself (`/ops/tenure`, as a nested router answers
    /// it), or `/` at the root.
    pub(crate) fn link(&self, path: &str) -> String {
        if path == "/" && !self.base_path.is_empty() {
            return self.base_path.clone();
        }
        format!("{}{}", self.base_path, path)
    }
}

/// One user name and password for HTTP basic auth, compared in constant time.
#[derive(Clone)]
pub struct BasicAuth {
    user: String,
    password: String,
}

impl fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasicAuth")
            .field("user", &self.user)
            .field("password", &"<hidden>")
            .finish()
    }
}

impl BasicAuth {
    /// These credentials. The user may not contain `:`; neither may be empty.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Result<Self, String> {
        let (user, password) = (user.into(), password.into());
        if user.is_empty() || user.contains(':') {
            return Err("user: must be non-empty and contain no ':'".to_owned());
        }
        if password.is_empty() {
            return Err("password: must be non-empty".to_owned());
        }
        Ok(BasicAuth { user, password })
    }

    /// Credentials from a file's first line, `user:password` (surrounding white space
    /// ignored).
    pub fn from_file_text(text: &str) -> Result<Self, String> {
        let line = text.lines().next().unwrap_or_default().trim();
        match line.split_once(':') {
            Some((user, password)) => BasicAuth::new(user, password),
            None => Err("the first line must be user:password".to_owned()),
        }
    }

    /// The user name.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The user named by an `Authorization` header value when it carries these
    /// credentials; `None` otherwise. Both parts are compared in constant time.
    pub(crate) fn check(&self, header: &[u8]) -> Option<&str> {
        let text = std::str::from_utf8(header).ok()?;
        let (scheme, rest) = text.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .ok()?;
        let split = decoded.iter().position(|b| *b == b':')?;
        let (user, password) = (&decoded[..split], &decoded[split + 1..]);
        let ok = ct_eq(user, self.user.as_bytes()) & ct_eq(password, self.password.as_bytes());
        bool::from(ok).then_some(self.user.as_str())
    }
}

/// `given == expected` in time that depends only on `expected`'s length.
fn ct_eq(given: &[u8], expected: &[u8]) -> subtle::Choice {
    let same_len = (given.len() as u64).ct_eq(&(expected.len() as u64));
    let mut diff = 0u8;
    for (i, e) in expected.iter().enumerate() {
        diff |= e ^ given.get(i).copied().unwrap_or(0);
    }
    same_len & diff.ct_eq(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, password: &str) -> Vec<u8> {
        let raw = format!("{user}:{password}");
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
        .into_bytes()
    }

    #[test]
    fn basic_auth_accepts_only_the_exact_credentials() {
        let auth = BasicAuth::new("ops", "s3cret").unwrap();
        assert_eq!(auth.check(&header("ops", "s3cret")), Some("ops"));
        for (u, p) in [
            ("ops", "s3cre"),
            ("ops", "s3cret!"),
            ("op", "s3cret"),
            ("ops", ""),
            ("", "s3cret"),
            ("ops", "s3creT"),
        ] {
            assert_eq!(auth.check(&header(u, p)), None, "{u}:{p}");
        }
        assert_eq!(auth.check(b"Bearer abc"), None);
        assert_eq!(auth.check(b"Basic not-base64!"), None);
    }

    #[test]
    fn credentials_files_read_user_colon_password_from_the_first_line() {
        let auth = BasicAuth::from_file_text("ops:pa:ss\nignored\n").unwrap();
        assert_eq!(auth.user(), "ops");
        assert_eq!(auth.check(&header("ops", "pa:ss")), Some("ops"));
        assert!(BasicAuth::from_file_text("no colon").is_err());
        assert!(BasicAuth::from_file_text(":pw").is_err());
    }

    #[test]
    fn base_paths_start_with_a_slash_and_end_without_one() {
        assert_eq!(DashboardConfig::new().base_path("/ops/").base_path, "/ops");
        assert_eq!(DashboardConfig::new().base_path("ops").base_path, "/ops");
        assert_eq!(DashboardConfig::new().base_path("/").base_path, "");
    }
}
