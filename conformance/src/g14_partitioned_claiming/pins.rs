//! G14 stream pinning at enqueue ([`EnqueueParams::pin_streams_to`]): a stream pinned to
//! nobody is pinned to the instance that enqueues its item (first write wins), instead
//! of to its first partitioned claimer.
//!
//! These cases belong to `g14_partitioned_claiming`. The first is mandatory (a store
//! that does not declare partitioned claiming must refuse the option, writing nothing);
//! the rest need [`Capability::PartitionedClaiming`].

use std::time::Duration;

use tenure_core::{
    EnqueueParams, ErrorKind, EvictParams, ItemId, NewItem, OwnerId, QueueName, Store, TokenOutcome,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_absent, pass, OrFail};
use crate::fixtures::{complete, owner, queue};
use crate::harness::Harness;

use super::shares::{beat, id_set, in_share, pclaim, stream_where, with_stream};

/// Enqueues `items` pinning their streams to `who`; the new ids.
async fn enqueue_pinned<S: Store + ?Sized>(
    store: &S,
    items: Vec<NewItem>,
    who: &OwnerId,
) -> Result<Vec<ItemId>, Failure> {
    let ids: Vec<ItemId> = items.iter().map(|i| i.id).collect();
    let answers = store
        .enqueue(EnqueueParams::new(items).pin_streams_to(who.clone()))
        .await
        .or_fail("enqueue (pinned)")?;
    ensure(
        answers
            .iter()
            .map(|a| (a.id, a.duplicate))
            .collect::<Vec<_>>()
            == ids.iter().map(|id| (*id, false)).collect::<Vec<_>>(),
        "a pinned enqueue of new items to answer each new id, in order",
        answers,
    )?;
    Ok(ids)
}

/// Two registered instances `a` and `b` and a stream that is `a`'s by partition.
async fn two_instances<H: Harness>(
    env: &Env<'_, H>,
) -> Result<(QueueName, OwnerId, OwnerId, tenure_core::StreamKey), Failure> {
    let q = queue("g14-pins")?;
    let (a, b) = (owner("instance-a")?, owner("instance-b")?);
    beat(env.store(), &a).await?;
    beat(env.store(), &b).await?;
    let s = stream_where("enqueue-pin", |s| {
        in_share(Some(s), ItemId::new(), &a, &[&a, &b])
    })?;
    Ok((q, a, b, s))
}

pub(super) async fn pinning_at_enqueue_is_served_only_by_stores_that_declare_partitioned_claiming<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let declared = env.store().capabilities().partitioned_claiming;
    let q = queue("g14-pins")?;
    let who = owner("instance-a")?;
    beat(env.store(), &who).await?;
    let new = with_stream(&q, &crate::fixtures::stream("s1")?);
    let id = new.id;
    let answer = env
        .store()
        .enqueue(EnqueueParams::one(new).pin_streams_to(who))
        .await;
    match (&answer, declared) {
        (Ok(a), true) if a.len() == 1 && a[0].id == id && !a[0].duplicate => pass(),
        (Err(e), false) if e.kind() == ErrorKind::Unsupported => {
            expect_absent(env.store(), id, "a refused pinned enqueue").await?;
            pass()
        }
        (other, true) => Err(Failure::new(
            "a store declaring partitioned_claiming to enqueue with a pin to a registered \
             instance",
            format!("{other:?}"),
        )),
        (other, false) => Err(Failure::new(
            "a store not declaring partitioned_claiming to answer Err(Unsupported) to a \
             pinned enqueue, writing nothing",
            format!("{other:?}"),
        )),
    }
}

pub(super) async fn a_stream_pinned_at_enqueue_goes_only_to_the_enqueuing_instance_first_pin_winning<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, a, b, s) = two_instances(&env).await?;
    // b enqueues first and wins the pin; a's later enqueue does not move it.
    let first = enqueue_pinned(env.store(), vec![with_stream(&q, &s)], &b).await?;
    let second = enqueue_pinned(env.store(), vec![with_stream(&q, &s)], &a).await?;
    let took = pclaim(env.store(), &q, &a, 10).await?;
    ensure(
        took.is_empty(),
        "instance-a to take nothing of a stream in its share that instance-b pinned at \
         enqueue, though instance-a enqueued to it later",
        id_set(&took),
    )?;
    let got = pclaim(env.store(), &q, &b, 10).await?;
    ensure_eq(
        id_set(&got),
        [first[0]].into_iter().collect(),
        "instance-b's claim: the head of the stream it pinned at enqueue",
    )?;
    ensure_eq(
        complete(env.store(), got[0].token).await?,
        TokenOutcome::Accepted,
        "complete of the head",
    )?;
    ensure(
        pclaim(env.store(), &q, &a, 10).await?.is_empty(),
        "instance-a to take nothing of the pinned stream's next item",
        "leases",
    )?;
    let got = pclaim(env.store(), &q, &b, 10).await?;
    ensure_eq(
        id_set(&got),
        [second[0]].into_iter().collect(),
        "instance-b's claim: the pinned stream's next item",
    )?;
    pass()
}

pub(super) async fn pinning_at_enqueue_to_an_unregistered_instance_is_refused_and_writes_nothing<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, _a, _b, s) = two_instances(&env).await?;
    let ghost = owner("instance-ghost")?;
    let items = vec![with_stream(&q, &s), with_stream(&q, &s)];
    let ids: Vec<ItemId> = items.iter().map(|i| i.id).collect();
    let answer = env
        .store()
        .enqueue(EnqueueParams::new(items).pin_streams_to(ghost))
        .await;
    match &answer {
        Err(tenure_core::Error::NotFound {
            what: "instance", ..
        }) => {}
        other => {
            return Err(Failure::new(
                "a pinned enqueue to an unregistered instance to answer \
                 Err(NotFound { what: \"instance\" })",
                format!("{other:?}"),
            ))
        }
    }
    for id in ids {
        expect_absent(env.store(), id, "a refused pinned enqueue").await?;
    }
    pass()
}

pub(super) async fn eviction_drops_a_pin_made_at_enqueue<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, a, b, s) = two_instances(&env).await?;
    let ids = enqueue_pinned(env.store(), vec![with_stream(&q, &s)], &b).await?;
    ensure(
        pclaim(env.store(), &q, &a, 10).await?.is_empty(),
        "instance-a to take nothing of a stream instance-b pinned at enqueue",
        "leases",
    )?;
    env.advance(Duration::from_secs(31));
    beat(env.store(), &a).await?;
    let evicted = env
        .store()
        .instance_evict_stale(EvictParams::new(Duration::from_secs(30)))
        .await
        .or_fail("instance_evict_stale")?;
    ensure_eq(evicted.instances, vec![b.clone()], "the instances evicted")?;
    let got = pclaim(env.store(), &q, &a, 10).await?;
    ensure_eq(
        id_set(&got),
        [ids[0]].into_iter().collect(),
        "instance-a's claim once instance-b was evicted: the stream goes by partition again",
    )?;
    pass()
}
