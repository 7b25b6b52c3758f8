//! Typed tasks: each type handled by its own code, in one claim; a payload that does
//! not decode ends dead naming the type; the builder refuses ambiguous registrations;
//! the task's retry policy and lease apply; the job still takes the finalize over.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tenure_core::{DedupKey, ItemState, NewItem, QueueName, Result, RetryPolicy, StoreExt, Task};
use tenure_runtime::{Job, JobError, RunTask, StopReason, Worker};

use crate::support::{enqueue_items, item, memory, until, Probe};

/// The mails [`SendEmail::run`] handled (it has no state of its own).
static MAILS: Mutex<Vec<SendEmail>> = Mutex::new(Vec::new());

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct SendEmail {
    to: String,
    order: u64,
}

impl Task for SendEmail {
    const QUEUE: &'static str = "emails";

    fn dedup_key(&self) -> Result<Option<DedupKey>> {
        Ok(Some(DedupKey::new(format!("order:{}", self.order))?))
    }
}

impl RunTask for SendEmail {
    async fn run(self, _job: Job) -> std::result::Result<(), JobError> {
        MAILS.lock().unwrap().push(self);
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Resize {
    image: String,
    width: u32,
}

impl Task for Resize {
    const QUEUE: &'static str = "thumbnails";
}

/// Another type on the queue of [`SendEmail`].
#[derive(Serialize, Deserialize)]
struct Newsletter;

impl Task for Newsletter {
    const QUEUE: &'static str = "emails";
}

impl RunTask for Newsletter {
    async fn run(self, _job: Job) -> std::result::Result<(), JobError> {
        Ok(())
    }
}

/// A task with its own retry policy and lease, failing its first attempt.
#[derive(Serialize, Deserialize)]
struct Flaky;

impl Task for Flaky {
    const QUEUE: &'static str = "flaky";
    const LEASE: Option<Duration> = Some(Duration::from_secs(90));

    fn retry_policy() -> Option<RetryPolicy> {
        Some(
            RetryPolicy::exponential(Duration::from_secs(600), Duration::from_secs(600))
                .with_jitter(0.0),
        )
    }
}

#[tokio::test(start_paused = true)]
async fn two_task_types_in_one_worker_are_each_handled_by_their_own_code_from_one_claim() {
    let store = Probe::new(memory());
    let mail = SendEmail {
        to: "ada@example.com".into(),
        order: 1,
    };
    let resize = Resize {
        image: "cat.png".into(),
        width: 200,
    };
    let mail_id = store.enqueue_task(&mail).await.unwrap().id;
    let resize_id = store.enqueue_task(&resize).await.unwrap().id;
    let resizes: Arc<Mutex<Vec<(Resize, u32)>>> = Arc::default();
    let r = resizes.clone();
    let worker = Worker::builder(store.clone())
        .task::<SendEmail>()
        .task_with(move |resize: Resize, job: Job| {
            let r = r.clone();
            async move {
                r.lock().unwrap().push((resize, job.attempt()));
                Ok(())
            }
        })
        .concurrency(4)
        .maintenance(false)
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || worker.metrics().completed == 2).await;
    worker.shutdown(Duration::from_secs(1)).await;

    assert_eq!(*MAILS.lock().unwrap(), vec![mail]);
    assert_eq!(*resizes.lock().unwrap(), vec![(resize, 1)]);
    let claims = store.calls.lock().unwrap().claims.clone();
    assert_eq!(
        claims.first().map(|c| c.2),
        Some(2),
        "one claim leased the items of both task queues"
    );
    for id in [mail_id, resize_id] {
        assert_eq!(item(&store, id).await.state, ItemState::Done);
    }
}

#[tokio::test(start_paused = true)]
async fn a_task_and_the_closure_handler_each_serve_their_own_queues() {
    let store = memory();
    let bytes = QueueName::new("bytes").unwrap();
    let resize = Resize {
        image: "dog.png".into(),
        width: 64,
    };
    store.enqueue_task(&resize).await.unwrap();
    enqueue_items(&store, vec![NewItem::new(bytes.clone(), b"raw".to_vec())]).await;
    let handled: Arc<Mutex<Vec<String>>> = Arc::default();
    let (h1, h2) = (handled.clone(), handled.clone());
    let worker = Worker::builder(store.clone())
        .task_with(move |resize: Resize, _job: Job| {
            let h = h1.clone();
            async move {
                h.lock().unwrap().push(format!("task {}", resize.image));
                Ok(())
            }
        })
        .queue(bytes)
        .handler(move |job: Job| {
            let h = h2.clone();
            async move {
                h.lock()
                    .unwrap()
                    .push(format!("bytes {}", String::from_utf8_lossy(job.payload())));
                Ok(())
            }
        })
        .maintenance(false)
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || worker.metrics().completed == 2).await;
    worker.shutdown(Duration::from_secs(1)).await;
    let mut handled = handled.lock().unwrap().clone();
    handled.sort();
    assert_eq!(handled, vec!["bytes raw", "task dog.png"]);
}

