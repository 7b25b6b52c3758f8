//! `tenure`: the command for operators of a Tenure deployment.
//!
//! One module per subcommand under `src/`; this file only parses the command line,
//! hands it over, and turns the outcome into an exit status (see [`error`]).
//!
//! - `status`: every queue's counts, oldest ready age and pause flag; the instances;
//!   the leader and its term ([`status`]).
//! - `items`, `leases`: one page of a queue's items by state, or of its live leases
//!   ([`items`]).
//! - `cancel`, `pause`, `resume`, `requeue`, `discard`: steer the work ([`control`]).
//! - `migrate`: apply the schema, or print it as SQL ([`migrate`]).
//! - `dashboard`: the web dashboard on its own ([`dashboard`]).
//! - `bench`: claim throughput and latency on the user's own database ([`mod@bench`]).
//!
//! Every store by URL, through `tenure::open`. Tables for people, `--json` for
//! scripts.

mod bench;
mod connect;
mod control;
mod dashboard;
mod error;
mod items;
mod limits;
mod migrate;
mod output;
mod status;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::json;

use crate::error::{exit, CliError, EXIT_CODES_HELP};

/// Operate a Tenure deployment: every unit of work has exactly one temporary owner.
#[derive(Debug, Parser)]
#[command(name = "tenure", version, about, long_about = None, after_help = EXIT_CODES_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Queues (counts, oldest ready age, paused), instances, and the leader with its
    /// term.
    Status(status::StatusArgs),
    /// One page of a queue's items in one state, with attempt, owner, lease and last
    /// error.
    Items(items::ItemsArgs),
    /// One page of a queue's live leases: owner, attempt, expiry, renewals used.
    Leases(items::LeasesArgs),
    /// Cancel ready or scheduled items by id (a running item is not cancelled).
    Cancel(control::CancelArgs),
    /// Pause a queue: its items are not claimed until it is resumed.
    Pause(control::QueueArgs),
    /// Resume a paused queue.
    Resume(control::QueueArgs),
    /// Put dead items back to ready, by id or by queue (and age).
    Requeue(control::RequeueArgs),
    /// Delete dead items for good, by id or by queue (and age).
    Discard(control::DiscardArgs),
    /// Queue limits: at most N running per queue and per key, R starts per period,
    /// fair-share weights (list, set, clear).
    #[command(subcommand)]
    Limits(limits::LimitsCommand),
    /// Create or upgrade the store's schema, or print it as SQL (--print).
    Migrate(migrate::MigrateArgs),
    /// Serve the web dashboard: queues, items, leases and actions in a browser
    /// (loopback only unless basic auth is set).
    Dashboard(dashboard::DashboardArgs),
    /// Measure claim throughput and latency on a store, through the worker or the
    /// store API, in data of its own that it removes afterwards.
    Bench(bench::BenchArgs),
}

impl Command {
    /// Whether errors are to be printed as JSON.
    fn json(&self) -> bool {
        match self {
            Command::Status(a) => a.target.json,
            Command::Items(a) => a.target.json,
            Command::Leases(a) => a.target.json,
            Command::Cancel(a) => a.target.json,
            Command::Pause(a) | Command::Resume(a) => a.target.json,
            Command::Requeue(a) => a.which.target.json,
            Command::Discard(a) => a.which.target.json,
            Command::Limits(c) => c.json(),
            Command::Migrate(a) => a.target.json,
            Command::Bench(a) => a.json,
            Command::Dashboard(_) => false,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.command.json();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tenure: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let outcome = runtime.block_on(async move {
        match cli.command {
            Command::Status(args) => status::run(args).await,
            Command::Items(args) => items::items(args).await,
            Command::Leases(args) => items::leases(args).await,
            Command::Cancel(args) => control::cancel(args).await,
            Command::Pause(args) => control::pause(args, true).await,
            Command::Resume(args) => control::pause(args, false).await,
            Command::Requeue(args) => control::requeue(args).await,
            Command::Discard(args) => control::discard(args).await,
            Command::Limits(command) => limits::run(command).await,
            Command::Migrate(args) => migrate::run(args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Dashboard(args) => dashboard::run(args).await,
        }
    });
    // Store handles close their pools as the runtime shuts down.
    drop(runtime);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(&e, json);
            ExitCode::from(e.exit_code())
        }
    }
}

fn report(e: &CliError, json: bool) {
    let hint = e.hint();
    if json {
        eprintln!(
            "{}",
            json!({ "error": {
                "kind": e.kind(),
                "message": e.to_string(),
                "hint": hint,
                "exit": e.exit_code(),
            }})
        );
    } else {
        eprintln!("tenure: {e}");
        if let Some(h) = hint {
            eprintln!("  hint: {h}");
        }
    }
}
