//! Instants, durations, payloads and path segments as the pages show them.

use std::fmt::Write as _;
use std::time::Duration;

use tenure_core::Timestamp;

/// An instant as RFC 3339 in UTC, to the millisecond.
pub(crate) fn iso(t: Timestamp) -> String {
    match chrono::DateTime::from_timestamp_micros(t.as_micros()) {
        Some(dt) => dt.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None => format!("{}us", t.as_micros()),
    }
}

/// A duration for people: `850ms`, `42s`, `3m12s`, `5h03m`, `2d04h`.
pub(crate) fn span(d: Duration) -> String {
    let s = d.as_secs();
    if s == 0 {
        format!("{}ms", d.as_millis())
    } else if s < 60 {
        format!("{s}s")
    } else if s < 3_600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3_600, (s % 3_600) / 60)
    } else {
        format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3_600)
    }
}

/// An instant relative to `now`: `3m12s ago`, `in 42s`, `now`.
pub(crate) fn relative(t: Timestamp, now: Timestamp) -> String {
    if t == now {
        "now".to_owned()
    } else if t < now {
        format!("{} ago", span(now.duration_since(t)))
    } else {
        format!("in {}", span(t.duration_since(now)))
    }
}

/// An age like `30s`, `15m`, `6h`, `7d`; `None` for an empty text.
pub(crate) fn parse_age(s: &str) -> Result<Option<Duration>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not an age like 30s, 15m, 6h or 7d"))?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3_600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(format!("{s:?}: the unit must be s, m, h or d")),
    };
    if secs == 0 {
        return Err(format!("{s:?} must be more than zero"));
    }
    Ok(Some(Duration::from_secs(secs)))
}

/// `text` on one line, cut to `max` characters with an ellipsis.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut s: String = one_line.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// A queue name as one URL path segment: every byte but letters, digits, `_` and `-`
/// percent-encoded, and a name of dots only (`.`, `..`) behind a `~`.
///
/// Percent-encoding alone does not keep `..` a name: browsers (the WHATWG URL
/// standard) treat `%2E%2E` as `..` and resolve it away, so `/queues/%2E%2E` is
/// fetched as `/`. `~` is never part of a queue name, so `~..` is unambiguous;
/// [`queue_segment`] reads it back.
pub(crate) fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    if !name.is_empty() && name.bytes().all(|b| b == b'.') {
        out.push('~');
    }
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The queue name a decoded path segment of [`segment`] carries: without its `~`.
pub(crate) fn queue_segment(raw: &str) -> &str {
    raw.strip_prefix('~').unwrap_or(raw)
}

/// `back` when it is a path of the dashboard under `base` (`""` at the root): it
/// starts with `/` (with `base` and then `/`, `?` or its end), has no `//`, `\` or `#`, no
/// `.` or `..` step (nor their encodings), and only visible ASCII (no control
/// character, space, tab or newline, which browsers strip or a `Location` header
/// cannot carry).
pub(crate) fn dashboard_path(back: &str, base: &str) -> bool {
    let visible = !back.is_empty() && back.bytes().all(|b| b.is_ascii_graphic());
    if !visible || !back.starts_with('/') || back.contains("//") || back.contains(['\\', '#']) {
        return false;
    }
    let under_base = base.is_empty()
        || back == base
        || back.starts_with(&format!("{base}/"))
        || back.starts_with(&format!("{base}?"));
    let path = back.split(['?', '#']).next().unwrap_or_default();
    let steps_ok = path.split('/').all(|step| {
        let lower = step.to_ascii_lowercase().replace("%2e", ".");
        lower != "." && lower != ".."
    });
    under_base && steps_ok
}

/// A query value, percent-encoded.
pub(crate) fn query_value(value: &str) -> String {
    segment(value)
}

/// At most `max` bytes of a payload for people: its text when it is UTF-8 (cut at a
/// character boundary), otherwise hex. Answers the preview and whether it was cut.
pub(crate) fn preview(payload: &[u8], max: usize) -> (String, bool) {
    let cut = payload.len() > max;
    let head = &payload[..payload.len().min(max)];
    match std::str::from_utf8(head) {
        Ok(s) => (s.to_owned(), cut),
        Err(e) if cut && e.error_len().is_none() => {
            // Cut inside a character: show the whole characters before it.
            let valid = &head[..e.valid_up_to()];
            (String::from_utf8_lossy(valid).into_owned(), cut)
        }
        Err(_) => {
            let mut hex = String::with_capacity(head.len() * 3);
            for (i, b) in head.iter().enumerate() {
                if i > 0 {
                    hex.push(if i % 16 == 0 { '\n' } else { ' ' });
                }
                let _ = write!(hex, "{b:02x}");
            }
            (hex, cut)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_are_capped_text_or_hex() {
        assert_eq!(preview(b"hello", 10), ("hello".to_owned(), false));
        assert_eq!(preview(b"hello", 3), ("hel".to_owned(), true));
        assert_eq!(preview("é".as_bytes(), 1), (String::new(), true));
        assert_eq!(preview(&[0xff, 0x00], 10), ("ff 00".to_owned(), false));
    }

    #[test]
    fn queue_names_become_safe_path_segments() {
        assert_eq!(segment("emails"), "emails");
        assert_eq!(segment(".."), "~%2E%2E");
        assert_eq!(segment("."), "~%2E");
        assert_eq!(segment("..."), "~%2E%2E%2E");
        assert_eq!(segment("a.."), "a%2E%2E");
        assert_eq!(segment("a:b.c"), "a%3Ab%2Ec");
        assert_eq!(queue_segment("~.."), "..");
        assert_eq!(queue_segment("emails"), "emails");
    }

    #[test]
    fn back_is_only_ever_a_path_of_the_dashboard() {
        for ok in [
            "/",
            "/queues/emails?state=dead",
            "/queues/~%2E%2E",
            "/items/x",
        ] {
            assert!(dashboard_path(ok, ""), "{ok}");
        }
        for bad in [
            "",
            "x",
            "//evil.example/",
            "/\t/evil.example",
            "/\t//evil.example",
            "/\\evil.example",
            "/a\nb",
            "/a\r\nSet-Cookie: x=1",
            "/a b",
            "https://evil.example/",
            "javascript:alert(1)",
            "/queues/../../x",
            "/%2e%2E/x",
            "/é",
        ] {
            assert!(!dashboard_path(bad, ""), "{bad:?}");
        }
        assert!(dashboard_path("/ops", "/ops"));
        assert!(dashboard_path("/ops/queues/x", "/ops"));
        assert!(dashboard_path("/ops?notice=1", "/ops"));
        assert!(!dashboard_path("/opsx", "/ops"));
        assert!(!dashboard_path("/ops/../elsewhere", "/ops"));
        assert!(!dashboard_path("/elsewhere", "/ops"));
    }

    #[test]
    fn ages_read_with_their_unit() {
        assert_eq!(parse_age(""), Ok(None));
        assert_eq!(parse_age("7d"), Ok(Some(Duration::from_secs(7 * 86_400))));
        assert!(parse_age("0s").is_err());
        assert!(parse_age("5w").is_err());
    }
}
