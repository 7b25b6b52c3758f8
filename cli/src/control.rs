//! `tenure cancel`, `pause`, `resume`, `requeue` and `discard`: steering the work
//! through the store's fenced operations.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use clap::{ArgGroup, Args};
use serde_json::{json, Value};
use tenure::{
    CancelOutcome, CancelParams, DeadFilter, DiscardParams, ItemId, PauseParams, QueueName,
    RequeueParams, DEFAULT_DEAD_BATCH, MAX_DEAD_BATCH,
};

use crate::error::{exit, CliError};
use crate::output::{print_json, Table, Target};

/// The options of `tenure cancel`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tenure cancel sqlite://work.db 01936f0e-8a4b-7c1d-9e2f-3a4b5c6d7e8f\n  \
    tenure items sqlite://work.db emails --state scheduled --json | jq -r '.items[].id' \
    | xargs tenure cancel sqlite://work.db\n  \
    tenure cancel sqlite://work.db --running --by alice 01936f0e-8a4b-7c1d-9e2f-3a4b5c6d7e8f\n\n\
    A ready or scheduled item is deleted; its dedup key stays, so enqueueing it again \
    is a duplicate. A running item is not cancelled (exit 5) unless --running is given: \
    then its lease is revoked (its handler is told at its next renewal, and its finish \
    is refused) and it goes dead with the error `cancelled by <by>`; requeue or discard \
    it as any dead item. Dead items are discarded, not cancelled.")]
pub(crate) struct CancelArgs {
    #[command(flatten)]
    pub(crate) target: Target,

    /// The items to cancel.
    #[arg(required = true, value_name = "ID")]
    pub(crate) ids: Vec<String>,

    /// Also stop running items: revoke their lease and make them dead.
    #[arg(long)]
    pub(crate) running: bool,

    /// Who cancels, recorded on stopped items (default: $USER, else `tenure-cli`).
    #[arg(long, value_name = "NAME", requires = "running")]
    pub(crate) by: Option<String>,
}

/// The operator a `--running` cancel names: `--by`, else `$USER`, else `tenure-cli`.
fn operator(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "tenure-cli".to_owned())
}

/// The options of `tenure pause` and `tenure resume`.
#[derive(Debug, Args)]
pub(crate) struct QueueArgs {
    #[command(flatten)]
    pub(crate) target: Target,

    /// The queue.
    pub(crate) queue: String,
}

/// Which dead items: by id, or by queue (and age).
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["ids", "queue"])))]
pub(crate) struct DeadArgs {
    #[command(flatten)]
    pub(crate) target: Target,

    /// These dead items (repeat the option for several).
    #[arg(long = "id", value_name = "ID", conflicts_with_all = ["queue", "older_than"])]
    pub(crate) ids: Vec<String>,

    /// Every dead item of this queue (with --older-than, those dead for longer).
    #[arg(long)]
    pub(crate) queue: Option<String>,

    /// Only items dead for longer than this: 30s, 15m, 6h, 7d.
    #[arg(long, value_name = "AGE", value_parser = parse_age, requires = "queue")]
    pub(crate) older_than: Option<Duration>,

    /// Items handled per store call; calls repeat until none are left.
    #[arg(long, default_value_t = DEFAULT_DEAD_BATCH, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_DEAD_BATCH)))]
    pub(crate) batch: u32,
}

/// The options of `tenure requeue`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tenure requeue sqlite://work.db --queue emails\n  \
    tenure requeue sqlite://work.db --queue emails --older-than 1h --attempts 3\n  \
    tenure requeue sqlite://work.db --id 01936f0e-8a4b-7c1d-9e2f-3a4b5c6d7e8f\n\n\
    A requeued item keeps its attempt count and gets --attempts more; ids that are \
    not dead are left alone and not counted.")]
pub(crate) struct RequeueArgs {
    #[command(flatten)]
    pub(crate) which: DeadArgs,

    /// Attempts granted on top of those already made.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) attempts: u32,
}

/// The options of `tenure discard`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tenure discard sqlite://work.db --queue emails --older-than 7d --yes\n  \
    tenure discard sqlite://work.db --id 01936f0e-8a4b-7c1d-9e2f-3a4b5c6d7e8f\n\n\
    Discarded items are deleted for good. By queue, --yes is required.")]
