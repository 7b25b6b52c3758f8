//! Partitioned claiming end to end on every landed store (G14): three workers, each
//! on its own store handle with its own instance id, drain streams and unstreamed
//! items. Each item runs once, on the worker whose share it is; each stream runs on
//! one worker, in enqueue order; every worker gets work.

// The shared body runs outside #[test] functions; a failure there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Backend, Place};
use tenure::partition::{key_hash, takes};
use tenure::runtime::{Job, PollPolicy, Worker};
use tenure::{EnqueueParams, ItemId, NewItem, OwnerId, Partitioning, QueueName, StreamKey};

const WORKERS: usize = 3;
const STREAMS: usize = 30;
const PER_STREAM: usize = 10;
const UNSTREAMED: usize = 300;

/// What each handler run saw: the worker, the item, its stream and its position.
type Runs = Arc<Mutex<Vec<(OwnerId, ItemId, Option<StreamKey>, usize)>>>;

async fn workers_split_the_work_by_partition(backend: Backend) {
    let Some(place) = Place::new(backend).await else {
        return;
    };
    let queue = QueueName::new("partitioned").unwrap();
    let first = place.open().await.unwrap();
    let runs: Runs = Arc::default();
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let me = OwnerId::new(format!("partitioned-worker-{w}")).unwrap();
        let (runs, who) = (Arc::clone(&runs), me.clone());
        let worker = Worker::builder(place.open().await.unwrap())
            .queue(queue.clone())
            .instance_id(me)
            .partitioned(Partitioning::default())
            .concurrency(4)
            .maintenance(false)
            .poll(PollPolicy::new(
                Duration::from_millis(25),
                Duration::from_millis(250),
            ))
            .handler(move |job: Job| {
                let (runs, who) = (Arc::clone(&runs), who.clone());
                async move {
                    let item = job.item();
                    let n: usize = std::str::from_utf8(&item.payload).unwrap().parse().unwrap();
                    runs.lock()
                        .unwrap()
                        .push((who, item.id, item.stream.clone(), n));
                    Ok(())
                }
            })
            .spawn()
            .unwrap();
        workers.push(worker);
    }
    // Every worker registers before its first claim; the work comes once all have, so
    // the ranks are settled before anything is claimed.
    let deadline = Instant::now() + Duration::from_secs(30);
    while first.instance_list().await.unwrap().len() < WORKERS {
        assert!(
            Instant::now() < deadline,
            "the workers never all registered"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut items = Vec::new();
    for n in 0..PER_STREAM {
        for s in 0..STREAMS {
            let stream = StreamKey::new(format!("stream-{s}")).unwrap();
            items.push(NewItem::new(queue.clone(), n.to_string().into_bytes()).stream(stream));
        }
    }
    items.extend((0..UNSTREAMED).map(|n| NewItem::new(queue.clone(), n.to_string().into_bytes())));
    let total = items.len();
    first.enqueue(EnqueueParams::new(items)).await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(120);
    while runs.lock().unwrap().len() < total {
        assert!(
            Instant::now() < deadline,
            "{}: only {} of {total} ran",
            backend.name(),
            runs.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let instances: Vec<OwnerId> = workers.iter().map(|w| w.instance().clone()).collect();
    for w in workers {
        let report = w.shutdown(Duration::from_secs(10)).await;
        assert!(report.drained);
        assert_eq!(report.metrics.lost, 0);
    }

    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), total, "{}: every item ran once", backend.name());
    let rank = |who: &OwnerId| instances.iter().filter(|i| *i < who).count() as u32;
    let mut per_stream: HashMap<StreamKey, Vec<(OwnerId, usize)>> = HashMap::new();
    let mut per_worker: HashMap<OwnerId, usize> = HashMap::new();
    for (who, id, stream, n) in &runs {
        *per_worker.entry(who.clone()).or_default() += 1;
        let partition = Partitioning::default().partition_of(key_hash(stream.as_ref(), *id));
        assert!(
            takes(partition, rank(who), WORKERS as u32),
            "{}: {id} ran on {who}, whose share its partition is not",
            backend.name()
        );
        if let Some(s) = stream {
            per_stream
                .entry(s.clone())
                .or_default()
                .push((who.clone(), *n));
        }
    }
    assert_eq!(per_stream.len(), STREAMS);
    for (s, seen) in &per_stream {
        assert!(
            seen.iter().all(|(w, _)| *w == seen[0].0),
            "{s} ran on one worker"
        );
        let order: Vec<usize> = seen.iter().map(|(_, n)| *n).collect();
        assert_eq!(
            order,
            (0..PER_STREAM).collect::<Vec<_>>(),
            "{s} in enqueue order"
        );
    }
    println!("{}: items per worker {per_worker:?}", backend.name());
    assert_eq!(per_worker.len(), WORKERS, "every worker got a share");
    let counts = first.queue_counts(&queue).await.unwrap();
    assert_eq!((counts.pending(), counts.dead), (0, 0));
    drop(first);
    place.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_partitioned_workers_split_the_work() {
    workers_split_the_work_by_partition(Backend::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_partitioned_workers_split_the_work() {
    workers_split_the_work_by_partition(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_partitioned_workers_split_the_work() {
    workers_split_the_work_by_partition(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_partitioned_workers_split_the_work() {
    workers_split_the_work_by_partition(Backend::Redis).await;
}
