//! What a handler's answer becomes (G5): complete, retry with backoff, dead, and a
//! panic as a retryable failure.

use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use tenure_core::{ItemState, RetryPolicy, Store};
use tenure_runtime::{Job, JobError, Worker};
use tokio::time::Instant;

use crate::support::{enqueue, item, memory, queue, until, Probe};

/// Keeps the test output free of the panics these tests cause on purpose.
pub(crate) fn quiet_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
                .unwrap_or("");
            if !msg.contains("on purpose") {
                default(info);
            }
        }));
    });
}

#[derive(Clone, Debug)]
struct Run {
    payload: String,
    attempt: u32,
    last_error: Option<String>,
    at: Instant,
}

#[tokio::test(start_paused = true)]
async fn ok_completes_errors_retry_with_backoff_or_die_and_a_panic_retries_with_its_message() {
    quiet_panics();
    let store = Probe::new(memory());
    let ids = enqueue(&store, &["ok", "retry", "permanent", "panic", "after"]).await;
    let runs: Arc<Mutex<Vec<Run>>> = Arc::default();
    let r = runs.clone();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .maintenance(false)
        .retry(
            RetryPolicy::exponential(Duration::from_secs(2), Duration::from_secs(60))
                .with_jitter(0.0),
        )
        .handler(move |job: Job| {
            let r = r.clone();
            async move {
                let payload = String::from_utf8(job.payload().to_vec()).unwrap();
                r.lock().unwrap().push(Run {
                    payload: payload.clone(),
                    attempt: job.attempt(),
                    last_error: job.item().last_error.clone(),
                    at: Instant::now(),
                });
                match (payload.as_str(), job.attempt()) {
                    ("retry", 1) => Err(JobError::retry("smtp timeout")),
                    ("permanent", _) => Err(JobError::permanent("bad address")),
                    ("panic", 1) => panic!("boom, on purpose"),
                    _ => Ok(()),
                }
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(30), || worker.metrics().completed == 4).await;

    let state = |i: usize| {
        let store = store.clone();
        let id = ids[i];
        async move {
            let it = item(&store, id).await;
            (it.state, it.attempt)
        }
    };
    assert_eq!(state(0).await, (ItemState::Done, 1));
    assert_eq!(state(1).await, (ItemState::Done, 2));
    assert_eq!(state(2).await, (ItemState::Dead, 1));
    assert_eq!(state(3).await, (ItemState::Done, 2));
    assert_eq!(
        state(4).await,
        (ItemState::Done, 1),
        "the worker lived on after the panic"
    );
    let dead = item(&store, ids[2]).await;
    assert_eq!(dead.last_error.as_deref(), Some("bad address"));

    let runs = runs.lock().unwrap().clone();
    let of = |p: &str| {
        runs.iter()
            .filter(|r| r.payload == p)
            .cloned()
            .collect::<Vec<_>>()
    };
    let retry = of("retry");
    assert_eq!(
        retry.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(retry[1].last_error.as_deref(), Some("smtp timeout"));
    assert!(
        retry[1].at - retry[0].at >= Duration::from_secs(2),
        "the retry waited the policy's delay"
    );
    let panic = of("panic");
    assert_eq!(
        panic.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(
        panic[1].last_error.as_deref(),
        Some("handler panicked: boom, on purpose")
    );
    assert!(panic[1].at - panic[0].at >= Duration::from_secs(2));

    let m = worker.metrics();
    assert_eq!(
        (m.completed, m.failed, m.dead, m.panicked, m.lost),
        (4, 3, 1, 1, 0)
    );
    assert_eq!(store.queue_counts(&queue()).await.unwrap().pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_delay_overrides_the_policy() {
    let store = Probe::new(memory());
    enqueue(&store, &["x"]).await;
    let runs: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let r = runs.clone();
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .maintenance(false)
        .handler(move |job: Job| {
            let r = r.clone();
            async move {
                r.lock().unwrap().push(Instant::now());
                if job.attempt() == 1 {
                    return Err(JobError::retry_after(
                        "rate limited",
                        Duration::from_secs(42),
                    ));
                }
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    until(Duration::from_secs(120), || worker.metrics().completed == 1).await;
    let runs = runs.lock().unwrap().clone();
    let gap = runs[1] - runs[0];
    assert!(
        gap >= Duration::from_secs(42) && gap < Duration::from_secs(42 + 11),
        "retried after the asked delay, within one capped poll: {gap:?}"
    );
}

/// A handler type of its own, shared as a trait object.
struct Doubler {
    seen: Mutex<Vec<u64>>,
}

#[tenure_core::async_trait]
impl tenure_runtime::Handler for Doubler {
    async fn handle(&self, job: Job) -> Result<(), JobError> {
        let n: u64 = job.json()?;
        self.seen.lock().unwrap().push(n * 2);
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_handler_type_shared_as_a_trait_object_runs_like_a_closure() {
    let store = Probe::new(memory());
    enqueue(&store, &["1", "2", "oops"]).await;
    let handler = Arc::new(Doubler {
        seen: Mutex::new(Vec::new()),
    });
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .maintenance(false)
        .retry(RetryPolicy::exponential(
            Duration::from_secs(3600),
            Duration::from_secs(3600),
        ))
        .handler_arc(handler.clone() as Arc<dyn tenure_runtime::Handler>)
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || worker.metrics().failed == 1).await;
    assert_eq!(*handler.seen.lock().unwrap(), vec![2, 4]);
    assert_eq!(worker.metrics().completed, 2);
    let counts = store.queue_counts(&queue()).await.unwrap();
    assert_eq!(
        counts.scheduled, 1,
        "a `?` on a bad payload is a retryable failure"
    );
}

/// A complete answered `OutOfOrder` (an earlier item of the stream run still being
/// completed by the other flush in flight) keeps its lease and is written again: the
/// item completes, and nothing counts as lost.
#[tokio::test(start_paused = true)]
async fn a_complete_refused_as_out_of_order_is_written_again_and_not_lost() {
    let store = Probe::new(memory());
    let ids = enqueue(&store, &["one"]).await;
    store.out_of_order_completes(2);
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(1)
        .maintenance(false)
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap();
    until(Duration::from_secs(10), || worker.metrics().completed == 1).await;
    let m = worker.metrics();
    assert_eq!((m.completed, m.lost), (1, 0), "{m:?}");
    assert_eq!(
        store.calls().completes.len(),
        3,
        "two refusals, then the write"
    );
    assert!(store
        .item_get(ids[0])
        .await
        .unwrap()
        .is_none_or(|i| i.state == ItemState::Done));
}
