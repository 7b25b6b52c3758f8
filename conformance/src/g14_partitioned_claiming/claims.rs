//! G14 claims: each registered instance takes the share its rank gives it, a stream
//! stays pinned to its first taker until that instance is evicted or deregisters, and
//! streams and scopes keep their rules in partitioned claims.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tenure_core::partition::Partitioning;
use tenure_core::{
    ClaimParams, DeregisterParams, ErrorKind, EvictParams, ItemId, Lease, NewItem, OwnerId,
    QueueName, ScopeKey, Store, StreamKey, TokenOutcome,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{
    ensure, ensure_eq, expect_invalid, expect_state, expect_unchanged, get, pass, OrFail,
};
use crate::fixtures::{
    claim_for, complete, enqueue, enqueue_n, item, owner, queue, scope, stream, LEASE,
};
use crate::harness::Harness;

use super::shares::{
    beat, id_in_share, id_set, in_share, partitioning, pclaim, stream_where, three_instances,
    with_stream,
};
/// One registered instance and one ready item: the queue, the instance, the item.
async fn one_instance_one_item<H: Harness>(
    env: &Env<'_, H>,
) -> Result<(QueueName, OwnerId, tenure_core::Item), Failure> {
    let q = queue("g14")?;
    let who = owner("instance-a")?;
    beat(env.store(), &who).await?;
    let [id] = enqueue_n(env.store(), &q, 1).await?[..] else {
        return Err(Failure::new("one id", "another count"));
    };
    Ok((q, who, get(env.store(), id).await?))
}

pub(super) async fn partitioned_claims_are_served_only_by_stores_that_declare_them<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let declared = env.store().capabilities().partitioned_claiming;
    let (q, who, before) = one_instance_one_item(&env).await?;
    let id = before.id;
    let answer = env
        .store()
        .claim(ClaimParams::new(q.clone(), who, 1, LEASE).partitioned(partitioning()))
        .await;
    match (&answer, declared) {
        (Ok(leases), true) if leases.len() == 1 && leases[0].token.id == id => pass(),
        (Err(e), false) if e.kind() == ErrorKind::Unsupported => {
            expect_unchanged(env.store(), &before, "a refused partitioned claim").await?;
            pass()
        }
        (other, true) => Err(Failure::new(
            "a store declaring partitioned_claiming to let its only registered instance \
             claim the one item",
            format!("{other:?}"),
        )),
        (other, false) => Err(Failure::new(
            "a store not declaring partitioned_claiming to answer Err(Unsupported) to a \
             partitioned claim, claiming nothing",
            format!("{other:?}"),
        )),
    }
}

pub(super) async fn each_instance_takes_exactly_the_share_its_rank_gives_it<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g14")?;
    let (a, b, c) = three_instances()?;
    // Registered out of rank order: the rank is by id, not by registration.
    for who in [&c, &a, &b] {
        beat(env.store(), who).await?;
    }
    let all: Vec<ItemId> = enqueue_n(env.store(), &q, 60).await?;
    let instances = [&a, &b, &c];
    let mut taken = BTreeSet::new();
    for who in instances {
        let got = id_set(&pclaim(env.store(), &q, who, 100).await?);
        let expected: BTreeSet<ItemId> = all
            .iter()
            .copied()
            .filter(|id| in_share(None, *id, who, &instances))
            .collect();
        ensure_eq(got.clone(), expected, &format!("the items {who} claimed"))?;
        taken.extend(got);
    }
    ensure_eq(
        taken.len(),
        all.len(),
        "the items the three instances claimed together",
    )?;
    pass()
}

pub(super) async fn an_unregistered_owner_is_refused_and_nothing_changes<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g14")?;
    let (member, ghost) = (owner("instance-member")?, owner("instance-ghost")?);
    beat(env.store(), &member).await?;
    let ids = enqueue_n(env.store(), &q, 2).await?;
    // One expired lease, which a claim would recover first.
    let held = claim_for(env.store(), &q, &member, 1, LEASE).await?;
    env.advance(LEASE + Duration::from_secs(1));
    let mut before = Vec::new();
    for id in &ids {
        before.push(get(env.store(), *id).await?);
    }
    let answer = env
        .store()
        .claim(ClaimParams::new(q.clone(), ghost.clone(), 10, LEASE).partitioned(partitioning()))
        .await;
    match &answer {
        Err(tenure_core::Error::NotFound {
            what: "instance", ..
        }) => {}
        other => {
            return Err(Failure::new(
                "a partitioned claim by an unregistered owner to answer \
                 Err(NotFound { what: \"instance\" })",
                format!("{other:?}"),
            ))
        }
    }
    for item in &before {
        expect_unchanged(env.store(), item, "a refused partitioned claim").await?;
    }
    // The only registered instance takes everything, the expired lease included.
    let got = pclaim(env.store(), &q, &member, 10).await?;
    ensure_eq(
        id_set(&got),
        ids.iter().copied().collect(),
        "the items the only instance claimed",
    )?;
    let again = got.iter().find(|l| l.token.id == held[0].token.id);
    ensure(
        again.is_some_and(|l| l.token.attempt == 2),
        "the expired item reclaimed at attempt 2",
        again.map(|l| l.token),
    )?;
    pass()
}

