//! Stream runs (G9): a worker with `stream_runs(k)` leases a hot stream k items per
//! claim and handles a run on one slot in stream order; an item that does not complete
//! stops its run, and the store puts the rest back untouched.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_core::{ItemState, NewItem, RetryPolicy, StreamKey};
use tenure_runtime::{Job, JobError, Worker};

use crate::support::{enqueue_items, item, memory, queue, until, Probe};

fn stream_items(n: usize) -> Vec<NewItem> {
    let s = StreamKey::new("hot").unwrap();
    (0..n)
        .map(|i| NewItem::new(queue(), i.to_string().into_bytes()).stream(s.clone()))
        .collect()
}

/// The payloads a handler saw, in order, as numbers.
type Seen = Arc<Mutex<Vec<(usize, u32)>>>;

fn record(seen: &Seen, job: &Job) -> usize {
    let n: usize = std::str::from_utf8(job.payload()).unwrap().parse().unwrap();
    seen.lock().unwrap().push((n, job.attempt()));
    n
}

#[tokio::test(start_paused = true)]
async fn a_hot_stream_is_drained_in_order_a_run_per_claim() {
    let store = Probe::new(memory());
    enqueue_items(&store, stream_items(40)).await;
    let seen: Seen = Arc::default();
    let s = seen.clone();
    // Handlers running at once, and the most seen: a run is handled on one slot.
    let running = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let r = running.clone();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(2)
        .stream_runs(8)
        .maintenance(false)
        .handler(move |job: Job| {
            let (s, r) = (s.clone(), r.clone());
            async move {
                record(&s, &job);
                let now = r.0.fetch_add(1, Ordering::SeqCst) + 1;
                r.1.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                r.0.fetch_sub(1, Ordering::SeqCst);
                Ok::<(), JobError>(())
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(60), || worker.metrics().completed == 40).await;
    let order: Vec<usize> = seen.lock().unwrap().iter().map(|(n, _)| *n).collect();
    assert_eq!(order, (0..40).collect::<Vec<_>>(), "stream order");
    // Each non-empty claim leased a run of eight: five runs for forty items.
    let claims = store.calls.lock().unwrap().claims.clone();
    let full: Vec<usize> = claims.iter().map(|c| c.2).filter(|n| *n > 0).collect();
    assert_eq!(full, vec![8; 5], "leases per non-empty claim");
    assert_eq!(
        running.1.load(Ordering::SeqCst),
        1,
        "handlers of one run at once, with two slots"
    );
    worker.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn without_runs_a_hot_stream_takes_a_claim_per_item() {
    let store = Probe::new(memory());
    enqueue_items(&store, stream_items(6)).await;
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(2)
        .maintenance(false)
        .handler(|_job: Job| async { Ok::<(), JobError>(()) })
        .spawn()
        .unwrap();
    until(Duration::from_secs(60), || worker.metrics().completed == 6).await;
    let claims = store.calls.lock().unwrap().claims.clone();
    let full: Vec<usize> = claims.iter().map(|c| c.2).filter(|n| *n > 0).collect();
    assert_eq!(full, vec![1; 6], "leases per non-empty claim");
    worker.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_item_stops_its_run_and_the_rest_waits_for_its_retry() {
    let store = Probe::new(memory());
    let ids = enqueue_items(&store, stream_items(4)).await;
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .stream_runs(4)
        .maintenance(false)
        .retry(
            RetryPolicy::exponential(Duration::from_secs(5), Duration::from_secs(5))
                .with_jitter(0.0),
        )
        .handler(move |job: Job| {
            let s = s.clone();
            async move {
                match (record(&s, &job), job.attempt()) {
                    (1, 1) => Err(JobError::retry("not yet")),
                    _ => Ok(()),
                }
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(60), || worker.metrics().completed == 4).await;
    let seen = seen.lock().unwrap().clone();
    // Item 1 failed: items 2 and 3 were not handled until its retry succeeded, and were
    // put back untouched (the attempt of their put-back claim is spent, not counted).
    assert_eq!(
        seen,
        vec![(0, 1), (1, 1), (1, 2), (2, 2), (3, 2)],
        "(item, attempt) in the order the handler saw them"
    );
    for id in &ids[2..] {
        let it = item(&store, *id).await;
        assert_eq!(it.state, ItemState::Done);
        assert_eq!(it.stalls, 0, "a put-back is not a stall");
        assert_eq!(it.max_attempts, 21, "a put-back spends no attempt");
    }
    worker.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn stream_runs_of_zero_are_refused_naming_the_setting() {
    let e = Worker::builder(memory())
        .queue(queue())
        .stream_runs(0)
        .handler(|_job: Job| async { Ok::<(), JobError>(()) })
        .spawn()
        .expect_err("refused");
    assert_eq!(e.invalid_field(), Some("stream_runs"));
}
