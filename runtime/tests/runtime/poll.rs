//! The claim loop: adaptive poll, wake signal, free slots.

use std::time::Duration;

use tenure_runtime::{Job, Worker};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

use crate::support::{enqueue, gaps_ms, memory, queue, until, Probe};

#[tokio::test(start_paused = true)]
async fn empty_polls_wait_250_250_500_1000_2000_and_so_on_up_to_10000_ms() {
    let store = Probe::new(memory());
    enqueue(&store, &["one"]).await;
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(4)
        .maintenance(false)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    until(Duration::from_secs(120), || {
        store.calls().claims.len() >= 12
    })
    .await;

    let calls = store.calls();
    let polls = worker.metrics().polls;
    assert!(
        polls + 1 >= calls.claims.len() as u64 && polls <= calls.claims.len() as u64,
        "every answered claim is a poll: {polls} polls, {} claims",
        calls.claims.len()
    );
    let (_, asked, got) = calls.claims[0];
    assert_eq!(
        (asked, got),
        (4, 1),
        "the first poll asks for every free slot"
    );
    assert!(calls.claims[1..].iter().all(|c| c.2 == 0));
    let at: Vec<Instant> = calls.claims.iter().map(|c| c.0).collect();
    assert_eq!(
        gaps_ms(&at[..12]),
        vec![250, 250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000, 10_000],
        "base after work, base after the first empty poll, doubling from the second, capped"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wake_signal_ends_a_10_s_wait_at_once_and_the_claim_it_finds_resets_the_backoff() {
    let store = Probe::new(memory());
    let (tx, mut handled) = mpsc::unbounded_channel();
    let _worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(4)
        .maintenance(false)
        .handler(move |job: Job| {
            let tx = tx.clone();
            async move {
                tx.send((Instant::now(), job.payload().to_vec())).unwrap();
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    // Seven empty polls in a row: the loop now waits the full 10 s.
    until(Duration::from_secs(60), || store.calls().claims.len() >= 8).await;
    let last = store.calls().claims[7].0;
    assert_eq!(gaps_ms(&[store.calls().claims[6].0, last]), vec![10_000]);

    sleep_until(last + Duration::from_secs(3)).await;
    let enqueued_at = Instant::now();
    enqueue(&store, &["woken"]).await;
    let (ran_at, payload) = handled.recv().await.unwrap();
    assert_eq!(payload, b"woken");
    assert_eq!(
        ran_at, enqueued_at,
        "the wake polls at once, 7 s before the backoff would have"
    );
    assert_eq!(store.calls().claims[8].0, enqueued_at);

    until(Duration::from_secs(5), || store.calls().claims.len() >= 10).await;
    let calls = store.calls();
    assert_eq!(calls.claims[8].2, 1);
    assert_eq!(
        gaps_ms(&[calls.claims[8].0, calls.claims[9].0]),
        vec![250],
        "a non-empty claim resets the backoff to the base"
    );
}

#[tokio::test(start_paused = true)]
async fn the_loop_claims_only_up_to_its_free_slots() {
    let store = Probe::new(memory());
    enqueue(&store, &["a", "b", "c", "d", "e", "f", "g"]).await;
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(3)
        .maintenance(false)
        .handler(move |_job: Job| {
            let g = g.clone();
            async move {
                g.acquire().await.unwrap().forget();
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || worker.metrics().in_flight == 3).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        store.calls().claims.len(),
        1,
        "no poll while every slot is busy"
    );
    assert_eq!(store.calls().claims[0].1, 3);

    let freed_at = Instant::now();
    gate.add_permits(2);
    until(Duration::from_secs(5), || worker.metrics().claimed == 5).await;
    until(Duration::from_secs(5), || worker.metrics().in_flight == 3).await;
    let calls = store.calls();
    let later = &calls.claims[1..];
    assert_eq!(
        later
            .iter()
            .map(|c| (c.1, c.2 as u32))
            .fold((0, 0), |a, c| (a.0 + c.0, a.1 + c.1)),
        (2, 2),
        "after a full batch the loop claims again as soon as slots free, for exactly those"
    );
    assert!(
        later.iter().all(|c| c.0 == freed_at),
        "no poll wait in between"
    );
}

#[tokio::test(start_paused = true)]
async fn leases_beyond_what_was_asked_are_released_at_once() {
    let store = Probe::new(memory());
    let ids = enqueue(&store, &["a", "b"]).await;
    store.greedy_claims(true);
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .maintenance(false)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || worker.metrics().completed == 2).await;
    let calls = store.calls();
    assert_eq!((calls.claims[0].1, calls.claims[0].2), (1, 2));
    assert_eq!(calls.releases[0], 1, "the extra lease went back at once");
    let attempts = [
        crate::support::item(&store, ids[0]).await.attempt,
        crate::support::item(&store, ids[1]).await.attempt,
    ];
    assert_eq!(attempts, [1, 2], "the released item ran on its next claim");
}