#[tokio::test(start_paused = true)]
async fn a_payload_that_does_not_decode_as_its_task_ends_dead_naming_the_type_and_the_error() {
    let store = memory();
    let queue = QueueName::new(Resize::QUEUE).unwrap();
    let ids = enqueue_items(
        &store,
        vec![NewItem::new(queue, br#"{"image":"cat.png"}"#.to_vec()).max_attempts(5)],
    )
    .await;
    let runs = Arc::new(Mutex::new(0u32));
    let r = runs.clone();
    let worker = Worker::builder(store.clone())
        .task_with(move |_resize: Resize, _job: Job| {
            let r = r.clone();
            async move {
                *r.lock().unwrap() += 1;
                Ok(())
            }
        })
        .maintenance(false)
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || worker.metrics().dead == 1).await;
    worker.shutdown(Duration::from_secs(1)).await;
    let dead = item(&store, ids[0]).await;
    assert_eq!(
        (dead.state, dead.attempt),
        (ItemState::Dead, 1),
        "permanent at once"
    );
    let error = dead.last_error.unwrap();
    assert!(
        error.contains("does not decode as") && error.contains("Resize"),
        "{error}"
    );
    assert!(error.contains("missing field `width`"), "{error}");
    assert_eq!(*runs.lock().unwrap(), 0, "the handler never ran");
}

#[tokio::test(start_paused = true)]
async fn a_task_value_derives_its_dedup_key_so_a_second_enqueue_is_a_duplicate() {
    let store = memory();
    let mail = SendEmail {
        to: "bob@example.com".into(),
        order: 77,
    };
    let first = store.enqueue_task(&mail).await.unwrap();
    let again = store.enqueue_task(&mail).await.unwrap();
    assert!(!first.duplicate);
    assert!(again.duplicate);
    assert_eq!(again.id, first.id);
}

#[tokio::test(start_paused = true)]
async fn spawn_refuses_ambiguous_task_registrations_naming_the_types() {
    let store = memory();
    let noop = |_job: Job| async { Ok(()) };
    let e = Worker::builder(store.clone())
        .task::<SendEmail>()
        .task::<Newsletter>()
        .spawn()
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("task"), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("SendEmail") && text.contains("Newsletter") && text.contains("emails"),
        "{text}"
    );

    let e = Worker::builder(store.clone())
        .task::<SendEmail>()
        .task::<SendEmail>()
        .spawn()
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("task"), "{e}");
    assert!(e.to_string().contains("registered twice"), "{e}");

    let e = Worker::builder(store.clone())
        .task::<SendEmail>()
        .queue(QueueName::new("emails").unwrap())
        .handler(noop)
        .spawn()
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("queues"), "{e}");
    assert!(e.to_string().contains("SendEmail"), "{e}");

    let e = Worker::builder(store.clone())
        .task::<SendEmail>()
        .handler(noop)
        .spawn()
        .unwrap_err();
    assert_eq!(
        e.invalid_field(),
        Some("queues"),
        "a handler with no queue: {e}"
    );

    let e = Worker::builder(store.clone())
        .task::<SendEmail>()
        .queue(QueueName::new("bytes").unwrap())
        .spawn()
        .unwrap_err();
    assert_eq!(
        e.invalid_field(),
        Some("handler"),
        "queues with no handler: {e}"
    );

    #[derive(Serialize, Deserialize)]
    struct Unnamed;
    impl Task for Unnamed {
        const QUEUE: &'static str = "";
    }
    let e = Worker::builder(store.clone())
        .task_with(|_u: Unnamed, _job: Job| async { Ok(()) })
        .spawn()
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("task"), "{e}");
    assert!(e.to_string().contains("Unnamed::QUEUE"), "{e}");

    let e = Worker::builder(store).spawn().unwrap_err();
    assert_eq!(e.invalid_field(), Some("handler"), "nothing to run: {e}");
}

#[tokio::test(start_paused = true)]
async fn a_tasks_retry_policy_times_its_retries_and_its_lease_lengthens_the_workers() {
    let store = memory();
    let id = store.enqueue_task(&Flaky).await.unwrap().id;
    let lease_left: Arc<Mutex<Option<Duration>>> = Arc::default();
    let l = lease_left.clone();
    let worker = Worker::builder(store.clone())
        .task_with(move |_f: Flaky, job: Job| {
            let l = l.clone();
            async move {
                // The claim set both from one reading of the store's clock.
                let claimed = job.item().updated_at;
                let expires = job.item().lease_expires_at.unwrap();
                *l.lock().unwrap() = Some(expires.duration_since(claimed));
                Err(JobError::retry("not yet"))
            }
        })
        .lease_duration(Duration::from_secs(30))
        .maintenance(false)
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || worker.metrics().failed == 1).await;
    worker.shutdown(Duration::from_secs(1)).await;
    assert_eq!(
        *lease_left.lock().unwrap(),
        Some(Duration::from_secs(90)),
        "the task's longer lease"
    );
    let it = item(&store, id).await;
    assert_eq!(it.state, ItemState::Ready);
    assert_eq!(
        it.run_at.duration_since(it.updated_at),
        Duration::from_secs(600),
        "the task's retry policy, not the worker's"
    );
}

