//! Partitioned claiming in the runtime (G14): workers with their own instance ids
//! split the work by partition and keep each stream on one of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_core::partition::{key_hash, takes};
use tenure_core::{ErrorKind, ItemId, NewItem, OwnerId, Partitioning, Store, StreamKey};
use tenure_runtime::{Job, Worker};

use crate::support::{enqueue_items, memory, queue, until, Probe};

type Handled = Arc<Mutex<Vec<(OwnerId, ItemId, Option<StreamKey>, Vec<u8>)>>>;

fn partitioned_worker(store: impl Store, id: &str, handled: &Handled) -> Worker {
    let me = OwnerId::new(id).unwrap();
    let handled = Arc::clone(handled);
    let who = me.clone();
    Worker::builder(store)
        .queue(queue())
        .instance_id(me)
        .partitioned(Partitioning::default())
        .concurrency(4)
        .maintenance(false)
        .handler(move |job: Job| {
            let (handled, who) = (Arc::clone(&handled), who.clone());
            async move {
                let item = job.item();
                handled.lock().unwrap().push((
                    who,
                    item.id,
                    item.stream.clone(),
                    item.payload.clone(),
                ));
                Ok(())
            }
        })
        .spawn()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn two_partitioned_workers_split_the_work_and_keep_each_stream_on_one_of_them() {
    let store = memory();
    let handled: Handled = Arc::default();
    let a = partitioned_worker(store.clone(), "worker-a", &handled);
    let b = partitioned_worker(store.clone(), "worker-b", &handled);
    // Both registered before any work exists, so the ranks are settled.
    for _ in 0..1_000 {
        if store.instance_list().await.unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        store.instance_list().await.unwrap().len(),
        2,
        "both registered"
    );
    let mut items = Vec::new();
    for n in 0..10u8 {
        for s in 0..10 {
            let stream = StreamKey::new(format!("s{s}")).unwrap();
            items.push(NewItem::new(queue(), vec![n]).stream(stream));
        }
    }
    items.extend((0..50u8).map(|n| NewItem::new(queue(), vec![n])));
    let total = items.len();
    enqueue_items(&store, items).await;
    until(Duration::from_secs(120), || {
        handled.lock().unwrap().len() >= total
    })
    .await;

    let handled = handled.lock().unwrap().clone();
    assert_eq!(handled.len(), total, "every item handled once");
    let instances = [a.instance().clone(), b.instance().clone()];
    let rank = |who: &OwnerId| instances.iter().filter(|i| *i < who).count() as u32;
    let mut by_stream: HashMap<StreamKey, Vec<(OwnerId, u8)>> = HashMap::new();
    for (who, id, stream, payload) in &handled {
        let partition = Partitioning::default().partition_of(key_hash(stream.as_ref(), *id));
        assert!(
            takes(partition, rank(who), 2),
            "{id} ran on {who}, whose share its partition is not"
        );
        if let Some(s) = stream {
            by_stream
                .entry(s.clone())
                .or_default()
                .push((who.clone(), payload[0]));
        }
    }
    assert_eq!(by_stream.len(), 10);
    for (s, runs) in by_stream {
        assert!(
            runs.iter().all(|(w, _)| *w == runs[0].0),
            "{s} ran on one worker"
        );
        let order: Vec<u8> = runs.iter().map(|(_, n)| *n).collect();
        assert_eq!(order, (0..10).collect::<Vec<u8>>(), "{s} in enqueue order");
    }
    let per_worker = |w: &OwnerId| handled.iter().filter(|h| h.0 == *w).count();
    assert!(per_worker(a.instance()) > 0 && per_worker(b.instance()) > 0);
}

#[tokio::test(start_paused = true)]
async fn spawn_refuses_partitioning_on_a_store_without_it_and_zero_partitions() {
    let store = Probe::new(memory());
    store.declare_nothing(true);
    let refused = Worker::builder(store.clone())
        .queue(queue())
        .partitioned(Partitioning::default())
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Unsupported, "{refused}");
    store.declare_nothing(false);
    let refused = Worker::builder(store)
        .queue(queue())
        .partitioned(Partitioning::new(0))
        .handler(|_job: Job| async { Ok(()) })
        .spawn()
        .unwrap_err();
    assert_eq!(refused.invalid_field(), Some("partitions"), "{refused}");
}

#[tokio::test(start_paused = true)]
async fn an_evicted_partitioned_worker_registers_again_at_once_and_claims() {
    let store = Probe::new(memory());
    let handled: Handled = Arc::default();
    let worker = partitioned_worker(store.clone(), "worker-a", &handled);
    for _ in 0..1_000 {
        if !store.instance_list().await.unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Taken out of the registry behind its back, as an eviction after a pause would.
    store
        .instance_deregister(tenure_core::DeregisterParams::new(
            worker.instance().clone(),
        ))
        .await
        .unwrap();
    let beats_before = store.calls().heartbeats.len();
    let enqueued_at = tokio::time::Instant::now();
    enqueue_items(&store, vec![NewItem::new(queue(), vec![1])]).await;
    until(Duration::from_secs(60), || {
        !handled.lock().unwrap().is_empty()
    })
    .await;
    let took = enqueued_at.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "handled {took:?} after the enqueue: the worker registered again at once, not at \
         its next heartbeat (10 s)"
    );
    assert!(
        store.calls().heartbeats.len() > beats_before,
        "it registered again"
    );
    assert!(
        worker.metrics().store_errors >= 1,
        "the refused claim was counted"
    );
}
