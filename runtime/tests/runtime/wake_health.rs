//! The claim loop by the health of the store's cross-process wake-ups (seed 001): a
//! relaxed baseline while they are healthy, the tight base without backoff while the
//! listener is down, NOTIFY-only mode.

use std::time::Duration;

use tenure_core::{Store, WakeHealth, WakeSignal};
use tenure_runtime::{Job, PollPolicy, Worker};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::support::{enqueue, gaps_ms, memory, queue, until, Probe};

type Probed = Probe<tenure_memory::MemoryStore>;

/// A memory store behind a probe that hands out `signal`, a stand-in for a listener
/// whose health the test sets.
fn listened(health: WakeHealth) -> (Probed, WakeSignal) {
    let store = Probe::new(memory());
    let signal = WakeSignal::new();
    signal.set_health(health);
    store.use_wake(signal.clone());
    (store, signal)
}

fn idle(store: &Probed, poll: PollPolicy) -> Worker {
    Worker::builder(store.clone())
        .queue(queue())
        .concurrency(4)
        .maintenance(false)
        .poll(poll)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap()
}

fn claim_times(store: &Probed) -> Vec<Instant> {
    store.calls().claims.iter().map(|c| c.0).collect()
}

#[tokio::test(start_paused = true)]
async fn while_wake_ups_are_healthy_the_backoff_starts_from_the_relaxed_5_s_baseline() {
    let (store, _signal) = listened(WakeHealth::Healthy);
    enqueue(&store, &["one"]).await;
    let _worker = idle(&store, PollPolicy::default());
    until(Duration::from_secs(120), || store.calls().claims.len() >= 6).await;
    assert_eq!(
        store.calls().claims[0].2,
        1,
        "the first poll finds the item"
    );
    assert_eq!(
        gaps_ms(&claim_times(&store)[..6]),
        vec![5_000, 5_000, 10_000, 10_000, 10_000],
        "relaxed baseline after work and after the first empty poll, doubling, capped"
    );
}

