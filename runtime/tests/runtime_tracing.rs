//! Tracing spans and events for claim, renew, complete, fail, lost and self-stop, and
//! the metrics snapshot.
//!
//! A test binary of its own: tracing caches each callsite's interest process-wide, so a
//! capturing subscriber set for one thread misses events that other tests' threads hit
//! first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "runtime/support.rs"]
#[allow(dead_code)]
mod support;

use std::time::Duration;

use tenure_core::{ManualClock, OwnerId, StoreExt};
use tenure_memory::MemoryStore;
use tenure_runtime::{Job, JobError, Worker};

use crate::support::{enqueue, queue, until, Probe};
use capture::Capture;

#[tokio::test(start_paused = true)]
async fn claim_renew_complete_fail_lost_and_self_stop_are_traced_and_counted() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());

    let clock = ManualClock::starting_now();
    let store = Probe::new(MemoryStore::new(clock.clone()));
    let lease = Duration::from_secs(3);
    let worker = Worker::builder(store.clone())
        .queue(queue())
        .concurrency(4)
        .lease_duration(lease)
        .maintenance(false)
        .handler(|job: Job| async move {
            match job.payload() {
                b"fail" => Err(JobError::permanent("no")),
                b"slow" => {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    Ok(())
                }
                b"wait" => {
                    job.cancelled().await;
                    Ok(())
                }
                _ => Ok(()),
            }
        })
        .spawn()
        .unwrap();

    // complete, fail, and a renewal of the slow one.
    enqueue(&store, &["ok", "fail", "slow"]).await;
    until(Duration::from_secs(5), || worker.metrics().completed == 2).await;

    // lost: the store's clock expires the lease and a peer re-claims the item.
    enqueue(&store, &["wait"]).await;
    until(Duration::from_secs(1), || worker.metrics().in_flight == 1).await;
    clock.advance(lease * 2);
    let peer = store
        .inner
        .claim_one(queue(), OwnerId::new("peer").unwrap(), lease)
        .await
        .unwrap()
        .unwrap();
    until(Duration::from_secs(5), || worker.metrics().lost == 1).await;
    store.inner.complete_one(peer.token).await.unwrap();

    // self-stop: renewals hang.
    store.hang_renewals(true);
    enqueue(&store, &["wait"]).await;
    until(Duration::from_secs(5), || {
        worker.metrics().self_stopped == 1
    })
    .await;
    until(Duration::from_secs(1), || worker.metrics().in_flight == 0).await;

    let events = capture.events();
    for name in ["claim", "renew", "complete", "fail", "lost", "self-stop"] {
        assert!(
            events.iter().any(|e| e == name),
            "no {name:?} event in {events:?}"
        );
    }
    let spans = capture.spans();
    assert!(spans.iter().any(|s| s == "tenure.worker"));
    assert_eq!(
        spans.iter().filter(|s| *s == "tenure.job").count(),
        5,
        "one span per attempt"
    );

    let m = worker.metrics();
    assert_eq!(
        (
            m.claimed,
            m.completed,
            m.failed,
            m.dead,
            m.lost,
            m.self_stopped,
            m.in_flight
        ),
        (5, 2, 1, 1, 1, 1, 0)
    );
    assert!(m.renewed >= 1);
}

pub(crate) mod capture {
    //! A tracing subscriber that records span names and the `event` field of events.
    use std::fmt;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    #[derive(Clone, Default)]
    pub(crate) struct Capture {
        pub(crate) events: Arc<Mutex<Vec<String>>>,
        pub(crate) spans: Arc<Mutex<Vec<String>>>,
        next: Arc<AtomicU64>,
    }

    impl Capture {
        pub(crate) fn events(&self) -> Vec<String> {
            self.events.lock().unwrap().clone()
        }
        pub(crate) fn spans(&self) -> Vec<String> {
            self.spans.lock().unwrap().clone()
        }
    }

    struct EventField(Option<String>);

    impl Visit for EventField {
        fn record_str(&mut self, field: &Field, value: &str) {
            if field.name() == "event" {
                self.0 = Some(value.to_owned());
            }
        }
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            if field.name() == "event" {
                self.0 = Some(format!("{value:?}").trim_matches('"').to_owned());
            }
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, attrs: &Attributes<'_>) -> Id {
            self.spans
                .lock()
                .unwrap()
                .push(attrs.metadata().name().to_owned());
            Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut v = EventField(None);
            event.record(&mut v);
            if let Some(name) = v.0 {
                self.events.lock().unwrap().push(name);
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
}