#[tokio::test(start_paused = true)]
async fn a_task_takes_the_finalize_over_through_its_job() {
    let store = memory();
    let id = store
        .enqueue_task(&Resize {
            image: "x.png".into(),
            width: 1,
        })
        .await
        .unwrap()
        .id;
    let s = store.clone();
    let worker = Worker::builder(store.clone())
        .task_with(move |_r: Resize, job: Job| {
            let s = s.clone();
            async move {
                let token = job.take_finalize();
                // Where the handler would complete inside its own transaction.
                s.complete_one(token).await?;
                Ok(())
            }
        })
        .maintenance(false)
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || {
        worker.metrics().handler_finalized == 1
    })
    .await;
    let report = worker.shutdown(Duration::from_secs(1)).await;
    assert_eq!(
        report.metrics.completed, 0,
        "the runtime wrote no completion"
    );
    assert_eq!(item(&store, id).await.state, ItemState::Done);
}

/// A task whose first attempt waits to be told to stop.
#[derive(Serialize, Deserialize)]
struct Patient;

impl Task for Patient {
    const QUEUE: &'static str = "patient";
}

#[tokio::test(start_paused = true)]
async fn a_task_is_renewed_while_it_runs_and_self_stops_when_renewals_fail_writing_nothing() {
    let store = Probe::new(memory());
    let lease = Duration::from_secs(4);
    let id = store.enqueue_task(&Patient).await.unwrap().id;
    let stopped: Arc<Mutex<Option<Option<StopReason>>>> = Arc::default();
    let s = stopped.clone();
    let worker = Worker::builder(store.clone())
        .task_with(move |_p: Patient, job: Job| {
            let s = s.clone();
            async move {
                job.cancelled().await;
                *s.lock().unwrap() = Some(job.stop_reason());
                Ok(())
            }
        })
        .lease_duration(lease)
        .maintenance(false)
        .spawn()
        .unwrap();
    until(Duration::from_secs(10), || {
        store.calls.lock().unwrap().renews.len() >= 2
    })
    .await;
    assert!(stopped.lock().unwrap().is_none(), "renewed, still running");
    store.inner.set_available(false);
    until(Duration::from_secs(10), || {
        stopped.lock().unwrap().is_some()
    })
    .await;
    assert_eq!(*stopped.lock().unwrap(), Some(Some(StopReason::SelfStop)));
    store.inner.set_available(true);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let it = item(&store, id).await;
    assert_eq!(
        (it.state, it.attempt),
        (ItemState::Running, 1),
        "nothing written"
    );
    let m = worker.metrics();
    assert_eq!((m.self_stopped, m.completed, m.failed), (1, 0, 0));
}

/// Entries of one account: a stream derived from the value.
#[derive(Serialize, Deserialize)]
struct Entry {
    account: String,
    seq: u32,
}

impl Task for Entry {
    const QUEUE: &'static str = "ledger";

    fn stream(&self) -> Result<Option<tenure_core::StreamKey>> {
        Ok(Some(tenure_core::StreamKey::new(self.account.clone())?))
    }
}

#[tokio::test(start_paused = true)]
async fn a_tasks_derived_stream_is_handled_in_enqueue_order_through_stream_runs() {
    let store = Probe::new(memory());
    for seq in 0..6 {
        let entry = Entry {
            account: "acct-1".into(),
            seq,
        };
        store.enqueue_task(&entry).await.unwrap();
    }
    let order: Arc<Mutex<Vec<u32>>> = Arc::default();
    let o = order.clone();
    let worker = Worker::builder(store.clone())
        .task_with(move |entry: Entry, _job: Job| {
            let o = o.clone();
            async move {
                o.lock().unwrap().push(entry.seq);
                Ok(())
            }
        })
        .concurrency(4)
        .stream_runs(6)
        .maintenance(false)
        .spawn()
        .unwrap();
    until(Duration::from_secs(5), || worker.metrics().completed == 6).await;
    worker.shutdown(Duration::from_secs(1)).await;
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(
        store.calls.lock().unwrap().claims.first().map(|c| c.2),
        Some(6),
        "one claim leased the whole run"
    );
}
