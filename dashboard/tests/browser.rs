//! The dashboard in a real browser: Debian's Chromium driven through `chromedriver`
//! over WebDriver (fantoccini; nothing is downloaded). Opens the overview, pauses a
//! queue, requeues a dead item, sees the counts change (also by the refresher alone),
//! reaches the queues `..` and `.`, is refused under a rebound name, checks at 390 px
//! and 1,400 px that nothing important is off-screen, and saves a screenshot of each
//! page under `target/tmp/dashboard-screens/`.
//!
//! Without `chromedriver` and `chromium` on the machine the test skips, saying why;
//! under CI (`CI` set, as `.ci/run` does) a missing browser is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use tenure::{DynStore, HeartbeatParams, MemoryStore, NewItem, Store as _, StoreExt};
use tenure_dashboard::{router, DashboardConfig};

const CHROMIUM: &str = "/usr/bin/chromium";

/// A `chromedriver` of our own on a free port, killed when dropped.
struct Driver {
    child: Child,
    port: u16,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `chromedriver`, or answers why it cannot (then the test skips, or fails
/// under CI).
fn start_driver() -> Result<Driver, String> {
    let has = |bin: &str| {
        Command::new(bin)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !has("chromedriver") {
        return Err("no chromedriver on PATH (apt-get install chromium-driver)".to_owned());
    }
    if !std::path::Path::new(CHROMIUM).exists() {
        return Err(format!(
            "no Chromium at {CHROMIUM} (apt-get install chromium)"
        ));
    }
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("chromedriver does not start: {e}"))?;
    Ok(Driver {
        child,
        port,
        _profile: tempfile::tempdir().unwrap(),
    })
}

/// A headless Chromium session through `driver`, retried until the driver listens.
async fn browser(driver: &Driver) -> Client {
    let profile = driver._profile.path().display().to_string();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".to_owned(),
        json!({
            "binary": CHROMIUM,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update",
                "--no-first-run", "--window-size=1280,900",
                // A web page's name rebound to this machine (DNS rebinding).
                "--host-resolver-rules=MAP attacker.example 127.0.0.1",
                format!("--user-data-dir={profile}"),
            ],
        }),
    );
    let url = format!("http://127.0.0.1:{}", driver.port);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("no WebDriver session: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

fn screens() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screens");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    let path = screens().join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
}

/// The text of `css`, once the element is there (a page still loading has not
/// drawn it yet; a page being replaced may drop it between find and read).
async fn text(c: &Client, css: &str) -> String {
    poll_text(c, css, "any text", |_| true).await
}

/// Waits (up to 10 s) until the text of `css` is `want`.
async fn until_text(c: &Client, css: &str, want: &str) {
    poll_text(c, css, want, |got| got == want).await;
}

/// Reads `css` until its trimmed text satisfies `ok` (up to 10 s) and returns
/// it. An element that is missing or goes stale mid-read is read again: after
/// a click the old page stays up until the new one replaces it.
async fn poll_text(c: &Client, css: &str, wanted: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = match c.find(Locator::Css(css)).await {
            Ok(e) => e.text().await.ok(),
            Err(_) => None,
        };
        if let Some(got) = &got {
            if ok(got.trim()) {
                return got.trim().to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "{css}: wanted {wanted:?}, still {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_pauses_a_queue_and_requeues_a_dead_item_in_chromium() {
    let driver = match start_driver() {
        Ok(d) => d,
        Err(why) if !under_ci() => {
            eprintln!("skipped: {why}");
            return;
        }
        Err(why) => panic!("the browser is required under CI: {why}"),
    };

    let store: DynStore = Arc::new(MemoryStore::default());
    let first_dead = dead(&store, "emails", "smtp: 550 mailbox unavailable").await;
    dead(&store, "emails", "smtp: connection reset").await;
    ready(&store, "emails", 3).await;
    store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    store
        .enqueue_one(
            NewItem::new(
                q("emails"),
                br#"{"to":"ada@example.com","subject":"Welcome"}"#.to_vec(),
            )
            .delay(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    ready(&store, "thumbnails", 2).await;
    ready(&store, "..", 1).await;
    ready(&store, ".", 1).await;
    // Work over time, as workers report it: the overview charts it.
    let minute = tenure::history_minute(tenure::Clock::now(&tenure::SystemClock));
    store
        .history_add(tenure::HistoryAddParams::new(vec![
            tenure::HistoryEntry::new(q("emails"), minute, tenure::HistoryCounts::new(7, 2, 1)),
            tenure::HistoryEntry::new(
                q("thumbnails"),
                minute - Duration::from_secs(600),
                tenure::HistoryCounts::new(4, 0, 0),
            ),
        ]))
        .await
        .unwrap();
    ready(&store, &"q".repeat(128), 1).await;
    store
        .instance_heartbeat(HeartbeatParams::new(me()))
        .await
        .unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().nest(
        "/ops/tenure",
        router(
            store.clone(),
            DashboardConfig::new()
                .base_path("/ops/tenure")
                .environment("staging")
                .counts_ttl(Duration::from_millis(200)),
        ),
    );
    let server = tokio::spawn(tenure_dashboard::serve(
        listener,
        app,
        tenure_dashboard::ServeOptions::new(),
        std::future::pending(),
    ));
    let base = format!("http://{addr}/ops/tenure");

    let c = browser(&driver).await;
    c.goto(&base).await.unwrap();
    c.wait().for_element(Locator::Css("#queues")).await.unwrap();
    let emails = "tr[data-queue='emails']";
    assert_eq!(text(&c, &format!("{emails} td.dead")).await, "2");
    assert_eq!(text(&c, &format!("{emails} td.ready")).await, "2");
    // The refresher ran under the strict CSP: it shows the interval picker.
    let picker = c.find(Locator::Css("label.refresh")).await.unwrap();
    assert!(picker.is_displayed().await.unwrap(), "the script loaded");
    shot(&c, "1-overview").await;

    // Pause: a plain form POST, same-origin, redirected back to the overview.
    c.find(Locator::Css(&format!("{emails} button[name='do']")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until_text(&c, &format!("{emails} td.state"), "paused").await;
    shot(&c, "2-overview-paused").await;

    // Requeue one dead item from the queue's dead listing.
    c.find(Locator::Css(&format!("{emails} td.dead a")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait()
        .for_element(Locator::Css(&format!("input[value='{first_dead}']")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    shot(&c, "3-queue-dead").await;
    c.find(Locator::Css("button[formaction$='/items/requeue']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until_text(
        &c,
        "#notice .text",
        "Requeued 1 of 1 item (items that were not dead are left alone).",
    )
    .await;
    shot(&c, "4-requeued").await;
    // A reload shows the result is gone; it requeues nothing more.
    c.refresh().await.unwrap();
    poll_text(&c, "#notice", "the notice is gone", |t| {
        t.contains("shown once already")
    })
    .await;
    assert_eq!(store.queue_counts(&q("emails")).await.unwrap().dead, 1);

    // The counts changed: one dead fewer, one ready more.
    c.goto(&base).await.unwrap();
    until_text(&c, &format!("{emails} td.dead"), "1").await;
    until_text(&c, &format!("{emails} td.ready"), "3").await;

    // The refresher alone shows new work: pick 1 s, enqueue behind the page's back.
    c.find(Locator::Css("#refresh"))
        .await
        .unwrap()
        .select_by_value("1")
        .await
        .unwrap();
    ready(&store, "thumbnails", 5).await;
    until_text(&c, "tr[data-queue='thumbnails'] td.ready", "7").await;
    // Off again (the choice is remembered), so no reload swaps an element the
    // steps below are about to read or click.
    c.find(Locator::Css("#refresh"))
        .await
        .unwrap()
        .select_by_value("0")
        .await
        .unwrap();

    // The other pages, for the record.
    c.goto(&format!("{base}/queues/emails?state=ready&order=newest"))
        .await
        .unwrap();
    c.wait().for_element(Locator::Css("#items")).await.unwrap();
    shot(&c, "5-queue-ready").await;
    c.goto(&format!("{base}/items/{first_dead}?payload=show"))
        .await
        .unwrap();
    c.wait()
        .for_element(Locator::Css("#payload"))
        .await
        .unwrap();
    assert_eq!(text(&c, "#state").await, "ready");
    shot(&c, "6-item").await;
    c.goto(&format!("{base}/leases")).await.unwrap();
    c.wait().for_element(Locator::Css("#leases")).await.unwrap();
    shot(&c, "7-leases").await;
    c.goto(&format!(
        "{base}/queues/emails/dead?action=discard&older_than=&limit=100"
    ))
    .await
    .unwrap();
    assert_eq!(text(&c, "#takes").await, "1");
    shot(&c, "8-discard-preview").await;
    // The typed confirmation: the wrong name is refused and nothing is discarded.
    c.find(Locator::Css("input[name='confirm']"))
        .await
        .unwrap()
        .send_keys("email")
        .await
        .unwrap();
    c.find(Locator::Css("button.danger"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The refusal replaces the preview page; wait for it rather than for an
    // element both pages have.
    poll_text(&c, "h1", "400 (unconfirmed discard refused)", |h| {
        h.starts_with("400")
    })
    .await;
    shot(&c, "9-discard-refused").await;
    assert_eq!(store.queue_counts(&q("emails")).await.unwrap().dead, 1);

    // Dead counts are highlighted (one class attribute, not two).
    c.goto(&base).await.unwrap();
    let class = c
        .find(Locator::Css(&format!("{emails} td.dead")))
        .await
        .unwrap()
        .attr("class")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(class.split(' ').any(|c| c == "warn"), "{class}");

    // The queues `..` and `.`: their links and Pause forms reach them, not `/`.
    for (name, file) in [("..", "dotdot"), (".", "dot")] {
        c.goto(&base).await.unwrap();
        c.find(Locator::Css(&format!("tr[data-queue='{name}'] td.name a")))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        until_text(&c, "h1", &format!("Queue {name}")).await;
        c.find(Locator::Css(".meta button[name='do']"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        poll_text(&c, "#notice .text", "paused", |t| {
            t.starts_with(&format!("Paused queue {name}:"))
        })
        .await;
        assert_eq!(text(&c, "h1").await, format!("Queue {name}"));
        shot(&c, &format!("10-queue-{file}-paused")).await;
        assert!(store.queue_counts(&q(name)).await.unwrap().paused, "{name}");
    }

    // A discard by id asks first, and runs only once confirmed.
    c.goto(&format!("{base}/queues/emails?state=dead"))
        .await
        .unwrap();
    c.wait()
        .for_element(Locator::Css("#items input[name='id']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.find(Locator::Css("button[formaction$='/items/discard']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until_text(&c, "h1", "Discard dead items?").await;
    shot(&c, "13-discard-asks").await;
    assert_eq!(
        store.queue_counts(&q("emails")).await.unwrap().dead,
        1,
        "asked, not run"
    );
    c.find(Locator::Css("#confirm button.danger"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until_text(
        &c,
        "#notice .text",
        "Discarded 1 of 1 item (items that were not dead are left alone).",
    )
    .await;
    assert_eq!(store.queue_counts(&q("emails")).await.unwrap().dead, 0);

    // A page whose name was rebound to 127.0.0.1 gets nothing from the dashboard.
    let port = addr.port();
    c.goto(&format!("http://attacker.example:{port}/ops/tenure"))
        .await
        .unwrap();
    let body = text(&c, "body").await;
    assert!(body.starts_with("421 Misdirected Request"), "{body}");
    assert!(!body.contains("emails"), "{body}");
    shot(&c, "11-rebound-refused").await;

    // At a phone's width and a wide screen: nothing important off-screen.
    for (width, label) in [(390u32, "phone"), (1400, "wide")] {
        c.set_window_size(width, 900).await.unwrap();
        for (page, path, important) in [
            (
                "overview",
                base.clone(),
                "tr[data-queue] td.name, tr[data-queue] td.state, tr[data-queue] td.act button",
            ),
            (
                "queue",
                format!("{base}/queues/{}?state=ready", "q".repeat(128)),
                "h1, .meta button[name='do'], nav.tabs a",
            ),
            (
                "item",
                format!("{base}/items/{first_dead}"),
                "h1, #state, table.fields th, table.fields td, form button",
            ),
        ] {
            c.goto(&path).await.unwrap();
            c.wait()
                .for_element(Locator::Css("main#content"))
                .await
                .unwrap();
            let v = c
                .execute(
                    "const vw = document.documentElement.clientWidth;
                     const off = [...document.querySelectorAll(arguments[0])]
                       .map(e => [e.tagName + '.' + e.className + ' ' + (e.textContent || '').slice(0, 20), e.getBoundingClientRect()])
                       .filter(([, r]) => r.left < 0 || r.right > vw + 0.5)
                       .map(([n, r]) => n + ' ' + r.left + '..' + r.right);
                     return { vw, page: document.documentElement.scrollWidth, count: document.querySelectorAll(arguments[0]).length, off };",
                    vec![json!(important)],
                )
                .await
                .unwrap();
            let vw = v["vw"].as_f64().unwrap();
            assert!(
                (vw - f64::from(width)).abs() < 40.0,
                "{label}: a viewport of about {width} px, got {v}"
            );
            assert!(
                v["count"].as_u64().unwrap() > 0,
                "{page}: {important} found"
            );
            assert!(
                v["page"].as_f64().unwrap() <= vw + 0.5,
                "{label} {page}: the page is no wider than the screen: {v}"
            );
            assert_eq!(v["off"], json!([]), "{label} {page}: off-screen: {v}");
            if page == "overview" {
                // The chart is drawn, with its data, within the screen.
                let chart = c
                    .execute(
                        "const svg = document.querySelector('figure.chart svg');
                         const r = svg.getBoundingClientRect();
                         return { bars: svg.querySelectorAll('rect').length, left: r.left, right: r.right, height: r.height };",
                        vec![],
                    )
                    .await
                    .unwrap();
                assert!(chart["bars"].as_u64().unwrap() >= 4, "{label}: {chart}");
                assert!(chart["height"].as_f64().unwrap() > 20.0, "{label}: {chart}");
                assert!(chart["left"].as_f64().unwrap() >= 0.0, "{label}: {chart}");
                assert!(
                    chart["right"].as_f64().unwrap() <= vw + 0.5,
                    "{label}: {chart}"
                );
            }
            shot(&c, &format!("12-{label}-{page}")).await;
        }
    }

    c.close().await.unwrap();
    server.abort();
    drop(driver);
}
