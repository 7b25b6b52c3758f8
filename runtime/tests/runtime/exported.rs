//! The metrics the runtime records through the `metrics` facade, read from a
//! recorder local to each test (a worker registers its handles when it is spawned).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tenure_core::{ManualClock, NewItem, OwnerId, QueueName, StoreExt};
use tenure_memory::MemoryStore;
use tenure_runtime::{Job, JobError, StopReason, Worker, WorkerBuilder};

use crate::support::{enqueue, enqueue_items, memory, queue, until, Probe, Seen};

/// Spawns `builder` with `recorder` as the recorder its handles register with.
fn spawn_recorded(recorder: &DebuggingRecorder, builder: WorkerBuilder) -> Worker {
    metrics::with_local_recorder(recorder, || builder.spawn().unwrap())
}

/// Every series now, by (name, queue label, state label), as a number: a counter's
/// value, a gauge's value, a histogram's sample count.
fn series(snap: &Snapshotter) -> HashMap<(String, String, String), f64> {
    snap.snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let k = key.key();
            let label = |name: &str| {
                k.labels()
                    .find(|l| l.key() == name)
                    .map(|l| l.value().to_owned())
                    .unwrap_or_default()
            };
            let v = match value {
                DebugValue::Counter(c) => c as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(h) => h.len() as f64,
            };
            ((k.name().to_owned(), label("queue"), label("state")), v)
        })
        .collect()
}

fn get(s: &HashMap<(String, String, String), f64>, name: &str, queue: &str) -> f64 {
    s.get(&(name.to_owned(), queue.to_owned(), String::new()))
        .copied()
        .unwrap_or(0.0)
}

#[tokio::test(start_paused = true)]
async fn counters_and_histograms_are_labelled_by_the_items_queue_on_a_two_queue_worker() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let store = Probe::new(memory());
    let (a, b) = (QueueName::new("a").unwrap(), QueueName::new("b").unwrap());
    let items = ["a1", "a2", "a3", "b1", "bad"]
        .iter()
        .map(|p| {
            let q = if p.starts_with('a') { &a } else { &b };
            NewItem::new(q.clone(), p.as_bytes().to_vec())
        })
        .collect();
    enqueue_items(&store, items).await;
    let worker = spawn_recorded(
        &recorder,
        Worker::builder(store.clone())
            .queues([a.clone(), b.clone()])
            .concurrency(2)
            .maintenance_interval(Duration::from_secs(1))
            .handler(|job: Job| async move {
                if job.payload() == b"bad" {
                    return Err(JobError::permanent("bad"));
                }
                Ok(())
            }),
    );
    until(Duration::from_secs(10), || {
        let m = worker.metrics();
        m.completed + m.failed == 5
    })
    .await;
    // One more maintenance pass samples the depth gauges after the work.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = series(&snap);
    assert_eq!(get(&s, "tenure_claimed_total", "a"), 3.0, "{s:?}");
    assert_eq!(get(&s, "tenure_claimed_total", "b"), 2.0);
    assert_eq!(get(&s, "tenure_completed_total", "a"), 3.0);
    assert_eq!(get(&s, "tenure_completed_total", "b"), 1.0);
    assert_eq!(get(&s, "tenure_failed_total", "a"), 0.0);
    assert_eq!(get(&s, "tenure_failed_total", "b"), 1.0);
    assert_eq!(get(&s, "tenure_handler_seconds", "a"), 3.0);
    assert_eq!(get(&s, "tenure_handler_seconds", "b"), 2.0);
    assert_eq!(get(&s, "tenure_pickup_seconds", "b"), 2.0);
    assert_eq!(get(&s, "tenure_in_flight", "a"), 0.0);
    assert!(get(&s, "tenure_claim_seconds", "a,b") >= 1.0, "{s:?}");
    assert!(get(&s, "tenure_finalize_batch_size", "a,b") >= 1.0);
    let dead = s
        .get(&(
            "tenure_queue_depth".to_owned(),
            "b".to_owned(),
            "dead".to_owned(),
        ))
        .copied();
    assert_eq!(dead, Some(1.0), "sampled by the leader: {s:?}");
    // The snapshot API is unchanged beside them.
    assert_eq!((worker.metrics().claimed, worker.metrics().dead), (5, 1));
}