pub(super) async fn zero_partitions_are_refused_naming_the_field<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (q, who, before) = one_instance_one_item(&env).await?;
    let answer = env
        .store()
        .claim(ClaimParams::new(q.clone(), who, 1, LEASE).partitioned(Partitioning::new(0)))
        .await;
    expect_invalid(answer, "partitions", "claim with 0 partitions")?;
    expect_unchanged(env.store(), &before, "a refused claim").await?;
    pass()
}

pub(super) async fn a_stream_goes_by_partition_then_stays_pinned_when_instances_join<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g14")?;
    let (a, b, c) = three_instances()?;
    beat(env.store(), &a).await?;
    beat(env.store(), &b).await?;
    // A stream that is b's while a and b are registered, and not b's once c joins.
    let s = stream_where("pinned", |s| {
        let id = ItemId::new();
        in_share(Some(s), id, &b, &[&a, &b]) && !in_share(Some(s), id, &b, &[&a, &b, &c])
    })?;
    let first = enqueue(env.store(), vec![with_stream(&q, &s), with_stream(&q, &s)]).await?;
    ensure(
        pclaim(env.store(), &q, &a, 10).await?.is_empty(),
        "instance-a to take nothing of a stream in instance-b's share",
        "leases",
    )?;
    let got = pclaim(env.store(), &q, &b, 10).await?;
    ensure_eq(
        id_set(&got),
        [first[0]].into_iter().collect(),
        "instance-b's claim: the stream's head only (G9)",
    )?;
    ensure_eq(
        complete(env.store(), got[0].token).await?,
        TokenOutcome::Accepted,
        "complete of the head",
    )?;
    // c joins: by partition the stream would now go elsewhere, but it is pinned to b.
    beat(env.store(), &c).await?;
    for other in [&a, &c] {
        let took = pclaim(env.store(), &q, other, 10).await?;
        ensure(
            took.is_empty(),
            format!("{other} to take nothing of a stream pinned to instance-b"),
            id_set(&took),
        )?;
    }
    let got = pclaim(env.store(), &q, &b, 10).await?;
    ensure_eq(
        id_set(&got),
        [first[1]].into_iter().collect(),
        "instance-b's claim once instance-c joined: the pinned stream's next item",
    )?;
    pass()
}

pub(super) async fn eviction_unpins_the_evicted_instances_streams<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g14")?;
    let (a, b, c) = three_instances()?;
    let s = pin_to_b_then_check_takers(&env, &q, &a, &b, &c).await?;
    // b goes silent; a and c keep beating; b is evicted, its lease released.
    env.advance(Duration::from_secs(31));
    beat(env.store(), &a).await?;
    beat(env.store(), &c).await?;
    let evicted = env
        .store()
        .instance_evict_stale(EvictParams::new(Duration::from_secs(30)))
        .await
        .or_fail("instance_evict_stale")?;
    ensure_eq(evicted.instances, vec![b.clone()], "the instances evicted")?;
    after_leaving(&env, &q, &s, &a, &c).await
}

pub(super) async fn deregistration_unpins_the_instances_streams<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g14")?;
    let (a, b, c) = three_instances()?;
    let s = pin_to_b_then_check_takers(&env, &q, &a, &b, &c).await?;
    let gone = env
        .store()
        .instance_deregister(DeregisterParams::new(b.clone()))
        .await
        .or_fail("instance_deregister")?;
    ensure_eq(gone.instances, vec![b.clone()], "the instances removed")?;
    after_leaving(&env, &q, &s, &a, &c).await
}

/// Registers a, b and c; pins a stream to b by a partitioned claim of its head (b
/// keeps holding it), where the stream is b's by partition among a, b and c, and c's
/// among a and c. Returns the stream.
async fn pin_to_b_then_check_takers<H: Harness>(
    env: &Env<'_, H>,
    q: &QueueName,
    a: &OwnerId,
    b: &OwnerId,
    c: &OwnerId,
) -> Result<StreamKey, Failure> {
    for who in [a, b, c] {
        beat(env.store(), who).await?;
    }
    let s = stream_where("unpin", |s| {
        let id = ItemId::new();
        in_share(Some(s), id, b, &[a, b, c]) && in_share(Some(s), id, c, &[a, c])
    })?;
    let ids = enqueue(env.store(), vec![with_stream(q, &s), with_stream(q, &s)]).await?;
    let got = pclaim(env.store(), q, b, 10).await?;
    ensure_eq(
        ids_of_vec(&got),
        vec![ids[0]],
        "instance-b's claim: the head of the stream in its share",
    )?;
    Ok(s)
}

