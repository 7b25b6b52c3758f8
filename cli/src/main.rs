//! `tenure`: the command for operators of a Tenure deployment.
//!
//! One module per subcommand under `src/`; this file only parses the command line and
//! hands it over. Today: `tenure bench <url>` ([`mod@bench`]), which measures claim
//! throughput and latency on the user's own database, in a schema or file of its own
//! that it removes afterwards.

mod bench;
mod error;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Operate a Tenure deployment: every unit of work has exactly one temporary owner.
#[derive(Debug, Parser)]
#[command(name = "tenure", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure claim throughput and latency on a store, through the worker or the
    /// store API, in data of its own that it removes afterwards.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tenure: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match cli.command {
        Command::Bench(args) => runtime.block_on(bench::run(args)),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tenure: {e}");
            ExitCode::FAILURE
        }
    }
}