/// A store that is down answers claims with errors; the listener of another
/// connection may well say its wake-ups are healthy meanwhile. Failed claims are not
/// empty polls: they are retried within half a second, so the worker is back at work
/// as soon as the store is, instead of after a relaxed 5 or 10 s wait.
#[tokio::test(start_paused = true)]
async fn failed_claims_are_retried_within_half_a_second_even_while_wake_ups_are_healthy() {
    let (store, _signal) = listened(WakeHealth::Healthy);
    store.fail_claims(6);
    let (tx, mut handled) = mpsc::unbounded_channel();
    let _worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(4)
        .maintenance(false)
        .handler(move |_job: Job| {
            let tx = tx.clone();
            async move {
                tx.send(Instant::now()).unwrap();
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(60), || store.calls().claims.len() >= 6).await;
    enqueue(&store, &["after the outage"]).await;
    let ran_at = handled.recv().await.unwrap();
    let at = claim_times(&store);
    assert_eq!(
        gaps_ms(&at[..7]),
        vec![250, 500, 500, 500, 500, 500],
        "after each failed claim: the base, doubling, capped at 500 ms"
    );
    assert_eq!(
        ran_at, at[6],
        "the first claim after the failures ran the item"
    );
}

#[tokio::test(start_paused = true)]
async fn with_no_relaxed_baseline_healthy_wake_ups_keep_the_tight_backoff() {
    let (store, _signal) = listened(WakeHealth::Healthy);
    let _worker = idle(&store, PollPolicy::default().relaxed(None));
    until(Duration::from_secs(60), || store.calls().claims.len() >= 5).await;
    assert_eq!(
        gaps_ms(&claim_times(&store)[..5]),
        vec![250, 500, 1000, 2000]
    );
}

#[tokio::test(start_paused = true)]
async fn a_store_without_cross_process_wake_ups_reports_local_and_keeps_the_tight_backoff() {
    let store = Probe::new(memory());
    assert_eq!(
        store.wake_signal().map(|s| s.health()),
        Some(WakeHealth::Local)
    );
    let _worker = idle(&store, PollPolicy::default());
    until(Duration::from_secs(60), || store.calls().claims.len() >= 5).await;
    assert_eq!(
        gaps_ms(&claim_times(&store)[..5]),
        vec![250, 500, 1000, 2000]
    );
}

#[tokio::test(start_paused = true)]
async fn a_listener_that_goes_down_pins_the_loop_to_the_base_until_it_is_back_then_it_relaxes() {
    let (store, signal) = listened(WakeHealth::Healthy);
    let _worker = idle(&store, PollPolicy::default());
    // Backed off to the 10 s cap.
    until(Duration::from_secs(60), || store.calls().claims.len() >= 3).await;
    let before = store.calls().claims.len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let down_at = Instant::now();
    signal.set_health(WakeHealth::Down);
    until(Duration::from_secs(5), || {
        store.calls().claims.len() >= before + 9
    })
    .await;
    let during = claim_times(&store)[before..before + 9].to_vec();
    assert_eq!(during[0], down_at, "the loss itself polls at once");
    assert_eq!(
        gaps_ms(&during),
        vec![250; 8],
        "no backoff while the listener is down, however many polls come back empty"
    );

    let n = store.calls().claims.len();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let up_at = Instant::now();
    signal.set_health(WakeHealth::Healthy);
    until(Duration::from_secs(30), || {
        store.calls().claims.len() >= n + 2
    })
    .await;
    let after = claim_times(&store)[n..n + 2].to_vec();
    assert_eq!(
        after[0], up_at,
        "the reconnect polls once at once (catch-up)"
    );
    assert_eq!(
        gaps_ms(&after),
        vec![10_000],
        "then the backoff is relaxed again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_listener_that_is_not_up_yet_is_down_and_the_loop_polls_at_the_base_until_it_is() {
    let (store, signal) = listened(WakeHealth::Down);
    let _worker = idle(&store, PollPolicy::default());
    until(Duration::from_secs(5), || store.calls().claims.len() >= 12).await;
    assert_eq!(gaps_ms(&claim_times(&store)[..12]), vec![250; 11]);
    signal.set_health(WakeHealth::Healthy);
    let n = store.calls().claims.len();
    until(Duration::from_secs(30), || {
        store.calls().claims.len() >= n + 2
    })
    .await;
    assert!(gaps_ms(&claim_times(&store)[n..n + 2])[0] >= 5_000);
}

#[tokio::test(start_paused = true)]
async fn notify_only_mode_sleeps_until_a_wake_up_while_healthy_and_polls_the_moment_the_listener_is_down(
) {
    let (store, signal) = listened(WakeHealth::Healthy);
    let (tx, mut handled) = mpsc::unbounded_channel();
    let _worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(4)
        .maintenance(false)
        .poll(PollPolicy::default().notify_only(true))
        .handler(move |job: Job| {
            let tx = tx.clone();
            async move {
                tx.send((Instant::now(), job.payload().to_vec())).unwrap();
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(20), || store.calls().claims.len() == 1).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(
        store.calls().claims.len(),
        1,
        "no poll at all in ten minutes while the wake-ups are healthy"
    );

    // An enqueue elsewhere, announced by the listener.
    enqueue(&store, &["announced"]).await;
    let woken_at = Instant::now();
    signal.notify();
    let (ran_at, payload) = handled.recv().await.unwrap();
    assert_eq!((ran_at, payload.as_slice()), (woken_at, &b"announced"[..]));
    tokio::time::sleep(Duration::from_secs(600)).await;
    let n = store.calls().claims.len();
    assert_eq!(n, 2, "the wake-up's poll, then sleep again");

    let down_at = Instant::now();
    signal.set_health(WakeHealth::Down);
    until(Duration::from_secs(5), || {
        store.calls().claims.len() >= n + 5
    })
    .await;
    let during = claim_times(&store)[n..n + 5].to_vec();
    assert_eq!(during[0], down_at, "the safety net re-engages at once");
    assert_eq!(gaps_ms(&during), vec![250; 4]);

    signal.set_health(WakeHealth::Healthy);
    let m = store.calls().claims.len();
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(
        store.calls().claims.len(),
        m + 1,
        "one catch-up poll after the reconnect, then no polling again"
    );
}
