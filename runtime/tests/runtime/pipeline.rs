//! Keeping the slots full: claims out at once while the queue has work, prefetch while
//! handlers are short, and prefetched leases given back rather than renewed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_core::{ItemId, ItemState, NewItem, ScopeKey, StreamKey};
use tenure_runtime::{Job, Worker};
use tokio::time::Instant;

use crate::support::{enqueue, enqueue_items, item, memory, queue, until, Calls, Probe};

fn payloads(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("item-{i}")).collect()
}

async fn drain_fast(
    store: &Probe<tenure_memory::MemoryStore>,
    claims_in_flight: usize,
    prefetch: usize,
) {
    let names = payloads(400);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    enqueue(store, &refs).await;
    store.slow_claims(Duration::from_millis(10));
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(16)
        .claims_in_flight(claims_in_flight)
        .prefetch(prefetch)
        .maintenance(false)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    until(Duration::from_secs(30), || {
        worker.metrics().completed == 400
    })
    .await;
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn a_busy_queue_with_short_handlers_gets_two_claims_out_at_once() {
    let store = Probe::new(memory());
    drain_fast(&store, 2, 16).await;
    let calls = store.calls();
    // A claim holds what it asks for until it answers, so two out at once means the
    // worker held more leases than its 16 slots: the prefetch.
    assert_eq!(
        calls.claims_out_max, 2,
        "two claims overlap while the queue has work"
    );
}

#[tokio::test(start_paused = true)]
async fn one_claim_in_flight_or_no_prefetch_keeps_one_claim_out() {
    let store = Probe::new(memory());
    drain_fast(&store, 1, 16).await;
    assert_eq!(store.calls().claims_out_max, 1, "claims_in_flight(1)");

    let store = Probe::new(memory());
    drain_fast(&store, 2, 0).await;
    assert_eq!(
        store.calls().claims_out_max,
        1,
        "without prefetch a claim holds every free slot, so the next waits for it"
    );
}

#[tokio::test(start_paused = true)]
async fn an_idle_queue_sees_one_poll_at_a_time() {
    let store = Probe::new(memory());
    store.slow_claims(Duration::from_millis(300));
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(16)
        .maintenance(false)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    until(Duration::from_secs(60), || store.calls().claims.len() >= 6).await;
    assert_eq!(store.calls().claims_out_max, 1);
    drop(worker);
}

/// Drains 12 items through two slots with handlers of `run` each and the given
/// prefetch; claims answer 10 ms after they are sent, so a claim sent while the slots
/// are busy is sent at or after the instant their handlers started. Answers each
/// claim that brought leases, as (asked, got, slots busy when it was sent), and the
/// store's calls.
async fn two_slots_with_handlers_of(
    run: Duration,
    prefetch: usize,
) -> (Vec<(u32, usize, usize)>, Calls) {
    let store = Probe::new(memory());
    let names = payloads(12);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    enqueue(&store, &refs).await;
    let runs: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::default();
    store.slow_claims(Duration::from_millis(10));
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(2)
        .prefetch(prefetch)
        .maintenance(false)
        .handler({
            let runs = runs.clone();
            move |_job: Job| {
                let runs = runs.clone();
                async move {
                    let start = Instant::now();
                    tokio::time::sleep(run).await;
                    runs.lock().unwrap().push((start, Instant::now()));
                    Ok(())
                }
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(200), || {
        worker.metrics().completed == 12
    })
    .await;
    worker.shutdown(Duration::from_secs(1)).await;
    let runs = runs.lock().unwrap().clone();
    let calls = store.calls();
    let claims = calls
        .claims
        .iter()
        .filter(|c| c.2 > 0)
        .map(|(at, asked, got)| {
            let busy = runs.iter().filter(|(s, e)| s <= at && at < e).count();
            (*asked, *got, busy)
        })
        .collect();
    (claims, calls)
}

#[tokio::test(start_paused = true)]
async fn slow_handlers_turn_prefetch_off_and_claims_ask_only_for_free_slots() {
    // Handlers of 20 s: a queued lease would wait 20 s for a slot, past a quarter of
    // the 10 s renewal interval of a 30 s lease.
    let (claims, calls) = two_slots_with_handlers_of(Duration::from_secs(20), 2).await;
    for (asked, got, busy) in claims {
        assert!(
            busy < 2,
            "a claim (asked {asked}, got {got}) was sent while both slots were busy"
        );
    }
    assert!(calls.released_tokens.is_empty());
}

/// Eight short items teach the worker its handlers are short; then "long" holds the
/// only slot while "behind" waits, prefetched. Returns the ids of those two.
async fn short_then_long(store: &Probe<tenure_memory::MemoryStore>) -> (ItemId, ItemId) {
    let mut names: Vec<String> = (0..8).map(|i| format!("short-{i}")).collect();
    names.push("long".to_owned());
    names.push("behind".to_owned());
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let ids = enqueue(store, &refs).await;
    (ids[8], ids[9])
}

#[tokio::test(start_paused = true)]
async fn a_prefetched_lease_still_waiting_at_its_renewal_is_given_back_not_renewed() {
    let store = Probe::new(memory());
    let (_, behind) = short_then_long(&store).await;
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .prefetch(1)
        .maintenance(false)
        .handler(|job: Job| async move {
            if job.payload() == b"long" {
                tokio::time::sleep(Duration::from_secs(25)).await;
            }
            Ok(())
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(120), || {
        worker.metrics().completed == 10
    })
    .await;
    let calls = store.calls();
    let given_back: Vec<_> = calls
        .released_tokens
        .iter()
        .filter(|t| t.id == behind)
        .collect();
    assert_eq!(
        given_back.len(),
        1,
        "the waiting lease is given back once, and not prefetched again while the long \
         handler runs: {:?}",
        calls.released_tokens
    );
    assert!(
        !calls.renewed_tokens.iter().any(|t| t.id == behind),
        "a lease no slot has started is never renewed"
    );
    let done = item(&store, behind).await;
    assert_eq!(done.state, ItemState::Done);
    assert_eq!(
        done.attempt,
        given_back[0].attempt + 1,
        "claimed again after it was given back, and run"
    );
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn prefetch_and_overlapping_claims_keep_stream_order_and_one_running_item_per_scope() {
    let store = Probe::new(memory());
    let mut items = Vec::new();
    for i in 0..40 {
        for s in 0..5 {
            items.push(
                NewItem::new(queue(), format!("{s}:{i}").into_bytes())
                    .stream(StreamKey::new(format!("stream-{s}")).unwrap()),
            );
        }
        for c in 0..3 {
            items.push(
                NewItem::new(queue(), format!("scope-{c}").into_bytes())
                    .scope(ScopeKey::new(format!("scope-{c}")).unwrap()),
            );
        }
    }
    let total = items.len() as u64;
    enqueue_items(&store, items).await;
    store.slow_claims(Duration::from_millis(2));
    let seen: Arc<Mutex<HashMap<String, Vec<u32>>>> = Arc::default();
    let running: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let overlap = Arc::new(Mutex::new(0u32));
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(8)
        .maintenance(false)
        .handler({
            let (seen, running, overlap) = (seen.clone(), running.clone(), overlap.clone());
            move |job: Job| {
                let (seen, running, overlap) = (seen.clone(), running.clone(), overlap.clone());
                async move {
                    let text = String::from_utf8(job.payload().to_vec()).unwrap();
                    if let Some((s, i)) = text.split_once(':') {
                        seen.lock()
                            .unwrap()
                            .entry(s.to_owned())
                            .or_default()
                            .push(i.parse().unwrap());
                    } else {
                        let mut r = running.lock().unwrap();
                        let n = r.entry(text.clone()).or_default();
                        *n += 1;
                        if *n > 1 {
                            *overlap.lock().unwrap() += 1;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    if !text.contains(':') {
                        *running.lock().unwrap().get_mut(&text).unwrap() -= 1;
                    }
                    Ok(())
                }
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(60), || {
        worker.metrics().completed == total
    })
    .await;
    assert!(
        store.calls().claims_out_max > 1,
        "prefetch and overlapping claims were in play"
    );
    for (s, order) in seen.lock().unwrap().iter() {
        let sorted: Vec<u32> = (0..40).collect();
        assert_eq!(order, &sorted, "stream {s} handled in enqueue order");
    }
    assert_eq!(
        *overlap.lock().unwrap(),
        0,
        "never two running items of one scope"
    );
    worker.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_gives_back_prefetched_leases_at_once_without_running_them() {
    let store = Probe::new(memory());
    let (long, behind) = short_then_long(&store).await;
    let ran: Arc<Mutex<Vec<String>>> = Arc::default();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .prefetch(1)
        .maintenance(false)
        .handler({
            let ran = ran.clone();
            move |job: Job| {
                let ran = ran.clone();
                async move {
                    let name = String::from_utf8(job.payload().to_vec()).unwrap();
                    ran.lock().unwrap().push(name.clone());
                    if name == "long" {
                        // Cooperative: returns when told to stop.
                        tokio::select! {
                            _ = job.cancelled() => {}
                            _ = tokio::time::sleep(Duration::from_secs(25)) => {}
                        }
                    }
                    Ok(())
                }
            }
        })
        .spawn()
        .unwrap();
    // The long item runs, and the one behind it is claimed into the queue.
    until(Duration::from_secs(5), || {
        ran.lock().unwrap().iter().any(|n| n == "long")
            && store.calls().claims.iter().map(|c| c.2).sum::<usize>() == 10
    })
    .await;
    let report = worker.shutdown(Duration::from_millis(100)).await;
    assert!(
        !ran.lock().unwrap().iter().any(|n| n == "behind"),
        "never started"
    );
    let released = store.calls().released_tokens;
    assert!(
        released.iter().any(|t| t.id == behind),
        "the prefetched lease is given back"
    );
    assert!(released.iter().any(|t| t.id == long), "the stopped one too");
    assert_eq!(report.abandoned, 0);
    assert_eq!(item(&store, behind).await.state, ItemState::Ready);
    assert_eq!(item(&store, long).await.state, ItemState::Ready);
}

#[tokio::test(start_paused = true)]
async fn a_claim_that_panics_in_the_store_is_a_failed_claim_and_its_slots_come_back() {
    let store = Probe::new(memory());
    let names = payloads(20);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    enqueue(&store, &refs).await;
    store.panic_claims(3);
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(2)
        .maintenance(false)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    // Three panicking claims each held both slots; were they not let go, nothing
    // more could be claimed.
    until(Duration::from_secs(60), || worker.metrics().completed == 20).await;
    assert_eq!(worker.metrics().store_errors, 3);
    worker.shutdown(Duration::from_secs(1)).await;
}

/// Claims sent together are one poll: on a queue whose claimable items are fewer than
/// they ask for (four streams, only their heads claimable), one brings the heads and
/// the others come back empty. Those empty answers must not back the worker off once
/// each, or every round waits longer than the last empty poll alone would.
#[tokio::test(start_paused = true)]
async fn claims_sent_together_back_off_once_for_their_empty_answers() {
    let store = Probe::new(memory());
    let mut items = Vec::new();
    for i in 0..20 {
        for s in 0..4 {
            items.push(
                NewItem::new(queue(), format!("{s}:{i}").into_bytes())
                    .stream(StreamKey::new(format!("stream-{s}")).unwrap()),
            );
        }
    }
    enqueue_items(&store, items).await;
    store.slow_claims(Duration::from_millis(2));
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(4)
        .claims_in_flight(4)
        .prefetch(12)
        .maintenance(false)
        .handler(|_job: Job| async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok(())
        })
        .spawn()
        .unwrap();
    let start = Instant::now();
    until(Duration::from_secs(120), || {
        worker.metrics().completed == 80
    })
    .await;
    let took = start.elapsed();
    assert!(store.calls().claims_out_max > 1, "claims overlapped");
    // Twenty rounds of four heads, each polled the base wait (250 ms) after the last;
    // backing off once per empty answer would wait 1 s a round (three empty answers).
    assert!(
        took < Duration::from_secs(10),
        "80 items took {took:?} of paused time"
    );
    worker.shutdown(Duration::from_secs(1)).await;
}

/// The prefetch shrinks as handlers lengthen rather than switching off at once: with
/// 4 s handlers on two slots and a 30 s lease (renewal every 10 s), one queued lease
/// waits about 2 s for a slot, within a quarter of the renewal interval, and two would
/// wait 4 s, past it. So claims sent while both slots are busy ask for one lease
/// beyond them, never more, and no prefetched lease waits until its renewal.
#[tokio::test(start_paused = true)]
async fn medium_handlers_get_the_prefetch_that_fits_their_run_time() {
    let (claims, calls) = two_slots_with_handlers_of(Duration::from_secs(4), 8).await;
    let mut beyond = 0;
    for (asked, got, busy) in claims {
        if busy == 2 {
            assert_eq!(
                asked, 1,
                "a claim sent while both slots were busy asked {asked} (got {got})"
            );
            beyond += 1;
        }
    }
    assert!(beyond > 0, "no lease was prefetched");
    assert!(calls.released_tokens.is_empty());
}

/// A finalize slower than the claims holds the claims back: outcomes waiting for the
/// store still hold their leases, so beyond a few flushes' worth they count against
/// the worker's room. Without that, instant claims would lease the whole queue while
/// completions trickle out, and leases would expire waiting for their finalize.
#[tokio::test(start_paused = true)]
async fn a_finalize_that_falls_behind_holds_the_claims_back() {
    let store = Probe::new(memory());
    let names = payloads(400);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    enqueue(&store, &refs).await;
    // Two flushes of 4 out at once, 100 ms each: 80 completions a second, while a
    // claim answers at once.
    store.slow_completes(Duration::from_millis(100));
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(4)
        .prefetch(12)
        .finalize_batch(4, Duration::from_millis(1))
        .maintenance(false)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    until(Duration::from_secs(60), || {
        worker.metrics().completed == 400
    })
    .await;
    let calls = store.calls();
    // The cap (4 slots + 12 prefetched) plus the outcomes allowed to wait (the cap),
    // plus one claim's asking: far below the 400 items of the queue.
    assert!(
        calls.leases_out_max <= 40,
        "{} leases were out at once",
        calls.leases_out_max
    );
    assert_eq!(worker.metrics().lost, 0);
    worker.shutdown(Duration::from_secs(1)).await;
}

/// Drains 2,000 short items with the default claims and prefetch at `concurrency`
/// slots (claims answer 10 ms after they are sent, each outcome is flushed at once,
/// so the leases out are the ones the worker holds); answers the most claims and
/// leases out at once.
async fn default_pipeline(concurrency: usize) -> (usize, usize) {
    let store = Probe::new(memory());
    let names = payloads(2000);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    enqueue(&store, &refs).await;
    store.slow_claims(Duration::from_millis(10));
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(concurrency)
        .finalize_batch(1, Duration::ZERO)
        .maintenance(false)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    until(Duration::from_secs(60), || {
        worker.metrics().completed == 2000
    })
    .await;
    worker.shutdown(Duration::from_secs(1)).await;
    let calls = store.calls();
    (calls.claims_out_max, calls.leases_out_max)
}

/// The defaults follow the slots: below `WIDE_FROM` (32) two claims out and a prefetch
/// of one batch (the concurrency); from it up, four claims out and three batches of
/// prefetch (at most 256 leases).
#[tokio::test(start_paused = true)]
async fn wide_workers_keep_more_claims_and_leases_coming_by_default() {
    let (claims, leases) = default_pipeline(16).await;
    assert!(claims <= 2, "16 slots: {claims} claims out at once");
    assert!(leases <= 32, "16 slots: {leases} leases out at once");
    let (claims, leases) = default_pipeline(64).await;
    assert!(claims > 2, "64 slots: only {claims} claims out at once");
    assert!(
        leases > 128 && leases <= 64 + 192,
        "64 slots: {leases} leases out at once"
    );
}

/// A store that panics in a `complete` leaves it unknown whether the batch was
/// written: the worker stops renewing those leases, so an item the panic left
/// running expires and is claimed again (G2) rather than being renewed forever.
#[tokio::test(start_paused = true)]
async fn a_finalize_that_panics_leaves_its_leases_to_expire() {
    let store = Probe::new(memory());
    let id = enqueue(&store, &["once"]).await[0];
    store.panic_completes(1);
    let attempts: Arc<Mutex<Vec<u32>>> = Arc::default();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .maintenance(false)
        .handler({
            let attempts = attempts.clone();
            move |job: Job| {
                let attempts = attempts.clone();
                async move {
                    attempts.lock().unwrap().push(job.attempt());
                    Ok(())
                }
            }
        })
        .spawn()
        .unwrap();
    // The 30 s lease expires unrenewed; a claim recovers the item and runs it again.
    until(Duration::from_secs(120), || worker.metrics().completed == 1).await;
    assert_eq!(*attempts.lock().unwrap(), [1, 2]);
    assert!(
        !store
            .calls()
            .renewed_tokens
            .iter()
            .any(|t| t.item_attempt() == (id, 1)),
        "the lease of the panicked finalize was renewed"
    );
    worker.shutdown(Duration::from_secs(1)).await;
}
