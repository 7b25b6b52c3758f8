//! G1 across OS processes: two child processes (this test binary re-executed with
//! `TENURE_SQLITE_CHILD_DB` set) and this one claim from one database file at once.
//! Every item must be claimed exactly once and completed exactly once (by what each
//! process was told). A handshake makes all three hold claimed leases at the same
//! moment before any completes, so the processes certainly overlap.

// A test binary without libtest's #[test] markers: clippy.toml's test allowance does
// not reach it.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use libtest_mimic::{Arguments, Failed, Trial};
use tenure_core::{
    ClaimParams, CompleteParams, EnqueueParams, ItemId, NewItem, OwnerId, QueueName, Store,
    TokenOutcome,
};
use tenure_sqlite::{SqliteConfig, SqliteStore};

const CHILD_ENV: &str = "TENURE_SQLITE_CHILD_DB";
const ITEMS: u32 = 3_000;
const CHILDREN: usize = 2;
const LEASE: Duration = Duration::from_secs(300);

fn queue() -> QueueName {
    QueueName::new("mp").unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Claims in batches of 5 and completes each batch until the queue is empty, returning
/// one line per claim and per completion answer. `holding` runs once, while the first
/// batch is claimed and not yet completed.
async fn drain(store: &SqliteStore, owner: &str, holding: impl FnOnce()) -> Vec<String> {
    let owner = OwnerId::new(owner).unwrap();
    let mut lines = Vec::new();
    let mut holding = Some(holding);
    loop {
        let leases = store
            .claim(ClaimParams::new(queue(), owner.clone(), 5, LEASE))
            .await
            .unwrap();
        if leases.is_empty() {
            return lines;
        }
        if let Some(hook) = holding.take() {
            hook();
        }
        let tokens: Vec<_> = leases.iter().map(|l| l.token).collect();
        for t in &tokens {
            lines.push(format!("claimed {} {}", t.id, t.attempt));
        }
        let outs = store
            .complete(CompleteParams::new(tokens.clone()))
            .await
            .unwrap();
        for (t, o) in tokens.iter().zip(outs) {
            let o = match o {
                TokenOutcome::Accepted => "accepted",
                TokenOutcome::LeaseLost => "lost",
                TokenOutcome::OutOfOrder => "out of order",
            };
            lines.push(format!("completed {} {o}", t.id));
        }
    }
}

fn config(path: &str) -> SqliteConfig {
    SqliteConfig::new(path).keep_done(true)
}

/// The child's side: open, say ready, wait for "go", drain, print what it was told.
/// Holding its first batch, it says "holding" and waits for "continue", so every
/// process is certain to hold leases at the same moment.
fn child(path: &str) -> ExitCode {
    let rt = runtime();
    let store = rt.block_on(SqliteStore::open(config(path))).unwrap();
    println!("ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let me = format!("child-{}", std::process::id());
    let hold = || {
        println!("holding");
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "continue");
    };
    for line in rt.block_on(drain(&store, &me, hold)) {
        println!("{line}");
    }
    println!("done");
    ExitCode::SUCCESS
}

fn parent() -> Result<(), Failed> {
    let dir = tempfile::TempDir::new()?;
    let path = dir.path().join("shared.db");
    let path_s = path.to_str().ok_or("temp path is not UTF-8")?.to_string();
    let rt = runtime();
    let store = rt.block_on(SqliteStore::open(config(&path_s)))?;
    let items: Vec<NewItem> = (0..ITEMS)
        .map(|i| NewItem::new(queue(), i.to_le_bytes().to_vec()))
        .collect();
    let ids: Vec<ItemId> = items.iter().map(|i| i.id).collect();
    rt.block_on(store.enqueue(EnqueueParams::new(items)))?;

    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for _ in 0..CHILDREN {
        let mut c = Command::new(&exe)
            .env(CHILD_ENV, &path_s)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut out = BufReader::new(c.stdout.take().ok_or("no stdout")?);
        let mut ready = String::new();
        out.read_line(&mut ready)?;
        if ready.trim() != "ready" {
            return Err(format!("child said {ready:?} instead of ready").into());
        }
        children.push((c, out));
    }
    // Start every process at once: children on "go", this one right after. Each
    // process then holds its first batch until all three do, so the processes overlap
    // whatever the scheduler does; then every one drains the rest.
    let mut stdins = Vec::new();
    for (c, _) in &mut children {
        let mut stdin = c.stdin.take().ok_or("no stdin")?;
        writeln!(stdin, "go")?;
        stdins.push(stdin);
    }
    let mut handshake: std::result::Result<(), String> = Ok(());
    let hold = || {
        handshake = (|| {
            for (n, (_, out)) in children.iter_mut().enumerate() {
                let mut line = String::new();
                out.read_line(&mut line).map_err(|e| e.to_string())?;
                if line.trim() != "holding" {
                    return Err(format!("child {n} said {line:?} instead of holding"));
                }
            }
            for stdin in &mut stdins {
                writeln!(stdin, "continue").map_err(|e| e.to_string())?;
            }
            Ok(())
        })();
    };
    let parent_lines = rt.block_on(drain(&store, "parent", hold));
    handshake?;
    let mut readers = Vec::new();
    for (mut c, out) in children {
        readers.push(std::thread::spawn(move || {
            let lines: Vec<String> = out.lines().map(|l| l.unwrap()).collect();
            (c.wait().unwrap(), lines)
        }));
    }
    drop(stdins);
    let mut told: Vec<(String, Vec<String>)> = vec![("parent".into(), parent_lines)];
    for (n, r) in readers.into_iter().enumerate() {
        let (status, lines) = r.join().map_err(|_| "reader thread panicked")?;
        if !status.success() {
            return Err(format!("child {n} exited with {status}").into());
        }
        if lines.last().map(String::as_str) != Some("done") {
            return Err(format!("child {n} did not finish: {:?}", lines.last()).into());
        }
        told.push((format!("child-{n}"), lines));
    }

    // What each process was told.
    let mut claims: HashMap<String, Vec<String>> = HashMap::new();
    let mut completions: HashMap<String, Vec<String>> = HashMap::new();
    let mut per_process: Vec<(String, usize)> = Vec::new();
    for (who, lines) in &told {
        let mut mine = 0;
        for l in lines {
            let parts: Vec<&str> = l.split(' ').collect();
            match parts.as_slice() {
                ["claimed", id, attempt] => {
                    if *attempt != "1" {
                        return Err(format!("{who} claimed {id} at attempt {attempt}").into());
                    }
                    claims.entry(id.to_string()).or_default().push(who.clone());
                    mine += 1;
                }
                ["completed", id, outcome] => {
                    if *outcome != "accepted" {
                        return Err(format!("{who} was told {outcome} completing {id}").into());
                    }
                    completions
                        .entry(id.to_string())
                        .or_default()
                        .push(who.clone());
                }
                ["done"] => {}
                _ => return Err(format!("{who} printed {l:?}").into()),
            }
        }
        per_process.push((who.clone(), mine));
    }
    // The handshake made every process hold a batch at once.
    if per_process.iter().any(|(_, n)| *n == 0) {
        return Err(
            format!("the processes did not overlap: claims per process {per_process:?}").into(),
        );
    }
    for id in &ids {
        let key = id.to_string();
        match claims.get(&key).map(Vec::as_slice) {
            Some([_]) => {}
            other => return Err(format!("item {key} claimed by {other:?}").into()),
        }
        match completions.get(&key).map(Vec::as_slice) {
            Some([_]) => {}
            other => return Err(format!("item {key} completed by {other:?}").into()),
        }
    }
    if claims.len() != ids.len() {
        return Err(format!("{} ids claimed for {} items", claims.len(), ids.len()).into());
    }
    let counts = rt.block_on(store.queue_counts(&queue()))?;
    if counts.done != u64::from(ITEMS) || counts.pending() != 0 || counts.dead != 0 {
        return Err(format!("store ended with {counts:?}").into());
    }
    Ok(())
}

fn main() -> ExitCode {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        return child(&path);
    }
    let args = Arguments::from_args();
    let trials = vec![Trial::test(
        "g01_exclusive_claim::three_processes_claiming_from_one_file_claim_and_complete_each_item_once",
        parent,
    )];
    libtest_mimic::run(&args, trials).exit_code()
}
