//! `tenure status <url>`: every queue's counts, the instances, and the leader.

use clap::Args;
use serde_json::{json, Value};
use tenure::runtime::DEFAULT_LEADER_NAME;
use tenure::{LeaderName, QueueName, Store};

use crate::error::CliError;
use crate::output::{self, print_json, relative, span, Table, Target};

/// The options of `tenure status`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tenure status sqlite://work.db\n  \
    tenure status 'postgres://app@db/prod?tenure_schema=jobs' --queue emails --json\n\n\
    Status only reads: it changes nothing in the store, the leader lease included \
    (an expired lease is shown as no leader).")]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub(crate) target: Target,

    /// Only this queue (repeat for several). Default: every queue the store knows.
    #[arg(long = "queue", value_name = "QUEUE")]
    pub(crate) queues: Vec<String>,

    /// The leader lease to report: the one the workers' maintenance uses.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_LEADER_NAME)]
    pub(crate) leader: String,
}

pub(crate) async fn run(args: StatusArgs) -> Result<(), CliError> {
    let leader_name = LeaderName::new(args.leader.clone())?;
    let wanted = args
        .queues
        .iter()
        .map(|q| QueueName::new(q.clone()))
        .collect::<tenure::Result<Vec<_>>>()?;
    let store = crate::connect::open(&args.target.url, false).await?;
    let queues = if wanted.is_empty() {
        store.queue_list().await?
    } else {
        wanted
    };
    let mut counts = Vec::with_capacity(queues.len());
    for q in &queues {
        counts.push((q.clone(), store.queue_counts(q).await?));
    }
    let instances = store.instance_list().await?;
    let leader = store.leader_get(&leader_name).await?;
    let now = output::now();

    if args.target.json {
        let queues: Vec<Value> = counts
            .iter()
            .map(|(q, c)| {
                json!({
                    "queue": q.as_str(),
                    "ready": c.ready,
                    "scheduled": c.scheduled,
                    "running": c.running,
                    "dead": c.dead,
                    "done": c.done,
                    "paused": c.paused,
                    "oldest_ready_age_s": c.oldest_ready_age.map(output::seconds),
                })
            })
            .collect();
        let instances: Vec<Value> = instances
            .iter()
            .map(|i| {
                json!({
                    "id": i.id.as_str(),
                    "started_at": output::iso(i.started_at),
                    "last_seen": output::iso(i.last_seen),
                })
            })
            .collect();
        let leader = match &leader {
            Some(l) => json!({
                "name": leader_name.as_str(),
                "holder": l.holder.as_str(),
                "term": l.term,
                "expires_at": output::iso(l.expires_at),
            }),
            None => json!({ "name": leader_name.as_str(), "holder": null, "term": null }),
        };
        print_json(&json!({
            "store": store.name(),
            "queues": queues,
            "instances": instances,
            "leader": leader,
        }));
        return Ok(());
    }

    let mut t = Table::new(&[
        "QUEUE",
        "READY",
        "SCHEDULED",
        "RUNNING",
        "DEAD",
        "DONE",
        "OLDEST READY",
        "PAUSED",
    ]);
    for (q, c) in &counts {
        t.row(vec![
            q.to_string(),
            c.ready.to_string(),
            c.scheduled.to_string(),
            c.running.to_string(),
            c.dead.to_string(),
            c.done.to_string(),
            c.oldest_ready_age.map_or("-".to_owned(), span),
            if c.paused { "paused" } else { "-" }.to_owned(),
        ]);
    }
    print!(
        "{}",
        t.render("No queues: nothing has been enqueued in this store.")
    );
    println!();
    let mut t = Table::new(&["INSTANCE", "STARTED", "LAST SEEN"]);
    for i in &instances {
        t.row(vec![
            i.id.to_string(),
            relative(i.started_at, now),
            relative(i.last_seen, now),
        ]);
    }
    print!("{}", t.render("No instances: no worker is registered."));
    println!();
    match leader {
        Some(l) => println!(
            "Leader ({leader_name}): {}, term {}, lease ends {}",
            l.holder,
            l.term,
            relative(l.expires_at, now)
        ),
        None => {
            println!("Leader ({leader_name}): none; no worker holds the maintenance lease")
        }
    }
    Ok(())
}
