//! What concurrency limits and fair shares cost, as ratios measured in one run on each
//! store (G16, G18):
//!
//! ```sh
//! cargo run --release -p tenure-benches --example limits_cost -- [stores] [items]
//! ```
//!
//! `stores` is a comma-separated list of `memory`, `sqlite`, `postgres`, `redis`
//! (default: all four; PostgreSQL at `TENURE_POSTGRES_URL`, Redis at
//! `TENURE_REDIS_URL`, each on a fresh schema or key prefix). `items` (default
//! 20,000) is the size of each drain. Three figures per store:
//!
//! - **keyed**: a drain of `items` items spread over 1,000 limit keys, each key limited
//!   to 5 running, over the same drain with no keys and no limits (4 claim loops of
//!   100). The target is at least 0.8.
//! - **hot key**: cold items (100 keys, 1 each at a time, 50 per second for 4 s) are
//!   worked by a `Worker` of 32 slots beside one hot key holding 100,000 ready items at
//!   its limit of 5 (each hot item takes 10 ms); the cold items' pickup p99 over the
//!   same run without the hot key. The target is at most 2.
//! - **fair**: a drain of `items` items over 1,000 fairness keys over the same drain
//!   with none. The target is at least 0.8.
//!
//! A store that does not serve a group (see `Capabilities::limits` and
//! `Capabilities::fair_shares`) says so instead of a figure.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tenure_benches::sustained::{payload, read_payload, Epoch};
use tenure_benches::{drain, runtime, DrainSpec, OnEmpty, Percentiles};
use tenure_core::{
    EnqueueParams, FairnessKey, LimitKey, LimitsParams, NewItem, QueueLimits, QueueName, Store,
};
use tenure_runtime::{Job, JobError, Worker};

const KEYS: usize = 1_000;
const PER_KEY: u32 = 5;
const HOT_ITEMS: usize = 100_000;
const COLD_KEYS: usize = 100;
const COLD_RATE: u64 = 50;
const COLD_FOR: Duration = Duration::from_secs(4);
const HOT_WORK: Duration = Duration::from_millis(10);

type DynStore = Arc<dyn Store>;

fn queue(tag: &str) -> QueueName {
    QueueName::new(format!("limits_{tag}_{}", uuid::Uuid::now_v7().simple())).expect("queue")
}

/// Enqueues `items` in chunks of 1,000.
async fn enqueue_all(store: &DynStore, items: Vec<NewItem>) {
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        let chunk: Vec<NewItem> = items.by_ref().take(1_000).collect();
        store
            .enqueue(EnqueueParams::new(chunk))
            .await
            .expect("enqueue");
    }
}

/// Items per second of a drain of `n` items made by `make`, with `limits` set first.
async fn drained(
    store: &DynStore,
    n: usize,
    limits: Option<QueueLimits>,
    make: impl Fn(&QueueName, usize) -> NewItem,
) -> f64 {
    let q = queue("drain");
    if let Some(limits) = limits {
        store
            .limits_set(LimitsParams::new(q.clone(), limits))
            .await
            .expect("limits_set");
    }
    enqueue_all(store, (0..n).map(|i| make(&q, i)).collect()).await;
    let spec = DrainSpec::new(q, n, 100, 4).on_empty(OnEmpty::Retry {
        pause: Duration::from_millis(1),
        give_up_after: 2_000,
    });
    let run = drain(store, &spec).await.expect("drain");
    n as f64 / run.elapsed.as_secs_f64()
}

fn keyed(q: &QueueName, i: usize) -> NewItem {
    NewItem::new(q.clone(), (i as u64).to_le_bytes().to_vec())
        .limit_key(LimitKey::new(format!("k{}", i % KEYS)).expect("key"))
}

fn tenant(q: &QueueName, i: usize) -> NewItem {
    NewItem::new(q.clone(), (i as u64).to_le_bytes().to_vec())
        .fairness_key(FairnessKey::new(format!("t{}", i % KEYS)).expect("key"))
}

fn plain(q: &QueueName, i: usize) -> NewItem {
    NewItem::new(q.clone(), (i as u64).to_le_bytes().to_vec())
}

