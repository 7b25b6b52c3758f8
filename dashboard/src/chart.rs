//! Work over time as the pages draw it: a queue's (or every queue's) history in
//! buckets, as a server-rendered SVG of stacked bars (finished, failed, dead) with a
//! `<title>` per bar, and as JSON. No script draws it; the stylesheet colours it.

use maud::{html, Markup};
use serde_json::{json, Value};
use tenure_core::{history_minute, HistoryCounts, HistoryPoint, Timestamp};

use crate::text::iso;

/// The span a chart covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Span {
    /// The last 60 minutes, a bar per minute.
    Hour,
    /// The last 24 hours, a bar per 15 minutes.
    Day,
}

impl Span {
    /// The span `?span=` names: `hour` (or nothing) or `day`.
    pub(crate) fn parse(s: Option<&str>) -> Result<Span, String> {
        match s {
            None | Some("") | Some("hour") => Ok(Span::Hour),
            Some("day") => Ok(Span::Day),
            Some(other) => Err(format!("span: {other:?} is not hour or day")),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Span::Hour => "hour",
            Span::Day => "day",
        }
    }

    /// Minutes per bar.
    pub(crate) fn bucket_minutes(self) -> u32 {
        match self {
            Span::Hour => 1,
            Span::Day => 15,
        }
    }

    /// Bars in the chart.
    pub(crate) fn buckets(self) -> u32 {
        match self {
            Span::Hour => 60,
            Span::Day => 96,
        }
    }

    /// The minutes read for a chart ending at `now`: from the start of the first bar
    /// up to the end of the minute `now` is in.
    pub(crate) fn range(self, now: Timestamp) -> (Timestamp, Timestamp) {
        let until = history_minute(now) + MINUTE;
        let minutes = self.bucket_minutes() * self.buckets();
        (until - MINUTE * minutes, until)
    }
}

const MINUTE: std::time::Duration = std::time::Duration::from_secs(60);

/// A history in the bars of a span.
#[derive(Clone, Debug)]
pub(crate) struct Series {
    pub(crate) span: Span,
    pub(crate) since: Timestamp,
    /// Per bar, its first minute and its sums.
    pub(crate) bars: Vec<(Timestamp, HistoryCounts)>,
}

impl Series {
    /// `points` (of one queue or summed over several) in the bars of `span` ending
    /// at `now`.
    pub(crate) fn new(span: Span, now: Timestamp, points: &[HistoryPoint]) -> Series {
        let (since, _) = span.range(now);
        let width = MINUTE * span.bucket_minutes();
        let mut bars: Vec<(Timestamp, HistoryCounts)> = (0..span.buckets())
            .map(|i| (since + width * i, HistoryCounts::default()))
            .collect();
        let width_us = width.as_micros() as i64;
        for p in points {
            let off = p.minute.as_micros() - since.as_micros();
            if off < 0 {
                continue;
            }
            if let Some(bar) = usize::try_from(off / width_us)
                .ok()
                .and_then(|i| bars.get_mut(i))
            {
                bar.1 = bar.1.plus(p.counts);
            }
        }
        Series { span, since, bars }
    }

    pub(crate) fn total(&self) -> HistoryCounts {
        self.bars
            .iter()
            .fold(HistoryCounts::default(), |a, (_, c)| a.plus(*c))
    }

    fn peak(&self) -> u64 {
        self.bars.iter().map(|(_, c)| sum(c)).max().unwrap_or(0)
    }

    /// The series as JSON: the span, the bar width and every bar.
    pub(crate) fn json(&self) -> Value {
        let t = self.total();
        json!({
            "span": self.span.as_str(),
            "since": iso(self.since),
            "bucket_minutes": self.span.bucket_minutes(),
            "total": counts_json(&t),
            "buckets": self.bars.iter().map(|(at, c)| {
                let mut v = counts_json(c);
                v["at"] = json!(iso(*at));
                v
            }).collect::<Vec<_>>(),
        })
    }

