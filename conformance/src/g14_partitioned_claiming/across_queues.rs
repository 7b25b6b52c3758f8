//! G14 across queues: a stream's pin is the stream's, so it holds in every queue the
//! stream has items in.

use tenure_core::{ItemId, TokenOutcome};

use crate::case::{CaseResult, Env};
use crate::check::{ensure, ensure_eq, pass};
use crate::fixtures::{complete, enqueue, item, queue};
use crate::harness::Harness;

use super::shares::{beat, id_set, in_share, pclaim, stream_where, three_instances};

pub(super) async fn a_streams_pin_holds_in_every_queue_of_the_stream<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (qa, qb) = (queue("g14-a")?, queue("g14-b")?);
    let (a, b, c) = three_instances()?;
    beat(env.store(), &a).await?;
    beat(env.store(), &b).await?;
    // A stream that is b's while a and b are registered, and not b's once c joins.
    let s = stream_where("spans", |s| {
        let id = ItemId::new();
        in_share(Some(s), id, &b, &[&a, &b]) && !in_share(Some(s), id, &b, &[&a, &b, &c])
    })?;
    let ids = enqueue(
        env.store(),
        vec![item(&qa).stream(s.clone()), item(&qb).stream(s.clone())],
    )
    .await?;
    let head = pclaim(env.store(), &qa, &b, 10).await?;
    ensure_eq(
        id_set(&head),
        [ids[0]].into_iter().collect(),
        "instance-b's claim from queue a: the stream's head, which pins the stream to it",
    )?;
    for who in [&a, &b] {
        let took = pclaim(env.store(), &qb, who, 10).await?;
        ensure(
            took.is_empty(),
            format!("{who} to take nothing from queue b while the stream's head runs in queue a"),
            id_set(&took),
        )?;
    }
    ensure_eq(
        complete(env.store(), head[0].token).await?,
        TokenOutcome::Accepted,
        "the complete of the head",
    )?;
    // c joins: by partition the stream would now go elsewhere, but it is pinned to b,
    // in queue b as in queue a.
    beat(env.store(), &c).await?;
    for other in [&a, &c] {
        let took = pclaim(env.store(), &qb, other, 10).await?;
        ensure(
            took.is_empty(),
            format!("{other} to take nothing from queue b of a stream pinned to instance-b"),
            id_set(&took),
        )?;
    }
    let got = pclaim(env.store(), &qb, &b, 10).await?;
    ensure_eq(
        id_set(&got),
        [ids[1]].into_iter().collect(),
        "instance-b's claim from queue b: the pinned stream's next item",
    )?;
    pass()
}