fn ids_of_vec(leases: &[Lease]) -> Vec<ItemId> {
    leases.iter().map(|l| l.token.id).collect()
}

/// After b left the registry (its held head released): the stream goes by partition
/// among a and c, so c takes its head and a takes nothing.
async fn after_leaving<H: Harness>(
    env: &Env<'_, H>,
    q: &QueueName,
    s: &StreamKey,
    a: &OwnerId,
    c: &OwnerId,
) -> CaseResult {
    let took = pclaim(env.store(), q, a, 10).await?;
    ensure(
        took.is_empty(),
        format!("{a} to take nothing of stream {s}, which is {c}'s by partition now"),
        id_set(&took),
    )?;
    let got = pclaim(env.store(), q, c, 10).await?;
    ensure(
        got.len() == 1 && got[0].item.stream.as_ref() == Some(s) && got[0].token.attempt == 2,
        format!("{c} to take the released head of stream {s} (attempt 2)"),
        got.iter().map(|l| l.token).collect::<Vec<_>>(),
    )?;
    pass()
}

pub(super) async fn streams_and_scopes_keep_their_rules_in_partitioned_claims<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g14")?;
    let (a, b) = (owner("instance-a")?, owner("instance-b")?);
    beat(env.store(), &a).await?;
    beat(env.store(), &b).await?;
    let both = [&a, &b];
    // Three items of one scope, all in instance-a's share: one of them per claim,
    // while one runs (G10).
    let sc: ScopeKey = scope("g14-scope")?;
    let scoped: Vec<NewItem> = (0..3)
        .map(|_| item(&q).scope(sc.clone()).with_id(id_in_share(&a, &both)))
        .collect();
    let scoped_ids = enqueue(env.store(), scoped).await?;
    // A stream in a's share with two items: only its head is claimable (G9).
    let s = stream_where("rules", |s| in_share(Some(s), ItemId::new(), &a, &both))?;
    let streamed = enqueue(env.store(), vec![with_stream(&q, &s), with_stream(&q, &s)]).await?;
    let got = pclaim(env.store(), &q, &a, 10).await?;
    ensure_eq(
        id_set(&got),
        [scoped_ids[0], streamed[0]].into_iter().collect(),
        "instance-a's first claim: the scope's first item and the stream's head",
    )?;
    ensure(
        pclaim(env.store(), &q, &b, 10).await?.is_empty(),
        "instance-b to take nothing: all of it is instance-a's share",
        "leases",
    )?;
    for l in &got {
        ensure_eq(
            complete(env.store(), l.token).await?,
            TokenOutcome::Accepted,
            "complete",
        )?;
    }
    let got = pclaim(env.store(), &q, &a, 10).await?;
    ensure_eq(
        id_set(&got),
        [scoped_ids[1], streamed[1]].into_iter().collect(),
        "instance-a's second claim: the scope's next item and the stream's next item",
    )?;
    pass()
}

pub(super) async fn a_free_scopes_item_in_the_share_is_taken_behind_one_outside_it<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g14")?;
    let (a, b) = (owner("instance-a")?, owner("instance-b")?);
    beat(env.store(), &a).await?;
    beat(env.store(), &b).await?;
    let both = [&a, &b];
    let sc = scope("g14-shared-scope")?;
    // The scope's first item is instance-b's share, its second instance-a's.
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).scope(sc.clone()).with_id(id_in_share(&b, &both)),
            item(&q).scope(sc.clone()).with_id(id_in_share(&a, &both)),
        ],
    )
    .await?;
    let got = pclaim(env.store(), &q, &a, 10).await?;
    ensure_eq(
        ids_of_vec(&got),
        vec![ids[1]],
        "instance-a's claim: its item of the free scope, behind instance-b's",
    )?;
    // Now the scope is busy: instance-b's item waits for it (G10).
    let took = pclaim(env.store(), &q, &b, 10).await?;
    ensure(
        took.is_empty(),
        "instance-b to take nothing while the scope runs an item",
        id_set(&took),
    )?;
    ensure_eq(
        complete(env.store(), got[0].token).await?,
        TokenOutcome::Accepted,
        "complete",
    )?;
    let got = pclaim(env.store(), &q, &b, 10).await?;
    ensure_eq(
        ids_of_vec(&got),
        vec![ids[0]],
        "instance-b's claim once the scope is free",
    )?;
    pass()
}