#[tokio::test(start_paused = true)]
async fn renewals_timeouts_self_stops_and_lost_leases_are_counted_on_their_queue() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();

    // Renewed, then timed out: the first attempt runs past a 2 s timeout on a 3 s
    // lease (renewed at 1 s and 2 s); the retry completes.
    let store = Probe::new(memory());
    enqueue(&store, &["slow"]).await;
    let w = spawn_recorded(
        &recorder,
        Worker::builder(store.clone())
            .queue(queue())
            .lease_duration(Duration::from_secs(3))
            .handler_timeout(Duration::from_millis(2_500))
            .retry(tenure_core::RetryPolicy::exponential(
                Duration::from_millis(10),
                Duration::from_millis(10),
            ))
            .maintenance(false)
            .handler(|job: Job| async move {
                if job.attempt() == 1 {
                    job.cancelled().await;
                    return Err(JobError::retry("stopped"));
                }
                Ok(())
            }),
    );
    until(Duration::from_secs(20), || w.metrics().completed == 1).await;
    let s = series(&snap);
    assert_eq!(get(&s, "tenure_timed_out_total", "jobs"), 1.0, "{s:?}");
    assert_eq!(get(&s, "tenure_failed_total", "jobs"), 1.0);
    assert_eq!(
        get(&s, "tenure_renewed_total", "jobs"),
        w.metrics().renewed as f64
    );
    assert!(get(&s, "tenure_renewed_total", "jobs") >= 2.0);
    drop(w);

    // Self-stopped: every renewal hangs.
    let store = Probe::new(memory());
    let stuck = QueueName::new("stuck").unwrap();
    enqueue_items(&store, vec![NewItem::new(stuck, b"x".to_vec())]).await;
    store.hang_renewals(true);
    let w = spawn_recorded(&recorder, waiting(store.clone(), "stuck"));
    until(Duration::from_secs(10), || w.metrics().self_stopped == 1).await;
    drop(w);

    // Lost: the lease expires for the store alone and a peer re-claims the item.
    let clock = ManualClock::starting_now();
    let store = Probe::new(MemoryStore::new(clock.clone()));
    let lost_queue = QueueName::new("lost").unwrap();
    enqueue_items(
        &store,
        vec![NewItem::new(lost_queue.clone(), b"x".to_vec())],
    )
    .await;
    let w = spawn_recorded(&recorder, waiting(store.clone(), "lost"));
    until(Duration::from_secs(1), || w.metrics().in_flight == 1).await;
    clock.advance(Duration::from_secs(4));
    store
        .inner
        .claim_one(
            lost_queue,
            OwnerId::new("peer").unwrap(),
            Duration::from_secs(3),
        )
        .await
        .unwrap()
        .unwrap();
    until(Duration::from_secs(5), || w.metrics().lost == 1).await;

    let s = series(&snap);
    assert_eq!(get(&s, "tenure_self_stopped_total", "stuck"), 1.0, "{s:?}");
    assert_eq!(get(&s, "tenure_lost_total", "lost"), 1.0);
    assert_eq!(get(&s, "tenure_lost_total", "stuck"), 0.0);
    assert_eq!(get(&s, "tenure_completed_total", "lost"), 0.0);
}

/// A worker on `queue_name` whose handler waits for its cancellation.
fn waiting(store: Probe<MemoryStore>, queue_name: &str) -> WorkerBuilder {
    let seen: Seen = Arc::default();
    Worker::builder(store)
        .queue(QueueName::new(queue_name).unwrap())
        .lease_duration(Duration::from_secs(3))
        .maintenance(false)
        .handler(move |job: Job| {
            let seen = seen.clone();
            async move {
                job.cancelled().await;
                let reason: Option<StopReason> = job.stop_reason();
                seen.lock()
                    .unwrap()
                    .push((job.attempt(), 0, reason, tokio::time::Instant::now()));
                Ok(())
            }
        })
}

#[tokio::test(start_paused = true)]
async fn the_leader_samples_queue_depth_and_the_oldest_ready_age() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let store = Probe::new(memory());
    enqueue(&store, &["a", "b", "c"]).await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    let worker = spawn_recorded(
        &recorder,
        Worker::builder(store.clone())
            .queue(queue())
            .concurrency(1)
            .maintenance_interval(Duration::from_secs(1))
            .handler(move |_job: Job| {
                let g = g.clone();
                async move {
                    g.acquire().await.unwrap().forget();
                    Ok(())
                }
            }),
    );
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let s = series(&snap);
    let depth = |state: &str| {
        s.get(&(
            "tenure_queue_depth".to_owned(),
            "jobs".to_owned(),
            state.to_owned(),
        ))
        .copied()
    };
    assert_eq!(
        (depth("ready"), depth("running")),
        (Some(2.0), Some(1.0)),
        "{s:?}"
    );
    let age = get(&s, "tenure_queue_oldest_ready_age_seconds", "jobs");
    assert!(
        (2.0..=3.5).contains(&age),
        "sampled at the last pass: {age}"
    );
    assert_eq!(get(&s, "tenure_in_flight", "jobs"), 1.0);
    gate.add_permits(3);
    until(Duration::from_secs(5), || worker.metrics().completed == 3).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let s = series(&snap);
    assert_eq!(
        get(&s, "tenure_queue_oldest_ready_age_seconds", "jobs"),
        0.0
    );
}