    /// The chart: stacked bars, the peak and the totals in words, a legend.
    pub(crate) fn chart(&self, label: &str) -> Markup {
        const W: f64 = 600.0;
        const H: f64 = 120.0;
        let peak = self.peak();
        let n = self.bars.len().max(1) as f64;
        let bw = W / n;
        let scale = if peak == 0 { 0.0 } else { H / peak as f64 };
        let t = self.total();
        let per = match self.span {
            Span::Hour => "minute",
            Span::Day => "15 minutes",
        };
        html! {
            figure.chart data-span=(self.span.as_str()) {
                svg viewBox=(format!("0 0 {W} {H}")) preserveAspectRatio="none" role="img"
                    aria-label=(format!("{label}: {} finished, {} failed, {} dead in the last {}", t.finished, t.failed, t.dead, self.span.as_str())) {
                    line.axis x1="0" y1=(H) x2=(W) y2=(H) {}
                    @for (i, (at, c)) in self.bars.iter().enumerate() {
                        @if sum(c) > 0 {
                            @let x = i as f64 * bw;
                            @let hf = c.finished as f64 * scale;
                            @let hx = c.failed as f64 * scale;
                            @let hd = c.dead as f64 * scale;
                            g.bar {
                                title { (hhmm(*at)) " UTC: " (c.finished) " finished, " (c.failed) " failed, " (c.dead) " dead" }
                                @if c.finished > 0 { rect.finished x=(fmt(x)) y=(fmt(H - hf)) width=(fmt(bw * 0.9)) height=(fmt(hf)) {} }
                                @if c.failed > 0 { rect.failed x=(fmt(x)) y=(fmt(H - hf - hx)) width=(fmt(bw * 0.9)) height=(fmt(hx)) {} }
                                @if c.dead > 0 { rect.dead x=(fmt(x)) y=(fmt(H - hf - hx - hd)) width=(fmt(bw * 0.9)) height=(fmt(hd)) {} }
                            }
                        }
                    }
                }
                figcaption {
                    span.key.finished { "finished " strong { (t.finished) } } " · "
                    span.key.failed { "failed " strong { (t.failed) } } " · "
                    span.key.dead { "dead " strong { (t.dead) } }
                    " in the last " (self.span.as_str()) "; peak " (peak) " per " (per)
                    " (from " (hhmm(self.since)) " UTC)"
                    @if peak == 0 { ". Nothing finished: the history is what workers report every few seconds." }
                }
            }
        }
    }
}

fn sum(c: &HistoryCounts) -> u64 {
    c.finished.saturating_add(c.failed).saturating_add(c.dead)
}

fn fmt(v: f64) -> String {
    format!("{v:.2}")
}

fn hhmm(t: Timestamp) -> String {
    let s = iso(t);
    s.get(11..16).unwrap_or(&s).to_owned()
}

pub(crate) fn counts_json(c: &HistoryCounts) -> Value {
    json!({ "finished": c.finished, "failed": c.failed, "dead": c.dead })
}

/// Adds `more` (one queue's minutes) into `into` (minutes, sorted), minute by minute.
pub(crate) fn merge(into: &mut Vec<HistoryPoint>, more: &[HistoryPoint]) {
    let mut all: std::collections::BTreeMap<Timestamp, HistoryCounts> =
        into.iter().map(|p| (p.minute, p.counts)).collect();
    for p in more {
        let c = all.entry(p.minute).or_default();
        *c = c.plus(p.counts);
    }
    *into = all
        .into_iter()
        .map(|(m, c)| HistoryPoint::new(m, c))
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_fall_in_their_bars_and_the_chart_draws_them() {
        let now = Timestamp::from_micros(1_800_000_000_000_000);
        let (since, until) = Span::Hour.range(now);
        assert_eq!(until.duration_since(since), MINUTE * 60);
        let points = vec![
            HistoryPoint::new(since, HistoryCounts::new(3, 1, 0)),
            HistoryPoint::new(until - MINUTE, HistoryCounts::new(0, 0, 2)),
            HistoryPoint::new(since - MINUTE, HistoryCounts::new(9, 9, 9)),
        ];
        let s = Series::new(Span::Hour, now, &points);
        assert_eq!(s.bars.len(), 60);
        assert_eq!(s.bars[0].1, HistoryCounts::new(3, 1, 0));
        assert_eq!(s.bars[59].1, HistoryCounts::new(0, 0, 2));
        assert_eq!(s.total(), HistoryCounts::new(3, 1, 2));
        let svg = s.chart("q").into_string();
        assert_eq!(svg.matches("<rect").count(), 3, "{svg}");
        let day = Series::new(Span::Day, now, &points);
        assert_eq!(day.bars.len(), 96);
        // The minute before the hour is in the day.
        assert_eq!(day.total(), HistoryCounts::new(12, 10, 11));
    }
}