pub(super) async fn claims_without_partitioning_ignore_shares_and_pins<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g14")?;
    let (a, b) = (owner("instance-a")?, owner("instance-b")?);
    beat(env.store(), &a).await?;
    beat(env.store(), &b).await?;
    let s = stream_where("plain", |s| in_share(Some(s), ItemId::new(), &b, &[&a, &b]))?;
    let ids = enqueue(env.store(), vec![with_stream(&q, &s), with_stream(&q, &s)]).await?;
    let head = pclaim(env.store(), &q, &b, 10).await?;
    ensure_eq(
        ids_of_vec(&head),
        vec![ids[0]],
        "instance-b's partitioned claim",
    )?;
    ensure_eq(
        complete(env.store(), head[0].token).await?,
        TokenOutcome::Accepted,
        "complete of the head",
    )?;
    // The stream is pinned to b, yet an ordinary claim by a takes its next item.
    let got = claim_for(env.store(), &q, &a, 10, LEASE).await?;
    ensure_eq(
        ids_of_vec(&got),
        vec![ids[1]],
        "instance-a's ordinary claim: partitions and pins do not apply",
    )?;
    expect_state(
        env.store(),
        ids[1],
        tenure_core::ItemState::Running,
        "after the claim",
    )
    .await?;
    pass()
}

pub(super) async fn racing_instances_take_disjoint_shares_and_keep_each_stream_on_one_instance<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g14-race")?;
    let handles = env.handles(4).await?;
    let instances: Vec<OwnerId> = (0..4)
        .map(|i| owner(&format!("instance-{i}")))
        .collect::<Result<_, _>>()?;
    for who in &instances {
        beat(env.store(), who).await?;
    }
    // 20 streams of 5 items and 100 items without a stream.
    let mut items = Vec::new();
    for _round in 0..5 {
        for s in 0..20 {
            items.push(with_stream(&q, &stream(&format!("race-{s}"))?));
        }
    }
    items.extend((0..100).map(|_| item(&q)));
    let streams: HashMap<ItemId, Option<StreamKey>> =
        items.iter().map(|i| (i.id, i.stream.clone())).collect();
    let total = items.len();
    enqueue(env.store(), items).await?;
    let mut tasks = tokio::task::JoinSet::new();
    for (store, who) in handles.into_iter().zip(instances.clone()) {
        let q = q.clone();
        tasks.spawn(async move {
            let mut taken: Vec<(ItemId, u32)> = Vec::new();
            loop {
                let leases = pclaim(&*store, &q, &who, 5).await?;
                if leases.is_empty() {
                    // Every item of this instance's share is claimable by it alone and
                    // it finishes each batch before the next claim: empty means done.
                    return Ok::<_, Failure>((who, taken));
                }
                let tokens: Vec<_> = leases.iter().map(|l| l.token).collect();
                let told = store
                    .complete(tenure_core::CompleteParams::new(tokens.clone()))
                    .await
                    .or_fail("complete")?;
                ensure(
                    told.iter().all(|t| *t == TokenOutcome::Accepted),
                    "every complete of a just-claimed batch accepted",
                    &told,
                )?;
                taken.extend(tokens.iter().map(|t| (t.id, t.attempt)));
                tokio::task::yield_now().await;
            }
        });
    }
    let mut by_item: HashMap<ItemId, Vec<OwnerId>> = HashMap::new();
    while let Some(joined) = tasks.join_next().await {
        let (who, taken) = joined
            .map_err(|e| Failure::new("every racing instance to finish", e.to_string()))??;
        for (id, attempt) in taken {
            ensure_eq(attempt, 1, "the attempt of every claim")?;
            by_item.entry(id).or_default().push(who.clone());
        }
    }
    ensure_eq(
        by_item.len(),
        total,
        "items claimed by the racing instances",
    )?;
    let all: Vec<&OwnerId> = instances.iter().collect();
    let mut stream_owner: HashMap<StreamKey, OwnerId> = HashMap::new();
    for (id, takers) in &by_item {
        ensure_eq(takers.len(), 1, &format!("instances that claimed {id}"))?;
        let who = &takers[0];
        match &streams[id] {
            None => ensure(
                in_share(None, *id, who, &all),
                format!("unstreamed item {id} to be claimed by the instance whose share it is"),
                who,
            )?,
            Some(s) => {
                let first = stream_owner.entry(s.clone()).or_insert_with(|| who.clone());
                ensure_eq(&*first, who, &format!("the one instance of stream {s}"))?;
                ensure(
                    in_share(Some(s), *id, who, &all),
                    format!("stream {s} to be taken by the instance whose share it is"),
                    who,
                )?;
            }
        }
    }
    pass()
}
