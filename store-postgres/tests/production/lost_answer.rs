//! A connection killed after the server committed a complete and before the answer
//! reached the store: the runtime retries, is refused as stale, and must not call
//! that a lost lease; the item is done exactly once.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tenure_runtime::{Job, Worker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A TCP proxy in front of the server. Armed, it watches each connection for the
/// complete statement; when that connection then sends `COMMIT`, the proxy
/// forwards it, waits for the server's `CommandComplete` for it (the commit has
/// happened) and closes both sides instead of relaying it.
struct Proxy {
    port: u16,
    armed: Arc<AtomicBool>,
    kills: Arc<AtomicUsize>,
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(AtomicBool::new(false));
        let kills = Arc::new(AtomicUsize::new(0));
        let (a, k) = (armed.clone(), kills.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(upstream()).await.unwrap();
                tokio::spawn(relay(client, server, a.clone(), k.clone()));
            }
        });
        Proxy { port, armed, kills }
    }
}

async fn relay(
    mut client: TcpStream,
    mut server: TcpStream,
    armed: Arc<AtomicBool>,
    kills: Arc<AtomicUsize>,
) {
    let (mut cr, mut cw) = client.split();
    let (mut sr, mut sw) = server.split();
    let (mut cbuf, mut sbuf) = (vec![0; 64 * 1024], vec![0; 64 * 1024]);
    let mut saw_complete = false;
    let mut swallow_commit = false;
    loop {
        tokio::select! {
            n = cr.read(&mut cbuf) => {
                let Ok(n @ 1..) = n else { return };
                let chunk = &cbuf[..n];
                if armed.load(Ordering::SeqCst) && contains(chunk, b"tenure_complete") {
                    saw_complete = true;
                }
                if saw_complete
                    && chunk.first() == Some(&b'Q')
                    && contains(chunk, b"COMMIT")
                    && armed.swap(false, Ordering::SeqCst)
                {
                    swallow_commit = true;
                }
                if sw.write_all(chunk).await.is_err() {
                    return;
                }
            }
            n = sr.read(&mut sbuf) => {
                let Ok(n @ 1..) = n else { return };
                let chunk = &sbuf[..n];
                if swallow_commit && contains(chunk, b"COMMIT\0") {
                    kills.fetch_add(1, Ordering::SeqCst);
                    return; // both sockets close; the answer never arrives
                }
                if cw.write_all(chunk).await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs one item through a worker whose store talks through the proxy; returns
/// the worker's metrics, how often the handler ran, and the item's id.
async fn run_one(ctx: &Ctx, keep_done: bool) -> (tenure_runtime::MetricsSnapshot, usize, ItemId) {
    let proxy = Proxy::start().await;
    let url = with_authority(&common::url(), &format!("127.0.0.1:{}", proxy.port));
    let url = with_param(&url, "sslmode=disable");
    let store = PgStore::connect(
        PgConfig::new(url)
            .schema(&ctx.schema)
            .keep_done(keep_done)
            // Every call in its own transaction with its SQL text on the wire,
            // so the proxy can tell the complete's COMMIT.
            .statement_cache(false)
            .listen(false)
            .migrate_on_connect(false)
            .max_connections(2),
    )
    .await
    .unwrap();
    let id = ctx
        .store
        .enqueue_one(NewItem::new(q(), b"x".to_vec()))
        .await
        .unwrap()
        .id;
    let runs = Arc::new(AtomicUsize::new(0));
    let (r, armed) = (runs.clone(), proxy.armed.clone());
    let worker = Worker::builder(store.clone())
        .queue(q())
        .concurrency(1)
        .maintenance(false)
        .lease_duration(LEASE)
        .handler(move |_job: Job| {
            let (r, armed) = (r.clone(), armed.clone());
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                // The next complete on the wire is this item's.
                armed.store(true, Ordering::SeqCst);
                Ok(())
            }
        })
        .spawn()
        .unwrap();
    until("the killed answer to be settled", || {
        let m = worker.metrics();
        m.completed + m.unconfirmed + m.lost >= 1
    })
    .await;
    let report = worker.shutdown(Duration::from_secs(5)).await;
    store.close().await;
    assert_eq!(
        proxy.kills.load(Ordering::SeqCst),
        1,
        "the answer was killed"
    );
    (report.metrics, runs.load(Ordering::SeqCst), id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_committed_before_its_connection_died_counts_completed_not_lost() {
    let Some(ctx) = Ctx::with(|c| c.keep_done(true)).await else {
        return;
    };
    let (m, runs, id) = run_one(&ctx, true).await;
    assert_eq!((m.lost, m.unconfirmed, m.completed), (0, 0, 1), "{m:?}");
    assert_eq!(runs, 1, "the handler ran once");
    let item = ctx.store.item_get(id).await.unwrap().unwrap();
    assert_eq!((item.state, item.attempt), (ItemState::Done, 1));
    ctx.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleting_store_counts_the_retried_complete_unconfirmed_not_lost() {
    let Some(ctx) = Ctx::new().await else {
        return;
    };
    let (m, runs, id) = run_one(&ctx, false).await;
    assert_eq!((m.lost, m.unconfirmed, m.completed), (0, 1, 0), "{m:?}");
    assert_eq!(runs, 1, "the handler ran once");
    assert!(
        ctx.store.item_get(id).await.unwrap().is_none(),
        "the first complete took effect: the item is gone"
    );
    ctx.finish().await;
}
