//! The metrics of waits on queue limits (G16, G17): a queue whose keys are all at
//! their limit counts saturation waits, a queue at its rate counts rate waits and the
//! time its next start was held back, each labelled by its queue.

use std::collections::HashMap;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tenure_core::{
    ClaimParams, LimitKey, LimitsParams, NewItem, OwnerId, QueueLimits, QueueName, Rate, Store,
};
use tenure_memory::MemoryStore;
use tenure_runtime::{Job, Worker};

use crate::support::{enqueue_items, memory};

fn key() -> LimitKey {
    LimitKey::new("api").unwrap()
}

fn keyed(queue: &QueueName, n: usize) -> Vec<NewItem> {
    (0..n)
        .map(|i| NewItem::new(queue.clone(), format!("{i}").into_bytes()).limit_key(key()))
        .collect()
}

async fn set(store: &MemoryStore, queue: &QueueName, limits: QueueLimits) {
    store
        .limits_set(LimitsParams::new(queue.clone(), limits))
        .await
        .unwrap();
}

/// A keyed item of `queue` held by a holder that never finishes it (a 300 s lease),
/// so under a per-key limit of 1 the key is saturated.
async fn saturate(store: &MemoryStore, queue: &QueueName) {
    set(store, queue, QueueLimits::new().per_key(1)).await;
    enqueue_items(store, keyed(queue, 2)).await;
    let held = store
        .claim(ClaimParams::new(
            queue.clone(),
            OwnerId::new("holder").unwrap(),
            1,
            Duration::from_secs(300),
        ))
        .await
        .unwrap();
    assert_eq!(held.len(), 1);
}

/// A worker of `queues` on `store`, its handles registered with `recorder`.
fn worker(recorder: &DebuggingRecorder, store: &MemoryStore, queues: &[QueueName]) -> Worker {
    let builder = Worker::builder(store.clone())
        .queues(queues.iter().cloned())
        .concurrency(4)
        .maintenance(false)
        .handler(|_job: Job| async move { Ok(()) });
    metrics::with_local_recorder(recorder, || builder.spawn().unwrap())
}

/// Every series now by (name, queue label): a counter's value, a histogram's samples
/// added up.
fn series(snap: &Snapshotter) -> HashMap<(String, String), f64> {
    snap.snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let k = key.key();
            let queue = k
                .labels()
                .find(|l| l.key() == "queue")
                .map(|l| l.value().to_owned())
                .unwrap_or_default();
            let v = match value {
                DebugValue::Counter(c) => c as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(h) => h.iter().map(|x| x.into_inner()).sum(),
            };
            ((k.name().to_owned(), queue), v)
        })
        .collect()
}

fn get(s: &HashMap<(String, String), f64>, name: &str, queue: &QueueName) -> f64 {
    s.get(&(name.to_owned(), queue.as_str().to_owned()))
        .copied()
        .unwrap_or(0.0)
}

#[tokio::test(start_paused = true)]
async fn a_queue_whose_key_is_at_its_limit_counts_saturation_waits_not_rate_waits() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let store = memory();
    let q = QueueName::new("saturated").unwrap();
    saturate(&store, &q).await;
    let w = worker(&recorder, &store, std::slice::from_ref(&q));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let m = w.metrics();
    assert_eq!(m.claimed, 0, "the key stays at its limit");
    assert!(
        m.limit_saturated >= 1,
        "the waits for a slot are counted: {m:?}"
    );
    assert!(
        m.limit_saturated <= m.limit_waits,
        "at most one per empty poll held back: {m:?}"
    );
    assert_eq!(m.limit_rate_waits, 0, "no rate held it back: {m:?}");
    assert_eq!(m.limit_rate_wait, Duration::ZERO);
    let s = series(&snap);
    assert_eq!(
        get(&s, "tenure_limit_saturated_total", &q),
        m.limit_saturated as f64,
        "exported by queue"
    );
    assert_eq!(get(&s, "tenure_limit_rate_waits_total", &q), 0.0);
}

#[tokio::test(start_paused = true)]
async fn a_queue_at_its_rate_counts_rate_waits_and_how_long_its_next_start_was_held_back() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let store = memory();
    let q = QueueName::new("rated").unwrap();
    set(
        &store,
        &q,
        QueueLimits::new().key_rate(Rate::new(1, Duration::from_secs(60))),
    )
    .await;
    enqueue_items(&store, keyed(&q, 2)).await;
    let w = worker(&recorder, &store, std::slice::from_ref(&q));
    tokio::time::sleep(Duration::from_secs(30)).await;
    let m = w.metrics();
    assert_eq!(m.claimed, 1, "the rate let one start in its first 30 s");
    assert!(
        m.limit_rate_waits >= 1,
        "the waits on the rate are counted: {m:?}"
    );
    assert_eq!(
        m.limit_saturated, 0,
        "no key was at a concurrency limit: {m:?}"
    );
    assert!(
        m.limit_rate_wait >= Duration::from_secs(59),
        "the first wait alone held the next start back for about 60 s: {m:?}"
    );
    let s = series(&snap);
    assert_eq!(
        get(&s, "tenure_limit_rate_waits_total", &q),
        m.limit_rate_waits as f64
    );
    let exported = get(&s, "tenure_limit_rate_wait_seconds", &q);
    assert!(
        (exported - m.limit_rate_wait.as_secs_f64()).abs() < 1e-3,
        "the histogram adds up to the snapshot's wait: {exported} vs {m:?}"
    );
    assert_eq!(get(&s, "tenure_limit_saturated_total", &q), 0.0);
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(
        w.metrics().claimed,
        2,
        "the second starts once the rate allows it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_worker_of_two_queues_counts_each_queues_wait_under_its_own_label() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let store = memory();
    let (sat, rated) = (
        QueueName::new("sat").unwrap(),
        QueueName::new("rated").unwrap(),
    );
    saturate(&store, &sat).await;
    set(
        &store,
        &rated,
        QueueLimits::new().rate(Rate::new(1, Duration::from_secs(60))),
    )
    .await;
    enqueue_items(&store, keyed(&rated, 2)).await;
    let w = worker(&recorder, &store, &[sat.clone(), rated.clone()]);
    tokio::time::sleep(Duration::from_secs(20)).await;
    let m = w.metrics();
    assert_eq!(m.claimed, 1, "one start of the rated queue: {m:?}");
    let s = series(&snap);
    assert!(
        get(&s, "tenure_limit_saturated_total", &sat) >= 1.0,
        "{s:?}"
    );
    assert_eq!(get(&s, "tenure_limit_rate_waits_total", &sat), 0.0, "{s:?}");
    assert!(
        get(&s, "tenure_limit_rate_waits_total", &rated) >= 1.0,
        "{s:?}"
    );
    assert_eq!(
        get(&s, "tenure_limit_saturated_total", &rated),
        0.0,
        "{s:?}"
    );
}
