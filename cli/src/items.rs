//! `tenure items` and `tenure leases`: one page of a queue's items or live leases.

use clap::Args;
use serde_json::{json, Value};
use tenure::{
    Cursor, Item, ItemListParams, LeaseListParams, ListOrder, ListState, QueueName, DEFAULT_PAGE,
    MAX_PAGE,
};

use crate::error::CliError;
use crate::output::{self, clip, print_json, relative, Table, Target};

/// The options of `tenure items`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tenure items sqlite://work.db emails --state dead\n  \
    tenure items sqlite://work.db emails --state scheduled --newest --limit 20\n  \
    tenure items sqlite://work.db emails --state dead --cursor CURSOR --json\n\n\
    A page that may have more ends with the command for the next one; with --json its \
    cursor is \"next_cursor\" (null on the last page).")]
pub(crate) struct ItemsArgs {
    #[command(flatten)]
    pub(crate) target: Target,

    /// The queue.
    pub(crate) queue: String,

    /// ready (due now), scheduled (ready but not yet due), running or dead.
    #[arg(long, default_value = "ready", value_parser = ["ready", "scheduled", "running", "dead"])]
    pub(crate) state: String,

    /// Newest first (default oldest first, in enqueue order).
    #[arg(long)]
    pub(crate) newest: bool,

    /// Most items on the page.
    #[arg(long, default_value_t = DEFAULT_PAGE, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PAGE)))]
    pub(crate) limit: u32,

    /// Continue after the page that printed this cursor (same queue, state and order).
    #[arg(long)]
    pub(crate) cursor: Option<String>,
}

/// The options of `tenure leases`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tenure leases sqlite://work.db emails\n  \
    tenure leases 'postgres://app@db/prod' emails --limit 50 --json\n\n\
    Soonest expiry first; an expired lease not yet recovered is shown as expired.")]
pub(crate) struct LeasesArgs {
    #[command(flatten)]
    pub(crate) target: Target,

    /// The queue.
    pub(crate) queue: String,

    /// Most leases on the page.
    #[arg(long, default_value_t = DEFAULT_PAGE, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PAGE)))]
    pub(crate) limit: u32,

    /// Continue after the page that printed this cursor.
    #[arg(long)]
    pub(crate) cursor: Option<String>,
}

pub(crate) async fn items(args: ItemsArgs) -> Result<(), CliError> {
    let queue = QueueName::new(args.queue.clone())?;
    let state: ListState = args.state.parse()?;
    let mut params = ItemListParams::new(queue.clone(), state).limit(args.limit);
    if args.newest {
        params = params.order(ListOrder::NewestFirst);
    }
    if let Some(c) = &args.cursor {
        params = params.after(Cursor::new(c.clone())?);
    }
    let store = crate::connect::open(&args.target.url, false).await?;
    let page = store.item_list(params).await?;
    if args.target.json {
        print_json(&json!({
            "queue": queue.as_str(),
            "state": state.as_str(),
            "order": if args.newest { "newest_first" } else { "oldest_first" },
            "as_of": output::iso(page.as_of),
            "items": page.items.iter().map(|i| item_json(i, state)).collect::<Vec<_>>(),
            "next_cursor": page.next.as_ref().map(Cursor::as_str),
        }));
        return Ok(());
    }
    let now = page.as_of;
    let mut t = Table::new(&[
        "ID",
        "ATTEMPT",
        "RUN AT",
        "OWNER",
        "LEASE ENDS",
        "PROGRESS",
        "STREAM",
        "LAST ERROR",
    ]);
    for i in &page.items {
        t.row(vec![
            i.id.to_string(),
            format!("{}/{}", i.attempt, i.max_attempts),
            relative(i.run_at, now),
            i.owner.as_ref().map_or("-".to_owned(), ToString::to_string),
            i.lease_expires_at
                .map_or("-".to_owned(), |t| relative(t, now)),
            current_progress(i).map_or("-".to_owned(), |p| clip(&p.to_string(), 40)),
            i.stream
                .as_ref()
                .map_or("-".to_owned(), |s| clip(s.as_str(), 24)),
            i.last_error
                .as_deref()
                .map_or("-".to_owned(), |e| clip(e, 60)),
        ]);
    }
    print!(
        "{}",
        t.render(&format!("No {state} items in queue {queue}."))
    );
    if let Some(next) = &page.next {
        let order = if args.newest { " --newest" } else { "" };
        println!(
            "\nMore: tenure items '{}' {queue} --state {state}{order} --limit {} --cursor {next}",
            args.target.url, args.limit
        );
    }
    Ok(())
}

