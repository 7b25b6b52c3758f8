//! What the operator commands print: aligned tables for people, one JSON document for
//! scripts, and the times and durations in both.

use std::time::Duration;

use serde_json::{json, Value};
use tenure::{SystemClock, Timestamp};

/// The common options of the operator commands: the store and the output format.
#[derive(Debug, clap::Args)]
pub(crate) struct Target {
    /// The store: memory://, sqlite://PATH, postgres://USER@HOST/DB?tenure_schema=NAME,
    /// redis://HOST:6379?tenure_prefix=NAME. Default: $TENURE_URL.
    #[arg(env = "TENURE_URL", value_name = "URL")]
    pub(crate) url: String,

    /// Print one JSON document instead of tables (errors too, on stderr).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Columns of text, left-aligned, two spaces apart.
pub(crate) struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(headers: &[&'static str]) -> Self {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table, a line per row after the header line; `empty` instead when there
    /// are no rows.
    pub(crate) fn render(&self, empty: &str) -> String {
        if self.rows.is_empty() {
            return format!("{empty}\n");
        }
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut out = String::new();
            for (i, cell) in cells.enumerate() {
                if i > 0 {
                    out.push_str("  ");
                }
                out.push_str(cell);
                let pad = widths.get(i).copied().unwrap_or(0);
                for _ in cell.chars().count()..pad {
                    out.push(' ');
                }
            }
            out.truncate(out.trim_end().len());
            out.push('\n');
            out
        };
        let mut out = line(&mut self.headers.iter().copied());
        for row in &self.rows {
            out.push_str(&line(&mut row.iter().map(String::as_str)));
        }
        out
    }
}

/// Prints a JSON document on one line.
pub(crate) fn print_json(value: &Value) {
    println!("{value}");
}

/// The wall clock's now, for ages and "in ..." in human output.
pub(crate) fn now() -> Timestamp {
    tenure::Clock::now(&SystemClock)
}

/// An instant as RFC 3339 in UTC with microseconds: `2026-12-01T13:05:12.123456Z`.
pub(crate) fn iso(t: Timestamp) -> String {
    match chrono::DateTime::from_timestamp_micros(t.as_micros()) {
        Some(dt) => dt.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        None => format!("{}us", t.as_micros()),
    }
}

/// An instant as JSON: its RFC 3339 text, or null.
pub(crate) fn iso_json(t: Option<Timestamp>) -> Value {
    t.map_or(Value::Null, |t| json!(iso(t)))
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

/// A duration as JSON seconds (fractional).
pub(crate) fn seconds(d: Duration) -> Value {
    json!(d.as_secs_f64())
}

/// `text` cut to `max` characters, with an ellipsis, on one line.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_their_columns_and_say_when_they_are_empty() {
        let mut t = Table::new(&["QUEUE", "READY"]);
        t.row(vec!["emails".into(), "3".into()]);
        t.row(vec!["q".into(), "12345".into()]);
        assert_eq!(
            t.render("none"),
            "QUEUE   READY\nemails  3\nq       12345\n"
        );
        assert_eq!(Table::new(&["A"]).render("(no queues)"), "(no queues)\n");
    }

    #[test]
    fn durations_and_instants_read_as_people_write_them() {
        assert_eq!(span(Duration::from_millis(850)), "850ms");
        assert_eq!(span(Duration::from_secs(192)), "3m12s");
        assert_eq!(span(Duration::from_secs(5 * 3600 + 180)), "5h03m");
        assert_eq!(span(Duration::from_secs(2 * 86_400 + 4 * 3600)), "2d04h");
        let t = Timestamp::from_micros(1_700_000_000_123_456);
        assert_eq!(iso(t), "2023-11-14T22:13:20.123456Z");
        assert_eq!(relative(t, t + Duration::from_secs(42)), "42s ago");
        assert_eq!(relative(t + Duration::from_secs(42), t), "in 42s");
        assert_eq!(clip("a\nlong error", 6), "a lon…");
    }
}
