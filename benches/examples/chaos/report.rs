//! The figures as tables, a timeline picture and JSON.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use tenure_core::ItemId;

use crate::fleet::{Event, Kind};
use crate::scenario::{Fault, Outcome};

/// Finishes per bucket over the run (at most 100 buckets of whole tenths of a second)
/// and where each fault fell: `K` a worker kill, `S` a server fault.
pub(crate) fn timeline(
    faults: &[Fault],
    events: &[Event],
    started_us: u64,
    seconds: f64,
) -> (Vec<usize>, f64, Vec<(usize, char)>) {
    let bucket_s = ((seconds / 100.0 * 10.0).ceil() / 10.0).max(0.1);
    let n = (seconds / bucket_s).ceil() as usize + 1;
    let at = |us: u64| ((us.saturating_sub(started_us) as f64 / 1e6) / bucket_s) as usize;
    let mut counts = vec![0; n];
    for e in events.iter().filter(|e| e.kind == Kind::Accepted) {
        counts[at(e.at_us).min(n - 1)] += 1;
    }
    let marks = faults
        .iter()
        .map(|f| match f {
            Fault::Kill { at_us, .. } => (at(*at_us).min(n - 1), 'K'),
            Fault::Server { at_us, .. } => (at(*at_us).min(n - 1), 'S'),
        })
        .collect();
    (counts, bucket_s, marks)
}

/// The timeline as two lines of text: a bar per bucket (`▁` to `█`, blank for
/// none) and the faults under it.
pub(crate) fn picture(o: &Outcome) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let top = o.timeline.iter().copied().max().unwrap_or(0).max(1);
    let bars: String = o
        .timeline
        .iter()
        .map(|c| {
            if *c == 0 {
                ' '
            } else {
                BARS[(c * 7).div_ceil(top).min(7)]
            }
        })
        .collect();
    let mut under = vec![' '; o.timeline.len()];
    for (at, mark) in &o.marks {
        under[*at] = if under[*at] == ' ' || under[*at] == *mark {
            *mark
        } else {
            '*'
        };
    }
    format!(
        "finishes per {:.1} s (highest {:.0}/s); K worker killed, S server fault\n{bars}\n{}",
        o.bucket_s,
        top as f64 / o.bucket_s,
        under.iter().collect::<String>().trim_end()
    )
}

/// Per fault: its name, when (s into the run), and the time to recover (see the
/// module docs); `None` where there was nothing to recover.
pub(crate) fn recovery(
    faults: &[Fault],
    events: &[Event],
) -> Vec<(String, f64, Option<f64>, Option<f64>)> {
    let first_us = events.iter().map(|e| e.at_us).min().unwrap_or(0);
    let secs = |us: u64| us.saturating_sub(first_us) as f64 / 1e6;
    // When each item was first accepted, and the runs each process started but did
    // not finish.
    let mut first_accept: HashMap<ItemId, Vec<u64>> = HashMap::new();
    for e in events.iter().filter(|e| e.kind == Kind::Accepted) {
        first_accept.entry(e.id).or_default().push(e.at_us);
    }
    faults
        .iter()
        .map(|f| match *f {
            Fault::Kill { at_us, process } => {
                let finished_by_it: HashSet<ItemId> = events
                    .iter()
                    .filter(|e| e.process == process && e.kind == Kind::Accepted)
                    .map(|e| e.id)
                    .collect();
                let stranded: HashSet<ItemId> = events
                    .iter()
                    .filter(|e| {
                        e.process == process
                            && e.kind == Kind::Run
                            && !finished_by_it.contains(&e.id)
                    })
                    .map(|e| e.id)
                    .collect();
                // Items it was running that another worker finished after the kill
                // (on Redis, an item it finished whose log line the kill cut off
                // is done with no later finish, and is not counted here).
                let later: Vec<u64> = stranded
                    .iter()
                    .filter_map(|id| {
                        first_accept
                            .get(id)?
                            .iter()
                            .copied()
                            .filter(|t| *t > at_us)
                            .min()
                    })
                    .collect();
                (
                    format!("worker SIGKILL ({} items taken over)", later.len()),
                    secs(at_us),
                    None,
                    later.iter().max().map(|t| (t - at_us) as f64 / 1e6),
                )
            }
            Fault::Server {
                what,
                at_us,
                back_us,
            } => {
                let next = events
                    .iter()
                    .filter(|e| e.kind == Kind::Accepted && e.at_us > back_us)
                    .map(|e| e.at_us)
                    .min();
                (
                    what.to_owned(),
                    secs(at_us),
                    Some((back_us - at_us) as f64 / 1e6),
                    next.map(|t| (t - back_us) as f64 / 1e6),
                )
            }
        })
        .collect()
}