pub(crate) async fn leases(args: LeasesArgs) -> Result<(), CliError> {
    let queue = QueueName::new(args.queue.clone())?;
    let mut params = LeaseListParams::new(queue.clone()).limit(args.limit);
    if let Some(c) = &args.cursor {
        params = params.after(Cursor::new(c.clone())?);
    }
    let store = crate::connect::open(&args.target.url, false).await?;
    let page = store.lease_list(params).await?;
    if args.target.json {
        let leases: Vec<Value> = page
            .leases
            .iter()
            .map(|l| {
                json!({
                    "id": l.token.id.to_string(),
                    "attempt": l.token.attempt,
                    "lease": l.token.lease.to_string(),
                    "queue": l.queue.as_str(),
                    "owner": l.owner.as_str(),
                    "expires_at": output::iso(l.expires_at),
                    "expired": l.expires_at <= page.as_of,
                    "renewals": l.renewals,
                    "max_renewals": l.max_renewals,
                })
            })
            .collect();
        print_json(&json!({
            "queue": queue.as_str(),
            "as_of": output::iso(page.as_of),
            "leases": leases,
            "next_cursor": page.next.as_ref().map(Cursor::as_str),
        }));
        return Ok(());
    }
    let now = page.as_of;
    let mut t = Table::new(&["ID", "ATTEMPT", "LEASE", "OWNER", "EXPIRES", "RENEWALS"]);
    for l in &page.leases {
        let expires = if l.expires_at <= now {
            format!("expired {}", relative(l.expires_at, now))
        } else {
            relative(l.expires_at, now)
        };
        t.row(vec![
            l.token.id.to_string(),
            l.token.attempt.to_string(),
            l.token.lease.to_string(),
            l.owner.to_string(),
            expires,
            format!("{}/{}", l.renewals, l.max_renewals),
        ]);
    }
    print!("{}", t.render(&format!("No leases in queue {queue}.")));
    if let Some(next) = &page.next {
        println!(
            "\nMore: tenure leases '{}' {queue} --limit {} --cursor {next}",
            args.target.url, args.limit
        );
    }
    Ok(())
}

/// The progress of the item's running attempt, if that attempt reported any (an
/// earlier attempt's progress is not this one's).
fn current_progress(i: &Item) -> Option<&tenure::Progress> {
    i.progress
        .as_ref()
        .filter(|p| i.state == tenure::ItemState::Running && p.attempt() == i.attempt)
}

/// One item for scripts: everything an operator reads, the payload as its size.
fn item_json(i: &Item, listed_as: ListState) -> Value {
    json!({
        "id": i.id.to_string(),
        "queue": i.queue.as_str(),
        "state": listed_as.as_str(),
        "attempt": i.attempt,
        "max_attempts": i.max_attempts,
        "stalls": i.stalls,
        "max_stalls": i.max_stalls,
        "renewals": i.renewals,
        "priority": i.priority,
        "run_at": output::iso(i.run_at),
        "created_at": output::iso(i.created_at),
        "updated_at": output::iso(i.updated_at),
        "owner": i.owner.as_ref().map(|o| o.as_str()),
        "lease_expires_at": output::iso_json(i.lease_expires_at),
        "stream": i.stream.as_ref().map(|s| s.as_str()),
        "scope": i.scope.as_ref().map(|s| s.as_str()),
        "dedup_key": i.dedup_key.as_ref().map(|k| k.as_str()),
        "last_error": i.last_error,
        "cancelled_by": tenure::machine::cancelled_by(i),
        "progress": i.progress.as_ref().map(|p| json!({
            "fraction": p.fraction(),
            "message": p.message(),
            "attempt": p.attempt(),
            "current": current_progress(i).is_some(),
        })),
        "payload_bytes": i.payload.len(),
    })
}