/// The samples of histogram `name` of `queue`, in the order recorded.
fn samples(snap: &Snapshotter, name: &str, queue: &str) -> Vec<f64> {
    snap.snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, _, _, _)| {
            let k = key.key();
            k.name() == name && k.labels().any(|l| l.key() == "queue" && l.value() == queue)
        })
        .flat_map(|(_, _, _, value)| match value {
            DebugValue::Histogram(h) => h.into_iter().map(|v| v.into_inner()).collect(),
            _ => Vec::new(),
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn the_pickup_latency_counts_the_wait_for_a_slot_on_tokios_clock() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    // Items stamped by the wall clock; the worker's timers run on paused time.
    let store = MemoryStore::default();
    let stream = tenure_core::StreamKey::new("s").unwrap();
    let items = ["first", "second"]
        .iter()
        .map(|p| NewItem::new(queue(), p.as_bytes().to_vec()).stream(stream.clone()))
        .collect();
    enqueue_items(&store, items).await;
    // One claim leases both as a stream run; the second waits on the slot while the
    // first takes five seconds (less than the renewal interval, which would give a
    // waiting lease back).
    let worker = spawn_recorded(
        &recorder,
        Worker::builder(store.clone())
            .queue(queue())
            .concurrency(1)
            .stream_runs(2)
            .maintenance(false)
            .handler(|job: Job| async move {
                if job.payload() == b"first" {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                Ok::<(), JobError>(())
            }),
    );
    until(Duration::from_secs(30), || worker.metrics().completed == 2).await;
    let pickups = samples(&snap, "tenure_pickup_seconds", "jobs");
    assert_eq!(
        worker.metrics().claimed,
        2,
        "both in one claim, neither given back"
    );
    assert_eq!(pickups.len(), 2, "{pickups:?}");
    assert!(pickups[0] < 1.0, "the first starts at once: {pickups:?}");
    assert!(
        (5.0..6.0).contains(&pickups[1]),
        "the second waited five seconds for the slot: {pickups:?}"
    );
    worker.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn attempts_their_own_handler_finalized_are_counted_on_their_queue() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    let store = Probe::new(memory());
    let (a, b) = (QueueName::new("a").unwrap(), QueueName::new("b").unwrap());
    let items = vec![
        NewItem::new(a.clone(), b"own".to_vec()),
        NewItem::new(b.clone(), b"own".to_vec()),
        NewItem::new(b.clone(), b"runtime".to_vec()),
    ];
    enqueue_items(&store, items).await;
    let own = store.clone();
    let worker = spawn_recorded(
        &recorder,
        Worker::builder(store.clone())
            .queues([a, b])
            .maintenance(false)
            .handler(move |job: Job| {
                let own = own.clone();
                async move {
                    if job.payload() == b"own" {
                        // Completed by the handler itself, as in its own transaction.
                        let token = job.take_finalize();
                        tenure_core::Store::complete(
                            &own,
                            tenure_core::CompleteParams::new(vec![token]),
                        )
                        .await
                        .map_err(|e| JobError::retry(e.to_string()))?;
                    }
                    Ok(())
                }
            }),
    );
    until(Duration::from_secs(10), || {
        let m = worker.metrics();
        m.handler_finalized + m.completed == 3
    })
    .await;
    let s = series(&snap);
    assert_eq!(get(&s, "tenure_handler_finalized_total", "a"), 1.0, "{s:?}");
    assert_eq!(get(&s, "tenure_handler_finalized_total", "b"), 1.0, "{s:?}");
    assert_eq!(get(&s, "tenure_completed_total", "b"), 1.0, "{s:?}");
    assert_eq!(get(&s, "tenure_completed_total", "a"), 0.0, "{s:?}");
    assert_eq!(worker.metrics().handler_finalized, 2);
}