pub(crate) fn secs(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |s| format!("{s:.2}"))
}

pub(crate) fn summary_table(outcomes: &[Outcome]) -> String {
    let mut t = String::from(
        "| scenario | items acknowledged | lost | finished by a superseded lease | finished twice | items run more than once (extra runs) | dead | items/s | seconds |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for o in outcomes {
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} ({}) | {} | {:.0} | {:.1} |",
            o.name,
            o.acked,
            o.lost,
            o.superseded,
            o.twice,
            o.rerun_items,
            o.extra_runs,
            o.dead,
            o.rate,
            o.seconds
        );
    }
    t
}

/// The paced runs' note, and what each durability setting costs: the drain rate with
/// it over the rate without, from the no-fault runs of this run.
pub(crate) fn costs(outcomes: &[Outcome]) -> String {
    let rate = |name: &str| outcomes.iter().find(|o| o.name == name).map(|o| o.rate);
    let mut t = String::from(
        "\nThe runs with faults are paced: the producer enqueues at a steady rate, so their \
         items/s says the fleet kept up. The runs without faults drain as fast as the fleet \
         goes; what a setting costs is the ratio of two of them:\n\n",
    );
    for (what, with, without) in [
        (
            "a synchronous standby (PostgreSQL)",
            "PostgreSQL, synchronous standby, no faults",
            "PostgreSQL, asynchronous standby, no faults",
        ),
        (
            "`wait_replicas(1, 1 s)` (Redis)",
            "Redis Sentinel, wait_replicas(1, 1 s), no faults",
            "Redis Sentinel, no WAIT, no faults",
        ),
    ] {
        if let (Some(a), Some(b)) = (rate(with), rate(without)) {
            let _ = writeln!(
                t,
                "- {what}: {a:.0} items/s against {b:.0}, a ratio of {:.2}.",
                a / b
            );
        }
    }
    t
}

pub(crate) fn faults_table(o: &Outcome) -> String {
    let mut t = format!(
        "**{}**\n\n```text\n{}\n```\n\n| fault | at (s) | server gone (s) | recovered after (s) |\n|---|---|---|---|\n",
        o.name,
        picture(o)
    );
    for (what, at, down, back) in &o.faults {
        let _ = writeln!(
            t,
            "| {what} | {at:.1} | {} | {} |",
            secs(*down),
            secs(*back)
        );
    }
    t
}

pub(crate) fn json(o: &Outcome) -> String {
    let faults: Vec<String> = o
        .faults
        .iter()
        .map(|(what, at, down, back)| {
            let num = |v: &Option<f64>| v.map_or_else(|| "null".into(), |s| format!("{s:.3}"));
            format!(
                "{{\"fault\":\"{what}\",\"at_s\":{at:.3},\"server_gone_s\":{},\"recovered_after_s\":{}}}",
                num(down),
                num(back)
            )
        })
        .collect();
    format!(
        "{{\"scenario\":\"{}\",\"acknowledged\":{},\"enqueues_unanswered\":{},\"lost\":{},\"superseded_finishes\":{},\
         \"finished_twice\":{},\"items_run_more_than_once\":{},\"extra_runs\":{},\"done_answer_unlogged\":{},\
         \"dead\":{},\"items_per_s\":{:.1},\"seconds\":{:.2},\"faults\":[{}]}}",
        o.name,
        o.acked,
        o.unanswered,
        o.lost,
        o.superseded,
        o.twice,
        o.rerun_items,
        o.extra_runs,
        o.unlogged,
        o.dead,
        o.rate,
        o.seconds,
        faults.join(",")
    )
}