/// The cold items' pickup p99 (µs) with `hot` hot items ready beside them.
async fn cold_pickup_p99(store: &DynStore, hot: usize) -> u64 {
    let q = queue("hot");
    store
        .limits_set(LimitsParams::new(
            q.clone(),
            QueueLimits::new().per_key(PER_KEY),
        ))
        .await
        .expect("limits_set");
    let hot_key = LimitKey::new("hot").expect("key");
    enqueue_all(
        store,
        (0..hot)
            .map(|_| NewItem::new(q.clone(), b"hot".to_vec()).limit_key(hot_key.clone()))
            .collect(),
    )
    .await;
    let epoch = Epoch::new();
    let picked: Arc<Mutex<Vec<u64>>> = Arc::default();
    let recorder = picked.clone();
    let worker = Worker::builder(store.clone())
        .queue(q.clone())
        .concurrency(32)
        .maintenance(false)
        .handler(move |job: Job| {
            let recorder = recorder.clone();
            async move {
                match read_payload(job.payload()) {
                    Some((_, stamp)) => recorder
                        .lock()
                        .expect("pickups")
                        .push(epoch.now_us().saturating_sub(stamp)),
                    None => tokio::time::sleep(HOT_WORK).await,
                }
                Ok::<(), JobError>(())
            }
        })
        .spawn()
        .expect("worker");
    let cold = (COLD_RATE * COLD_FOR.as_secs()) as usize;
    let start = tokio::time::Instant::now();
    for i in 0..cold {
        tokio::time::sleep_until(start + Duration::from_millis(1_000 * i as u64 / COLD_RATE)).await;
        let key = LimitKey::new(format!("cold{}", i % COLD_KEYS)).expect("key");
        let item = NewItem::new(q.clone(), payload(i as u64, epoch.now_us())).limit_key(key);
        store
            .enqueue(EnqueueParams::one(item))
            .await
            .expect("enqueue");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while picked.lock().expect("pickups").len() < cold {
        assert!(
            Instant::now() < deadline,
            "cold items not picked up in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    worker.shutdown(Duration::from_secs(10)).await;
    let mut samples = picked.lock().expect("pickups").clone();
    Percentiles::of(&mut samples).expect("samples").p99
}

async fn open(name: &str) -> Option<DynStore> {
    let url = match name {
        "memory" => "memory://".to_owned(),
        "sqlite" => {
            let path = std::env::temp_dir()
                .join(format!("limits_cost_{}.db", uuid::Uuid::now_v7().simple()));
            format!("sqlite://{}", path.display())
        }
        "postgres" => {
            let base = std::env::var("TENURE_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
            let sep = if base.contains('?') { '&' } else { '?' };
            format!(
                "{base}{sep}tenure_schema=limits_cost_{}",
                uuid::Uuid::now_v7().simple()
            )
        }
        "redis" => {
            let base = std::env::var("TENURE_REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            let sep = if base.contains('?') { '&' } else { '?' };
            format!(
                "{base}{sep}tenure_prefix=limits_cost_{}",
                uuid::Uuid::now_v7().simple()
            )
        }
        other => {
            eprintln!("unknown store {other}");
            return None;
        }
    };
    match tenure::open(&url).await {
        Ok(store) => Some(store),
        Err(e) => {
            eprintln!("{name}: cannot open {url}: {e}");
            None
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let stores = args
        .get(1)
        .map(String::as_str)
        .unwrap_or("memory,sqlite,postgres,redis");
    let n: usize = args
        .get(2)
        .map_or(20_000, |a| a.replace('_', "").parse().expect("items"));
    let rt = runtime().expect("runtime");
    println!("| store | keyed / plain drain | cold pickup p99, hot / none | fair / plain drain |");
    println!("|---|---|---|---|");
    for name in stores.split(',') {
        rt.block_on(async {
            let Some(store) = open(name).await else {
                return;
            };
            let caps = store.capabilities();
            let keyed = if caps.limits {
                let plain_rate = drained(&store, n, None, plain).await;
                let keyed_rate =
                    drained(&store, n, Some(QueueLimits::new().per_key(PER_KEY)), keyed).await;
                format!(
                    "{:.2} ({keyed_rate:.0} / {plain_rate:.0} items/s)",
                    keyed_rate / plain_rate
                )
            } else {
                "not served".to_owned()
            };
            let hot = if caps.limits {
                let none = cold_pickup_p99(&store, 0).await;
                let hot = cold_pickup_p99(&store, HOT_ITEMS).await;
                format!(
                    "{:.2} ({:.1} / {:.1} ms)",
                    hot as f64 / none.max(1) as f64,
                    hot as f64 / 1e3,
                    none as f64 / 1e3
                )
            } else {
                "not served".to_owned()
            };
            let fair = if caps.fair_shares {
                let plain_rate = drained(&store, n, None, plain).await;
                let fair_rate = drained(&store, n, None, tenant).await;
                format!(
                    "{:.2} ({fair_rate:.0} / {plain_rate:.0} items/s)",
                    fair_rate / plain_rate
                )
            } else {
                "not served".to_owned()
            };
            println!("| {name} | {keyed} | {hot} | {fair} |");
        });
    }
}
