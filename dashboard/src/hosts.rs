//! Which `Host` values the dashboard answers, and which `Origin` schemes go with them.
//!
//! A web page can rebind its own DNS name to 127.0.0.1: the browser then sends the
//! dashboard requests that are same-origin in its eyes (`Sec-Fetch-Site: same-origin`,
//! `Origin` equal to `Host`), but whose `Host` is the attacker's name. Answering only
//! the names the dashboard is configured for is the one defence that holds.

use std::net::IpAddr;

/// One allowed `Host`: a lowercase name or IP (IPv6 in brackets), maybe one port, and
/// whether `https://` origins go with it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    host: String,
    port: Option<u16>,
    https: bool,
}

/// The `Host` values answered: loopback names by default, plus configured ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostRules {
    rules: Vec<Rule>,
    /// Any IP literal answers too (bound to every interface).
    pub(crate) any_ip: bool,
}

/// A `Host` header (or authority) split into a lowercase host and its port.
fn split_host(text: &str) -> Option<(String, Option<u16>)> {
    let text = text.trim();
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b))
    {
        return None;
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        inside.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (format!("[{inside}]"), port)
    } else {
        match text.split_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (text.to_owned(), None),
        }
    };
    if host.is_empty() || (!host.starts_with('[') && host.contains([':', '[', ']'])) {
        return None;
    }
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().ok()?),
    };
    Some((host.to_ascii_lowercase(), port))
}

/// True when `host` (as [`split_host`] answers it) is an IP address.
fn is_ip(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().is_ok()
}

impl HostRules {
    /// `localhost`, `127.0.0.1` and `[::1]`, any port, `http://` origins.
    pub(crate) fn loopback() -> HostRules {
        let rule = |host: &str| Rule {
            host: host.to_owned(),
            port: None,
            https: false,
        };
        HostRules {
            rules: vec![rule("localhost"), rule("127.0.0.1"), rule("[::1]")],
            any_ip: false,
        }
    }

    /// Adds `entry`: `name`, `name:port`, an IP, or one of them after `http://` or
    /// `https://`.
    pub(crate) fn add(&mut self, entry: &str) -> Result<(), String> {
        let trimmed = entry.trim();
        let (https, rest) = if let Some(r) = trimmed.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = trimmed.strip_prefix("http://") {
            (false, r)
        } else {
            (false, trimmed)
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        // A bare IPv6 address is written without brackets on command lines.
        let bracketed = match rest.parse::<std::net::Ipv6Addr>() {
            Ok(ip) => format!("[{ip}]"),
            Err(_) => rest.to_owned(),
        };
        let (host, port) = split_host(&bracketed).ok_or_else(|| {
            format!(
                "allowed host {entry:?}: expected a name or IP, an optional :port, and at most an \
                 http:// or https:// in front (no path, no user)"
            )
        })?;
        // IPv6 written in full or short form compare the same.
        let host = match host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
            _ => host,
        };
        self.rules.push(Rule { host, port, https });
        Ok(())
    }

    fn find(&self, host: &str, port: Option<u16>) -> impl Iterator<Item = &Rule> {
        let canonical = match host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
            _ => host.to_owned(),
        };
        self.rules
            .iter()
            .filter(move |r| r.host == canonical && (r.port.is_none() || r.port == port))
    }

    /// True when a request with this `Host` header value is answered.
    pub(crate) fn allows(&self, host_header: &str) -> bool {
        let Some((host, port)) = split_host(host_header) else {
            return false;
        };
        (self.any_ip && is_ip(&host)) || self.find(&host, port).next().is_some()
    }

    /// True when `origin` is the origin of a page served under `host_header`: the
    /// same host and port, over `http://`, or over `https://` for a host configured
    /// with `https://`.
    pub(crate) fn same_origin(&self, origin: &str, host_header: &str) -> bool {
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        if !rest.eq_ignore_ascii_case(host_header.trim()) || !self.allows(host_header) {
            return false;
        }
        match scheme {
            "http" => true,
            "https" => {
                split_host(host_header).is_some_and(|(h, p)| self.find(&h, p).any(|r| r.https))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_answer_on_any_port_and_nothing_else_does() {
        let r = HostRules::loopback();
        for ok in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:9",
            "LOCALHOST:80",
        ] {
            assert!(r.allows(ok), "{ok}");
        }
        for bad in [
            "attacker.example",
            "attacker.example:8080",
            "localhost.attacker.example",
            "127.0.0.1.nip.io:8080",
            "10.0.0.1:8080",
            "",
            "localhost:99999",
            "localhost:80:80",
            "local host",
            "localhost/x",
            "user@localhost",
        ] {
            assert!(!r.allows(bad), "{bad}");
        }
    }

    #[test]
    fn configured_names_answer_with_their_port_and_scheme() {
        let mut r = HostRules::loopback();
        r.add("ops.example.com").unwrap();
        r.add("https://tls.example.com:8443").unwrap();
        r.add("::1").unwrap();
        r.add("10.1.2.3").unwrap();
        assert!(r.allows("ops.example.com:1234"));
        assert!(r.allows("tls.example.com:8443"));
        assert!(!r.allows("tls.example.com:8444"));
        assert!(r.allows("10.1.2.3:8080"));
        assert!(!r.allows("10.1.2.4:8080"));
        assert!(r.same_origin("http://ops.example.com", "ops.example.com"));
        assert!(!r.same_origin("https://ops.example.com", "ops.example.com"));
        assert!(r.same_origin("https://tls.example.com:8443", "tls.example.com:8443"));
        assert!(!r.same_origin("https://localhost:8080", "localhost:8080"));
        assert!(
            !r.same_origin("http://evil.example", "evil.example"),
            "not allowed"
        );
        assert!(!r.same_origin("null", "localhost"));
        for bad in ["", "ops.example.com/path", "a@b", "ftp://x", "https://"] {
            assert!(HostRules::loopback().add(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn any_ip_answers_addresses_but_not_names() {
        let mut r = HostRules::loopback();
        r.any_ip = true;
        assert!(r.allows("192.168.1.20:8080"));
        assert!(r.allows("[fe80::1]:8080"));
        assert!(!r.allows("attacker.example:8080"));
    }
}
