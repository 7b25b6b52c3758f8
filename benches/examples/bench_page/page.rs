//! The page itself: every table, from what the stores measured.

use std::fmt::Write as _;
use std::time::Duration;

use tenure_benches::cells::{self, backlog_label, Drainer, Rounds, BACKLOG, SMALL_BACKLOG};
use tenure_benches::page::{commit, machine, utc};
use tenure_benches::streams::{self, STREAM_CELLS};

use crate::{
    claim_label, sustained_length, Measured, CLAIM_CELLS, LOOPS, LOOP_POLL, RATE, SUSTAINED_SLOTS,
    WARMUP,
};

pub(crate) fn thousands(n: f64) -> String {
    let digits = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(crate) fn rate(r: &Rounds, label: &str) -> String {
    r.median(label).map_or_else(|| "-".into(), thousands)
}

pub(crate) fn ratio(r: &Rounds, num: &str, den: &str) -> String {
    match r.ratio(num, den) {
        Some((median, low, high)) if (high - low) > 0.005 => {
            format!("{median:.2} ({low:.2}-{high:.2})")
        }
        Some((median, _, _)) => format!("{median:.2}"),
        None => "-".into(),
    }
}

pub(crate) struct Run {
    pub(crate) started: u64,
    pub(crate) load_before: String,
    pub(crate) load_after: String,
    pub(crate) elapsed: Duration,
    pub(crate) scale: f64,
    pub(crate) rounds: usize,
    pub(crate) command: String,
}

pub(crate) fn page(run: &Run, stores: &[Measured]) -> String {
    let mut p = String::new();
    let versions: Vec<&str> = stores.iter().filter_map(|m| m.version.as_deref()).collect();
    let servers = if versions.is_empty() {
        String::new()
    } else {
        format!("; {} on the same machine", versions.join(", "))
    };
    let w = &mut p;
    let _ = writeln!(w, "# Benchmarks\n");
    let _ = writeln!(
        w,
        "Measured {} at {} on {}{servers}; load average {} before and {} after, {} in all.\n",
        utc(run.started),
        commit(),
        machine(),
        run.load_before,
        run.load_after,
        humantime(run.elapsed),
    );
    let _ = writeln!(
        w,
        "Every table on this page comes from that one run of\n\n```sh\n{}\n```\n",
        run.command
    );
    let _ = writeln!(
        w,
        "at scale {} ({}; scale 1 runs each cell for about 3 s on a quiet 2-core machine). \
         The client and the servers share the machine's cores. Items/s move between runs; \
         the ratios, measured back to back in one run, are what to read. To measure your own \
         database, run `tenure bench <url>` (see [operating](operating.md#sizing)).\n",
        run.scale,
        if run.rounds == 1 {
            "each cell once".to_owned()
        } else {
            format!(
                "each cell {} times, medians, ratio ranges in brackets",
                run.rounds
            )
        },
    );

    let _ = writeln!(w, "## Claim + complete beside a raw loop\n");
    let _ = writeln!(
        w,
        "`W` tasks loop `claim(B)` then one `complete` of the batch until `N` ready items \
         have finished, each exactly once. Raw is the same claim and fenced finalize written \
         directly against the backend (`benches/src/raw/`): a `Mutex<VecDeque>` on memory; \
         threads with a connection each and prepared `BEGIN IMMEDIATE` statements on SQLite; \
         the same `SKIP LOCKED` claim and `(id, attempt)`-fenced `DELETE` on the store's own \
         table on PostgreSQL; a Lua claim over a list and a finalize fenced on \
         `owner:attempt` on Redis. The raw loops keep no order index, streams, scopes, dedup \
         keys or recovery.\n"
    );
    let _ = writeln!(
        w,
        "| store | B, W | N | tenure items/s | raw items/s | tenure / raw |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    for m in stores {
        for (batch, workers) in CLAIM_CELLS {
            let (t, r) = (
                claim_label("tenure", batch, workers),
                claim_label("raw", batch, workers),
            );
            let n = if batch == 1 {
                m.sizes.claim_single
            } else {
                m.sizes.claim_batched
            };
            let _ = writeln!(
                w,
                "| {} | {batch}, {workers} | {} | {} | {} | {} |",
                m.name,
                thousands(n as f64),
                rate(&m.claim, &t),
                rate(&m.claim, &r),
                ratio(&m.claim, &t, &r),
            );
        }
    }

    let _ = writeln!(w, "\n## Through the Worker\n");
    let _ = writeln!(
        w,
        "A `Worker` with a no-op handler and maintenance off drains `N` items, timed from \
         its spawn to the last accepted completion, beside the store loop on the same `N`: \
         the Worker at 16 slots against the loop with as many items in flight (B=16, W=1), \
         at 64 and 256 against B=100, W=4.\n"
    );
    let _ = writeln!(
        w,
        "| store | N | store B=100 W=4 items/s | store B=16 W=1 items/s | Worker 16 / store B=16 W=1 | Worker 64 / store B=100 W=4 | Worker 256 / store B=100 W=4 |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    let b100 = Drainer::Store {
        batch: 100,
        workers: 4,
    }
    .label();
    let b16 = Drainer::Store {
        batch: 16,
        workers: 1,
    }
    .label();
    for m in stores {
        let r = &m.burndown;
        let ratios: Vec<String> = cells::burndown_ratios()
            .iter()
            .map(|(num, den)| ratio(r, num, den))
            .collect();
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} |",
            m.name,
            thousands(m.sizes.burndown as f64),
            rate(r, &b100),
            rate(r, &b16),
            ratios.join(" | "),
        );
    }

    let _ = writeln!(w, "\n## The top of a large backlog\n");
    let _ = writeln!(
        w,
        "The same drains of `N` items from the top of a backlog of {} and of a big one \
         (items scheduled a week out, in the same queue and indexes); the ratio big / small \
         is 1.0 when a claim costs the same on a full table as on an empty one.\n",
        thousands(SMALL_BACKLOG as f64)
    );
    let _ = writeln!(
        w,
        "| store | N | big backlog | store B=100 W=4 items/s (small) | store loop big / small | Worker 64 items/s (small) | Worker 64 big / small |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    for m in stores {
        let r = &m.backlog;
        let [store, worker] = BACKLOG;
        let cell = |d: &Drainer, backlog: usize| backlog_label(d, backlog);
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} | {} |",
            m.name,
            thousands(m.sizes.backlog as f64),
            thousands(m.big_backlog as f64),
            rate(r, &cell(&store, SMALL_BACKLOG)),
            ratio(
                r,
                &cell(&store, m.big_backlog),
                &cell(&store, SMALL_BACKLOG)
            ),
            rate(r, &cell(&worker, SMALL_BACKLOG)),
            ratio(
                r,
                &cell(&worker, m.big_backlog),
                &cell(&worker, SMALL_BACKLOG)
            ),
        );
    }

    let _ = writeln!(w, "\n## Stream runs\n");
    let _ = writeln!(
        w,
        "One task claiming 100 at a time drains `N` items without a stream, then `N` items \
         of one stream (G9): with runs off a claim takes only the stream's head, with \
         `stream_runs(100)` the head and up to 99 items behind it.\n"
    );
    let _ = writeln!(
        w,
        "| store | N | unstreamed items/s | one stream, runs off | one stream, runs of 100 | runs on / off | runs on / unstreamed |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    for m in stores {
        let r = &m.streams;
        let [unstreamed, off, on] = STREAM_CELLS.map(|c| c.label());
        let ratios: Vec<String> = streams::stream_ratios()
            .iter()
            .map(|(num, den)| ratio(r, num, den))
            .collect();
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} |",
            m.name,
            thousands(m.sizes.stream as f64),
            rate(r, &unstreamed),
            rate(r, &off),
            rate(r, &on),
            ratios.join(" | "),
        );
    }

    let _ = writeln!(w, "\n## Sustained pickup latency\n");
    let _ = writeln!(
        w,
        "A producer enqueues one item per call at {RATE} items/s (a {} s warm-up, then {} s \
         that count) while the items are worked; pickup latency is the handler's start \
         minus the start of the item's enqueue call. The Worker runs {SUSTAINED_SLOTS} \
         slots with its default poll policy on a store set up as an application runs it \
         (LISTEN/NOTIFY and pub/sub wake-ups on), the producer on the same handle. \
         Beside it, {} store loops claim {} item at a time and sleep {} ms after an empty \
         claim: a lower bound for polling, not a setting to run. Items/s is the items counted \
         over the time from the first one's enqueue to the last one's pickup: the \
         producer's rate while enqueues and pickups keep up. Every run checks that each \
         item was picked up exactly once.\n",
        WARMUP.as_secs(),
        sustained_length(run.scale).as_secs_f64(),
        LOOPS.0,
        LOOPS.1,
        LOOP_POLL.as_millis(),
    );
    let _ = writeln!(
        w,
        "| store | consumer | p50 ms | p99 ms | max ms | items/s |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    for m in stores {
        for (who, run) in &m.sustained {
            let ms = |us: u64| format!("{:.2}", us as f64 / 1000.0);
            let _ = match run {
                Ok(s) => writeln!(
                    w,
                    "| {} | {who} | {} | {} | {} | {} |",
                    m.name,
                    ms(s.latency.p50),
                    ms(s.latency.p99),
                    ms(s.latency.max),
                    thousands(s.per_sec),
                ),
                Err(e) => writeln!(
                    w,
                    "| {} | {who} | failed: {} | | | |",
                    m.name,
                    e.replace('|', "/")
                ),
            };
        }
    }
    let _ = writeln!(
        w,
        "\nThe cells are defined in `benches/src/` (`cells.rs`, `streams.rs`, `sustained.rs`, \
         `raw/`) and the page in `benches/examples/bench_page/`."
    );
    p
}

pub(crate) fn humantime(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{s} s")
    }
}
