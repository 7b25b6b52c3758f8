//! The metrics example's set-up, scraped: the Prometheus exporter on 127.0.0.1 serves
//! the runtime's counters, labelled by queue, and they move as a worker works.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use tenure::runtime::{Job, JobError, Worker};
use tenure::{MemoryStore, NewItem, QueueName, StoreExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The exporter's text, by a plain HTTP/1.0 GET.
async fn scrape(addr: SocketAddr) -> String {
    let mut last = None;
    for _ in 0..50 {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(mut s) => {
                s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                    .await
                    .unwrap();
                let mut body = String::new();
                s.read_to_string(&mut body).await.unwrap();
                assert!(body.starts_with("HTTP/1."), "{body}");
                return body;
            }
            // The listener starts on the runtime in the background.
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the exporter did not listen on {addr}: {last:?}");
}

/// The value of the series `name{labels}` in Prometheus text, 0 when absent.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prometheus_exporter_serves_the_runtime_counters_labelled_by_queue_and_they_move() {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()
        .unwrap();
    let store = MemoryStore::default();
    let queue = QueueName::new("emails").unwrap();
    let worker = Worker::builder(store.clone())
        .queue(queue.clone())
        .concurrency(4)
        .handler(|job: Job| async move {
            if job.payload() == b"bad" {
                return Err(JobError::permanent("bad"));
            }
            Ok(())
        })
        .spawn()
        .unwrap();
    let before = scrape(addr).await;
    assert_eq!(
        value(&before, "tenure_completed_total{queue=\"emails\"}"),
        0.0
    );

    for p in [&b"a"[..], b"b", b"c", b"bad"] {
        store
            .enqueue_one(NewItem::new(queue.clone(), p.to_vec()))
            .await
            .unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while worker.metrics().completed + worker.metrics().failed < 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            worker.metrics()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after = scrape(addr).await;
    assert_eq!(
        value(&after, "tenure_claimed_total{queue=\"emails\"}"),
        4.0,
        "{after}"
    );
    assert_eq!(
        value(&after, "tenure_completed_total{queue=\"emails\"}"),
        3.0
    );
    assert_eq!(value(&after, "tenure_failed_total{queue=\"emails\"}"), 1.0);
    assert_eq!(value(&after, "tenure_in_flight{queue=\"emails\"}"), 0.0);
    assert_eq!(
        value(&after, "tenure_handler_seconds_count{queue=\"emails\"}"),
        4.0,
        "{after}"
    );
    assert_eq!(
        value(&after, "tenure_pickup_seconds_count{queue=\"emails\"}"),
        4.0
    );
    assert!(value(&after, "tenure_claim_seconds_count{queue=\"emails\"}") >= 1.0);
    assert!(value(&after, "tenure_finalize_batch_size_sum{queue=\"emails\"}") >= 4.0);
    worker.shutdown(Duration::from_secs(5)).await;
}
