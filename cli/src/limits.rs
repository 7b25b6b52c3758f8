//! `tenure limits list | set | clear`: a queue's concurrency and rate limits (G16,
//! G17) and fair-share weights (G18), read and changed at run time.

use clap::{Args, Subcommand};
use serde_json::{json, Map, Value};
use tenure::{FairnessKey, LimitKey, LimitsParams, QueueLimits, QueueName, Rate};

use crate::control::parse_age;
use crate::error::CliError;
use crate::output::{print_json, span, Table, Target};

/// The subcommands of `tenure limits`.
#[derive(Debug, Subcommand)]
pub(crate) enum LimitsCommand {
    /// Every queue with limits, and its limits.
    List(ListArgs),
    /// Replace a queue's limits (lowering one preempts nothing: it stops new claims).
    Set(SetArgs),
    /// Remove a queue's limits, its rate history and its deferrals.
    Clear(ClearArgs),
}

impl LimitsCommand {
    /// Whether errors are to be printed as JSON.
    pub(crate) fn json(&self) -> bool {
        match self {
            LimitsCommand::List(a) => a.target.json,
            LimitsCommand::Set(a) => a.target.json,
            LimitsCommand::Clear(a) => a.target.json,
        }
    }
}

/// The options of `tenure limits list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) target: Target,
}

/// The options of `tenure limits set`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tenure limits set sqlite://work.db mail --per-key 5 --rate 100/1m\n  \
    tenure limits set sqlite://work.db mail --concurrency 50 --key-override big=20 \
    --key-rate 10/1s --weight big=3\n\n\
    Every option left out means no such limit: `set` replaces the queue's limits whole.")]
pub(crate) struct SetArgs {
    #[command(flatten)]
    pub(crate) target: Target,

    /// The queue.
    pub(crate) queue: String,

    /// Most running items in the queue.
    #[arg(long, value_name = "N")]
    pub(crate) concurrency: Option<u32>,

    /// Most running items per limit key.
    #[arg(long, value_name = "N")]
    pub(crate) per_key: Option<u32>,

    /// Most running items of one key, over --per-key (repeat for several).
    #[arg(long, value_name = "KEY=N", value_parser = parse_pair)]
    pub(crate) key_override: Vec<(String, u32)>,

    /// Most claims per period in the queue: 100/1m, 5/1s.
    #[arg(long, value_name = "R/PERIOD", value_parser = parse_rate)]
    pub(crate) rate: Option<Rate>,

    /// Most claims per period per limit key.
    #[arg(long, value_name = "R/PERIOD", value_parser = parse_rate)]
    pub(crate) key_rate: Option<Rate>,

    /// A tenant's fair-share weight (repeat for several).
    #[arg(long, value_name = "TENANT=W", value_parser = parse_pair)]
    pub(crate) weight: Vec<(String, u32)>,
}

/// The options of `tenure limits clear`.
#[derive(Debug, Args)]
pub(crate) struct ClearArgs {
    #[command(flatten)]
    pub(crate) target: Target,

    /// The queue.
    pub(crate) queue: String,
}

/// `KEY=N`.
fn parse_pair(s: &str) -> Result<(String, u32), String> {
    let (k, n) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("{s:?} is not KEY=N"))?;
    let n: u32 = n
        .parse()
        .map_err(|_| format!("{s:?}: {n:?} is not a whole number"))?;
    Ok((k.to_owned(), n))
}

/// `R/PERIOD`, such as `100/1m`.
fn parse_rate(s: &str) -> Result<Rate, String> {
    let (r, per) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} is not R/PERIOD, such as 100/1m"))?;
    let r: u32 = r
        .parse()
        .map_err(|_| format!("{s:?}: {r:?} is not a whole number"))?;
    Ok(Rate::new(r, parse_age(per)?))
}

fn rate_json(rate: Option<Rate>) -> Value {
    match rate {
        Some(r) => json!({ "starts": r.starts, "per_secs": r.per.as_secs_f64() }),
        None => Value::Null,
    }
}

