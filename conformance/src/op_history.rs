//! Work over time: workers add per-queue, per-minute sums of finished, failed and dead
//! attempts; every handle of the store reads the same totals, by queue and span.

use std::time::Duration;

use tenure_core::{
    history_minute, HistoryAddParams, HistoryCounts, HistoryEntry, HistoryParams, HistoryPoint,
    Store, HISTORY_KEEP, MAX_HISTORY_SPAN,
};

use crate::case::{register, Case, CaseResult, Env};
use crate::check::{ensure_eq, expect_invalid, pass, OrFail};
use crate::fixtures::queue;
use crate::harness::Harness;

pub(crate) const GROUP: &str = "op_history";

const MINUTE: Duration = Duration::from_secs(60);

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        history_adds_sum_per_queue_and_minute_across_handles,
        history_reads_one_queue_and_only_the_span_asked,
        history_keeps_every_minute_younger_than_history_keep,
        history_params_out_of_bounds_are_refused_naming_the_field,
    ]
}

fn counts(finished: u64, failed: u64, dead: u64) -> HistoryCounts {
    HistoryCounts::new(finished, failed, dead)
}

async fn add<S: Store + ?Sized>(
    store: &S,
    entries: Vec<HistoryEntry>,
) -> Result<(), crate::case::Failure> {
    store
        .history_add(HistoryAddParams::new(entries))
        .await
        .or_fail("history_add")
}

async fn read<S: Store + ?Sized>(
    store: &S,
    params: HistoryParams,
) -> Result<Vec<HistoryPoint>, crate::case::Failure> {
    store.history(params).await.or_fail("history")
}

pub(crate) async fn history_adds_sum_per_queue_and_minute_across_handles<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (a, b) = (queue("hist-a")?, queue("hist-b")?);
    let m0 = history_minute(env.now());
    let m1 = m0 + MINUTE;
    let peer = env.peer().await?;
    add(
        env.store(),
        vec![
            HistoryEntry::new(a.clone(), m0, counts(3, 1, 0)),
            HistoryEntry::new(b.clone(), m0, counts(1, 0, 1)),
        ],
    )
    .await?;
    // Two handles at once, on the same minute: both sums count.
    let one = add(
        env.store(),
        vec![HistoryEntry::new(
            a.clone(),
            m0 + Duration::from_secs(30),
            counts(2, 0, 0),
        )],
    );
    let two = add(
        &*peer,
        vec![
            HistoryEntry::new(a.clone(), m0, counts(5, 2, 1)),
            HistoryEntry::new(a.clone(), m1, counts(7, 0, 0)),
        ],
    );
    let (one, two) = tokio::join!(one, two);
    one?;
    two?;
    let span = |q| HistoryParams::new(q, m0, m1 + MINUTE);
    ensure_eq(
        read(&*peer, span(a.clone())).await?,
        vec![
            HistoryPoint::new(m0, counts(10, 3, 1)),
            HistoryPoint::new(m1, counts(7, 0, 0)),
        ],
        "queue hist-a's minutes read through the peer handle (every add summed)",
    )?;
    ensure_eq(
        read(env.store(), span(b)).await?,
        vec![HistoryPoint::new(m0, counts(1, 0, 1))],
        "queue hist-b's minutes (only its own adds)",
    )?;
    pass()
}

pub(crate) async fn history_reads_one_queue_and_only_the_span_asked<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, longer) = (queue("hist")?, queue("hist-longer")?);
    let m0 = history_minute(env.now());
    let at = |n: u32| m0 + MINUTE * n;
    add(
        env.store(),
        vec![
            HistoryEntry::new(q.clone(), at(0), counts(1, 0, 0)),
            HistoryEntry::new(q.clone(), at(1), counts(0, 2, 0)),
            HistoryEntry::new(q.clone(), at(2), counts(0, 0, 0)),
            HistoryEntry::new(q.clone(), at(3), counts(0, 0, 3)),
            HistoryEntry::new(longer.clone(), at(1), counts(9, 9, 9)),
        ],
    )
    .await?;
    ensure_eq(
        read(env.store(), HistoryParams::new(q.clone(), at(1), at(3))).await?,
        vec![HistoryPoint::new(at(1), counts(0, 2, 0))],
        "minutes 1..3 of queue hist (minute 2 has no count; minute 3 is past the span; \
         hist-longer is another queue)",
    )?;
    ensure_eq(
        read(env.store(), HistoryParams::new(q.clone(), at(4), at(9))).await?,
        vec![],
        "a span with no minute added",
    )?;
    ensure_eq(
        read(env.store(), HistoryParams::new(queue("his")?, at(0), at(9))).await?,
        vec![],
        "queue his, whose name begins queue hist's",
    )?;
    pass()
}

pub(crate) async fn history_keeps_every_minute_younger_than_history_keep<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("hist-keep")?;
    let old = history_minute(env.now());
    let kept = old + MINUTE;
    add(
        env.store(),
        vec![
            HistoryEntry::new(q.clone(), old, counts(1, 0, 0)),
            HistoryEntry::new(q.clone(), kept, counts(2, 0, 0)),
        ],
    )
    .await?;
    // The newest minute added is exactly HISTORY_KEEP after `kept`: `kept` stays.
    let newest = kept + HISTORY_KEEP;
    add(
        env.store(),
        vec![HistoryEntry::new(q.clone(), newest, counts(3, 0, 0))],
    )
    .await?;
    ensure_eq(
        read(
            env.store(),
            HistoryParams::new(q.clone(), kept, kept + MINUTE),
        )
        .await?,
        vec![HistoryPoint::new(kept, counts(2, 0, 0))],
        "the minute HISTORY_KEEP before the newest minute added",
    )?;
    ensure_eq(
        read(env.store(), HistoryParams::new(q, newest, newest + MINUTE)).await?,
        vec![HistoryPoint::new(newest, counts(3, 0, 0))],
        "the newest minute added",
    )?;
    pass()
}

pub(crate) async fn history_params_out_of_bounds_are_refused_naming_the_field<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("hist-bad")?;
    let m = history_minute(env.now());
    expect_invalid(
        env.store().history_add(HistoryAddParams::new(vec![])).await,
        "entries",
        "history_add with no entries",
    )?;
    let mut odd = HistoryEntry::new(q.clone(), m, counts(1, 0, 0));
    odd.minute = m + Duration::from_secs(1);
    expect_invalid(
        env.store()
            .history_add(HistoryAddParams::new(vec![
                HistoryEntry::new(q.clone(), m, counts(1, 0, 0)),
                odd,
            ]))
            .await,
        "minute",
        "history_add with a minute that does not start a minute",
    )?;
    expect_invalid(
        env.store()
            .history(HistoryParams::new(
                q.clone(),
                m,
                m + MAX_HISTORY_SPAN + MINUTE,
            ))
            .await,
        "since",
        "history over more than MAX_HISTORY_SPAN",
    )?;
    expect_invalid(
        env.store()
            .history(HistoryParams::new(q.clone(), m + MINUTE, m))
            .await,
        "until",
        "history ending before it starts",
    )?;
    ensure_eq(
        read(env.store(), HistoryParams::new(q, m, m + MINUTE)).await?,
        vec![],
        "the history after the refused adds (nothing written)",
    )?;
    pass()
}
