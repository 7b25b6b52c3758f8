//! Metrics: the runtime records through the `metrics` facade; this program installs
//! the Prometheus exporter and serves its text on 127.0.0.1 while a worker drains a
//! stream of items (some of which fail and retry). No server needed:
//!
//! ```text
//! cargo run --example metrics               # http://127.0.0.1:9184/metrics
//! cargo run --example metrics -- 9999       # another port
//! curl -s http://127.0.0.1:9184/metrics | grep tenure_
//! ```
//!
//! Install the recorder before spawning workers: a worker registers its handles when
//! it starts. Stop with Ctrl-C.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use tenure::runtime::{Job, JobError, Worker};
use tenure::{MemoryStore, NewItem, QueueName, StoreExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = match std::env::args().nth(1) {
        Some(p) => p.parse()?,
        None => 9184,
    };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    // 1. The exporter first, so the worker's handles register with it.
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()?;
    tenure::runtime::describe_metrics();
    println!("Tenure metrics: Prometheus text on http://{addr}/metrics (Ctrl-C stops)");

    // 2. A worker on a memory store: every seventh item fails once and retries.
    let store = MemoryStore::default();
    let queue = QueueName::new("emails")?;
    let worker = Worker::builder(store.clone())
        .queue(queue.clone())
        .concurrency(4)
        .handler(|job: Job| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if job.payload().first().is_some_and(|b| b % 7 == 0) && job.attempt() == 1 {
                return Err(JobError::retry_after("flaky", Duration::from_millis(200)));
            }
            Ok(())
        })
        .spawn()?;

    // 3. Ten items a tick until Ctrl-C.
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut n: u8 = 0;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = tick.tick() => {
                for _ in 0..10 {
                    n = n.wrapping_add(1);
                    store.enqueue_one(NewItem::new(queue.clone(), vec![n])).await?;
                }
            }
        }
    }
    let report = worker.shutdown(Duration::from_secs(5)).await;
    println!(
        "stopped: {} completed, {} failed",
        report.metrics.completed, report.metrics.failed
    );
    Ok(())
}