/// One queue's limits as JSON.
fn limits_json(queue: &QueueName, l: &QueueLimits) -> Value {
    let overrides: Map<String, Value> = l
        .key_overrides
        .iter()
        .map(|(k, n)| (k.to_string(), json!(n)))
        .collect();
    let weights: Map<String, Value> = l
        .weights
        .iter()
        .map(|(k, w)| (k.to_string(), json!(w)))
        .collect();
    json!({
        "queue": queue.as_str(),
        "concurrency": l.concurrency,
        "key_concurrency": l.key_concurrency,
        "key_overrides": overrides,
        "rate": rate_json(l.rate),
        "key_rate": rate_json(l.key_rate),
        "weights": weights,
    })
}

fn rate_text(rate: Option<Rate>) -> String {
    rate.map_or_else(
        || "-".to_owned(),
        |r| format!("{}/{}", r.starts, span(r.per)),
    )
}

fn pairs<K: std::fmt::Display>(m: &std::collections::BTreeMap<K, u32>) -> String {
    if m.is_empty() {
        return "-".to_owned();
    }
    m.iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn table(all: &[(QueueName, QueueLimits)]) -> String {
    let mut t = Table::new(&[
        "QUEUE",
        "CONCURRENCY",
        "PER KEY",
        "OVERRIDES",
        "RATE",
        "KEY RATE",
        "WEIGHTS",
    ]);
    let opt = |n: Option<u32>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    for (q, l) in all {
        t.row(vec![
            q.to_string(),
            opt(l.concurrency),
            opt(l.key_concurrency),
            pairs(&l.key_overrides),
            rate_text(l.rate),
            rate_text(l.key_rate),
            pairs(&l.weights),
        ]);
    }
    t.render("No queue has limits.")
}

/// Runs `tenure limits ...`.
pub(crate) async fn run(command: LimitsCommand) -> Result<(), CliError> {
    match command {
        LimitsCommand::List(args) => {
            let store = crate::connect::open(&args.target.url, false).await?;
            let all = store.limits_list().await?;
            if args.target.json {
                let queues: Vec<Value> = all.iter().map(|(q, l)| limits_json(q, l)).collect();
                print_json(&json!({ "queues": queues }));
            } else {
                print!("{}", table(&all));
            }
        }
        LimitsCommand::Set(args) => {
            let queue = QueueName::new(args.queue.clone())?;
            let mut limits = QueueLimits::new();
            limits.concurrency = args.concurrency;
            limits.key_concurrency = args.per_key;
            limits.rate = args.rate;
            limits.key_rate = args.key_rate;
            for (k, n) in &args.key_override {
                limits.key_overrides.insert(LimitKey::new(k.clone())?, *n);
            }
            for (k, w) in &args.weight {
                limits.weights.insert(FairnessKey::new(k.clone())?, *w);
            }
            limits.validate()?;
            let store = crate::connect::open(&args.target.url, false).await?;
            let before = store
                .limits_set(LimitsParams::new(queue.clone(), limits.clone()))
                .await?;
            if args.target.json {
                print_json(&json!({
                    "set": limits_json(&queue, &limits),
                    "before": before.as_ref().map(|b| limits_json(&queue, b)),
                }));
            } else {
                print!("{}", table(&[(queue.clone(), limits)]));
                println!("Set {queue}'s limits: claims that start from now obey them; what runs runs on.");
            }
        }
        LimitsCommand::Clear(args) => {
            let queue = QueueName::new(args.queue.clone())?;
            let store = crate::connect::open(&args.target.url, false).await?;
            let had = store.limits_clear(&queue).await?;
            if args.target.json {
                print_json(&json!({ "queue": queue.as_str(), "cleared": had }));
            } else if had {
                println!("Cleared {queue}'s limits.");
            } else {
                println!("{queue} had no limits.");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn rates_and_pairs_read_and_refuse_what_they_cannot() {
        let r = parse_rate("100/1m").unwrap();
        assert_eq!((r.starts, r.per), (100, Duration::from_secs(60)));
        assert!(parse_rate("100").is_err());
        assert!(parse_rate("x/1s").is_err());
        assert_eq!(parse_pair("big=20").unwrap(), ("big".to_owned(), 20));
        assert!(parse_pair("big").is_err());
    }
}