pub(crate) struct DiscardArgs {
    #[command(flatten)]
    pub(crate) which: DeadArgs,

    /// Confirms a discard by queue: its dead items are deleted for good.
    #[arg(long)]
    pub(crate) yes: bool,
}

pub(crate) async fn cancel(args: CancelArgs) -> Result<(), CliError> {
    let ids = parse_ids(&args.ids)?;
    let store = crate::connect::open(&args.target.url, false).await?;
    let by = args.running.then(|| operator(args.by));
    let mut outcomes = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(store.limits().max_batch.max(1)) {
        let mut params = CancelParams::new(chunk.to_vec());
        if let Some(by) = &by {
            params = params.stop_running(by.clone());
        }
        outcomes.extend(store.item_cancel(params).await?);
    }
    let mut code = exit::OK;
    let mut rows = Vec::with_capacity(ids.len());
    for (id, outcome) in ids.iter().zip(&outcomes) {
        let (name, text, status) = match outcome {
            CancelOutcome::Cancelled => ("cancelled", "cancelled".to_owned(), exit::OK),
            CancelOutcome::Running { attempt, owner } => (
                "running",
                format!(
                    "not cancelled: running (attempt {attempt}, owner {owner}); --running stops it"
                ),
                exit::CONFLICT,
            ),
            CancelOutcome::Stopped { attempt, owner } => (
                "stopped",
                format!("stopped: lease of attempt {attempt} (owner {owner}) revoked; now dead"),
                exit::OK,
            ),
            CancelOutcome::Dead => (
                "dead",
                "not cancelled: dead; use `tenure discard --id`".to_owned(),
                exit::CONFLICT,
            ),
            CancelOutcome::Done => (
                "done",
                "not cancelled: already finished".to_owned(),
                exit::CONFLICT,
            ),
            CancelOutcome::NotFound => ("not_found", "not found".to_owned(), exit::NOT_FOUND),
            #[allow(unreachable_patterns)]
            _ => ("unknown", "not cancelled".to_owned(), exit::FAILED),
        };
        // A conflict outranks a missing id: both mean "look at the report".
        if status != exit::OK && (code == exit::OK || status == exit::CONFLICT) {
            code = status;
        }
        let mut doc = json!({ "id": id.to_string(), "outcome": name });
        if let CancelOutcome::Running { attempt, owner }
        | CancelOutcome::Stopped { attempt, owner } = outcome
        {
            doc["attempt"] = json!(attempt);
            doc["owner"] = json!(owner.as_str());
        }
        rows.push((id, text, doc));
    }
    let cancelled = outcomes
        .iter()
        .filter(|o| matches!(o, CancelOutcome::Cancelled))
        .count();
    if args.target.json {
        let stopped = outcomes.iter().filter(|o| o.is_stopped()).count();
        print_json(&json!({
            "cancelled": cancelled,
            "stopped": stopped,
            "results": rows.iter().map(|(_, _, d)| d.clone()).collect::<Vec<Value>>(),
        }));
    } else {
        let mut t = Table::new(&["ID", "OUTCOME"]);
        for (id, text, _) in &rows {
            t.row(vec![id.to_string(), text.clone()]);
        }
        print!("{}", t.render(""));
    }
    if code == exit::OK {
        Ok(())
    } else {
        Err(CliError::Partial(
            format!(
                "{} of {} items not cancelled",
                ids.len() - cancelled,
                ids.len()
            ),
            code,
        ))
    }
}

pub(crate) async fn pause(args: QueueArgs, pause: bool) -> Result<(), CliError> {
    let queue = QueueName::new(args.queue.clone())?;
    let store = crate::connect::open(&args.target.url, false).await?;
    let params = PauseParams::new(queue.clone());
    let changed = if pause {
        store.queue_pause(params).await?
    } else {
        store.queue_resume(params).await?
    };
    if args.target.json {
        print_json(&json!({ "queue": queue.as_str(), "paused": pause, "changed": changed }));
    } else {
        let text = match (pause, changed) {
            (true, true) => format!("Paused {queue}: no worker claims its items until `tenure resume`; leases already held run on."),
            (true, false) => format!("{queue} was already paused."),
            (false, true) => format!("Resumed {queue}: its items are claimable again."),
            (false, false) => format!("{queue} was not paused."),
        };
        println!("{text}");
    }
    Ok(())
}

