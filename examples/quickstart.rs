//! Quickstart: enqueue 1,000 typed tasks into an SQLite file and drain them with four
//! workers of the Tenure runtime. No server needed:
//!
//! ```text
//! cargo run --example quickstart            # a file in the system temp directory
//! cargo run --example quickstart -- my.db   # or a file of your choosing
//! cargo run --example quickstart -- --help
//! ```
//!
//! Every run starts from a fresh file, so it reruns cleanly: a Tenure database at the
//! path is replaced, anything else there is refused and left alone. The same code runs
//! on PostgreSQL by opening the store with `tenure::open("postgres://...")` instead.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tenure::runtime::{Job, JobError, Worker};
use tenure::{EnqueueParams, NewItem, QueueName, SqliteConfig, SqliteStore, Store, Task};
use tenure_examples::args;

/// The work: a Rust value, stored as JSON on the queue its type names.
#[derive(Serialize, Deserialize)]
struct Count {
    n: usize,
}

impl Task for Count {
    const QUEUE: &'static str = "quickstart";
}

const ITEMS: usize = 1_000;

const USAGE: &str = "\
Enqueue 1,000 items into an SQLite file and drain them with four Tenure workers.

usage: quickstart [PATH]

  PATH        the database file (default: tenure-quickstart.db in the system temp
              directory). A Tenure database there is replaced; any other file is
              refused and left alone.
  -h, --help  print this help";
const WORKERS: usize = 4;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = args::parse_or_exit(USAGE, 1)
        .pop()
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("tenure-quickstart.db"));
    if let Err(e) = args::replace_store_file(&path) {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    println!(
        "Tenure quickstart: running on SQLite, file {} (no server)",
        path.display()
    );

    // 1. Open the store: creates the file and its schema. Finished items are kept (the
    //    purge removes them after a day), so `tenure status` can show them afterwards.
    let store = SqliteStore::open(SqliteConfig::new(&path).keep_done(true)).await?;

    // 2. Enqueue 1,000 tasks in one call (`store.enqueue_task(&Count { n })` enqueues
    //    one); each carries its number.
    let started = Instant::now();
    let items: Vec<NewItem> = (0..ITEMS)
        .map(|n| NewItem::task(&Count { n }))
        .collect::<Result<_, _>>()?;
    store.enqueue(EnqueueParams::new(items)).await?;
    println!("enqueued {ITEMS} items in {:?}", started.elapsed());

    // 3. Start four workers on the same store. Each runs `Count` tasks: the handler
    //    gets the decoded value, and counts how often each number ran, so the summary
    //    can show that none ran twice and none was lost.
    let runs: Arc<Mutex<Vec<u32>>> = Arc::new(Mutex::new(vec![0; ITEMS]));
    let processed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let (runs, processed) = (Arc::clone(&runs), Arc::clone(&processed));
        let worker = Worker::builder(store.clone())
            .concurrency(4)
            .lease_duration(Duration::from_secs(30))
            .task_with(move |Count { n }: Count, _job: Job| {
                let (runs, processed) = (Arc::clone(&runs), Arc::clone(&processed));
                async move {
                    if let Some(count) = runs
                        .lock()
                        .map_err(|_| JobError::retry("poisoned"))?
                        .get_mut(n)
                    {
                        *count += 1;
                    }
                    processed.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                }
            })
            .spawn()?;
        workers.push(worker);
    }

    // 4. Watch progress until every item's completion is written.
    let completed = |workers: &[Worker]| workers.iter().map(|w| w.metrics().completed).sum::<u64>();
    let mut next_milestone = ITEMS as u64 / 4;
    while completed(&workers) < ITEMS as u64 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let done = processed.load(Ordering::Relaxed);
        if done >= next_milestone {
            println!("processed {done}/{ITEMS} after {:.0?}", started.elapsed());
            next_milestone = (done / 250 + 1) * 250;
        }
        if started.elapsed() > Duration::from_secs(120) {
            return Err("the items were not drained within two minutes".into());
        }
    }
    let elapsed = started.elapsed();

    // 5. Stop the workers gracefully and check what the store says.
    let mut totals = (0, 0, 0);
    for worker in workers {
        let report = worker.shutdown(Duration::from_secs(5)).await;
        totals.0 += report.metrics.claimed;
        totals.1 += report.metrics.completed;
        totals.2 += report.metrics.lost;
    }
    let counts = store.queue_counts(&QueueName::new(Count::QUEUE)?).await?;
    let (duplicates, lost) = {
        let runs = runs.lock().map_err(|_| "poisoned")?;
        (
            runs.iter().filter(|c| **c > 1).count(),
            runs.iter().filter(|c| **c == 0).count(),
        )
    };
    println!(
        "done: processed {}, duplicates {duplicates}, lost {lost}, {ITEMS} items in {:.2?} = {:.0} items/s",
        processed.load(Ordering::Relaxed),
        elapsed,
        ITEMS as f64 / elapsed.as_secs_f64()
    );
    println!(
        "workers: claimed {}, completed {}, leases lost {}; store: {} pending, {} dead",
        totals.0,
        totals.1,
        totals.2,
        counts.pending(),
        counts.dead
    );
    // Checkpoint the write-ahead log into the file, so the run leaves one file.
    store.close().await?;
    println!("the SQLite file is {}", path.display());
    if duplicates > 0 || lost > 0 || counts.pending() > 0 {
        return Err("some items were not processed exactly once".into());
    }
    // 6. The operator's view of the same file (`cargo install --path cli` installs it).
    println!(
        "see it as an operator: tenure status 'sqlite://{}'",
        path.display()
    );
    println!(
        "or in a browser: tenure dashboard 'sqlite://{}' and open http://127.0.0.1:8080/queues/{}",
        path.display(),
        Count::QUEUE
    );
    Ok(())
}