/// One `dead_requeue` or `dead_discard` call.
type DeadCall = Pin<Box<dyn Future<Output = tenure::Result<u64>> + Send>>;

/// Requeues (`requeue`) or discards dead items in batches until a call handles fewer
/// than a batch; answers how many.
async fn dead_loop(
    which: &DeadArgs,
    mut call: impl FnMut(Option<DeadFilter>, Vec<ItemId>) -> DeadCall,
) -> Result<(Option<QueueName>, u64), CliError> {
    if !which.ids.is_empty() {
        let ids = parse_ids(&which.ids)?;
        let n = call(None, ids).await?;
        return Ok((None, n));
    }
    let queue = QueueName::new(which.queue.clone().unwrap_or_default())?;
    let mut filter = DeadFilter::new(queue.clone()).limit(which.batch);
    if let Some(age) = which.older_than {
        filter = filter.older_than(age);
    }
    let mut total = 0u64;
    loop {
        let n = call(Some(filter.clone()), Vec::new()).await?;
        total += n;
        if n < u64::from(which.batch) {
            return Ok((Some(queue), total));
        }
    }
}

pub(crate) async fn requeue(args: RequeueArgs) -> Result<(), CliError> {
    let store = crate::connect::open(&args.which.target.url, false).await?;
    let attempts = args.attempts;
    let (queue, n) = dead_loop(&args.which, |filter, ids| {
        let store = store.clone();
        Box::pin(async move {
            let params = match filter {
                Some(f) => RequeueParams::matching(f),
                None => RequeueParams::new(ids),
            };
            store
                .dead_requeue(params.additional_attempts(attempts))
                .await
        })
    })
    .await?;
    report(&args.which, "requeued", queue.as_ref(), n);
    Ok(())
}

pub(crate) async fn discard(args: DiscardArgs) -> Result<(), CliError> {
    if args.which.queue.is_some() && !args.yes {
        return Err(CliError::Usage(
            "discarding by queue deletes its dead items for good: add --yes to confirm (see them first with `tenure items URL QUEUE --state dead`)".to_owned(),
        ));
    }
    let store = crate::connect::open(&args.which.target.url, false).await?;
    let (queue, n) = dead_loop(&args.which, |filter, ids| {
        let store = store.clone();
        Box::pin(async move {
            let params = match filter {
                Some(f) => DiscardParams::matching(f),
                None => DiscardParams::new(ids),
            };
            store.dead_discard(params).await
        })
    })
    .await?;
    report(&args.which, "discarded", queue.as_ref(), n);
    Ok(())
}

fn report(which: &DeadArgs, verb: &str, queue: Option<&QueueName>, n: u64) {
    if which.target.json {
        print_json(&json!({ verb: n, "queue": queue.map(QueueName::as_str) }));
        return;
    }
    let noun = if n == 1 { "item" } else { "items" };
    match queue {
        Some(q) => {
            let age = which
                .older_than
                .map(|d| format!(" dead for longer than {}", crate::output::span(d)))
                .unwrap_or_default();
            println!("{} {n} dead {noun} of queue {q}{age}.", capitalise(verb));
        }
        None => println!(
            "{} {n} of {} dead {noun} named (ids that are not dead are left alone).",
            capitalise(verb),
            which.ids.len()
        ),
    }
}

fn capitalise(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

fn parse_ids(ids: &[String]) -> Result<Vec<ItemId>, CliError> {
    ids.iter()
        .map(|s| {
            s.parse::<ItemId>().map_err(|_| {
                CliError::Usage(format!(
                    "{s:?} is not an item id (a UUID, as `tenure items` prints it)"
                ))
            })
        })
        .collect()
}

/// An age like `30s`, `15m`, `6h`, `7d`.
pub(crate) fn parse_age(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not an age like 30s, 15m, 6h or 7d"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3_600,
        "d" => n * 86_400,
        _ => return Err(format!("{s:?}: the unit must be s, m, h or d")),
    };
    if secs == 0 {
        return Err(format!("{s:?} must be more than zero"));
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_with_their_unit_and_refuse_others() {
        assert_eq!(parse_age("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_age("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert!(parse_age("0h").is_err());
        assert!(parse_age("5w").is_err());
        assert!(parse_age("soon").is_err());
    }
}
