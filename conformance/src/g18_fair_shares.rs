//! G18 Fair shares: under contention a claim serves a queue's tenants by weight, so a
//! tenant with one item beside one with a large backlog is served within a turn, busy
//! tenants get claims in the ratio of their weights, and a tenant that spreads its work
//! over many limit keys gains nothing. Optional: runs on stores that declare
//! [`Capabilities::fair_shares`](tenure_core::Capabilities::fair_shares).

use std::collections::HashMap;

use tenure_core::{FairnessKey, ItemId, NewItem, QueueLimits, QueueName, Store};

use crate::case::{register, Capability, Case, CaseResult, Env, Failure};
use crate::check::{ensure, pass, OrFail};
use crate::fixtures::{claim, enqueue, item, limit_key, owner, queue, set_limits};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g18_fair_shares";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP, Capability::FairShares;
        a_tenant_with_one_item_is_served_within_a_turn_beside_a_large_backlog,
        busy_tenants_are_served_in_the_ratio_of_their_weights_over_ten_thousand_claims,
        a_tenant_spreading_over_many_limit_keys_gains_nothing,
    ]
}

fn tenant(name: &str) -> Result<FairnessKey, Failure> {
    FairnessKey::new(name).or_fail("a fairness key")
}

/// Enqueues `items` in calls of at most 5 000.
async fn enqueue_all<S: Store + ?Sized>(
    store: &S,
    items: Vec<NewItem>,
) -> Result<Vec<ItemId>, Failure> {
    let mut ids = Vec::with_capacity(items.len());
    let mut rest = items;
    while !rest.is_empty() {
        let tail = rest.split_off(rest.len().min(5_000));
        ids.extend(enqueue(store, rest).await?);
        rest = tail;
    }
    Ok(ids)
}

/// Claims `n` items in batches of up to 500 and counts them per tenant (by id).
async fn served<S: Store + ?Sized>(
    store: &S,
    q: &QueueName,
    n: usize,
    of: &HashMap<ItemId, usize>,
) -> Result<Vec<usize>, Failure> {
    let mut counts = vec![0usize; of.values().max().map_or(0, |m| m + 1)];
    let mut left = n;
    let w = owner("w1")?;
    while left > 0 {
        let want = u32::try_from(left.min(500)).unwrap_or(500);
        let leases = claim(store, q, &w, want).await?;
        ensure(
            !leases.is_empty(),
            format!("{left} more claims to find items"),
            "an empty claim",
        )?;
        for l in &leases {
            if let Some(&t) = of.get(&l.token.id) {
                counts[t] += 1;
            }
        }
        left = left.saturating_sub(leases.len());
    }
    Ok(counts)
}

async fn a_tenant_with_one_item_is_served_within_a_turn_beside_a_large_backlog<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g18-starve")?;
    let big = tenant("big")?;
    enqueue_all(
        env.store(),
        (0..10_000)
            .map(|_| item(&q).fairness_key(big.clone()))
            .collect(),
    )
    .await?;
    let w = owner("w1")?;
    claim(env.store(), &q, &w, 5).await?;
    let small = enqueue(env.store(), vec![item(&q).fairness_key(tenant("small")?)]).await?;
    // Two tenants: the small one's item is among the next two claimed.
    let mut claimed = Vec::new();
    for _ in 0..2 {
        claimed.extend(claim(env.store(), &q, &w, 1).await?);
    }
    ensure(
        claimed.iter().any(|l| l.token.id == small[0]),
        "the small tenant's one item to be claimed within two claims of one beside 10 000 \
         items of another tenant",
        claimed.iter().map(|l| l.token.id).collect::<Vec<_>>(),
    )?;
    pass()
}

async fn busy_tenants_are_served_in_the_ratio_of_their_weights_over_ten_thousand_claims<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g18-ratio")?;
    let (a, b) = (tenant("a")?, tenant("b")?);
    set_limits(
        env.store(),
        &q,
        QueueLimits::new().weight(a.clone(), 1).weight(b.clone(), 3),
    )
    .await?;
    // Interleaved, so neither tenant is ahead at enqueue.
    let mut items = Vec::with_capacity(24_000);
    let mut who = Vec::with_capacity(24_000);
    for _ in 0..12_000 {
        items.push(item(&q).fairness_key(a.clone()));
        who.push(0);
        items.push(item(&q).fairness_key(b.clone()));
        who.push(1);
    }
    let ids = enqueue_all(env.store(), items).await?;
    let of: HashMap<ItemId, usize> = ids.into_iter().zip(who).collect();
    let counts = served(env.store(), &q, 10_000, &of).await?;
    let ratio = counts[1] as f64 / counts[0].max(1) as f64;
    ensure(
        (2.94..=3.06).contains(&ratio),
        "10 000 claims over tenants of weights 1 and 3 to serve them 1 : 3 within 2 % \
         (counts a, b)",
        &counts,
    )?;
    pass()
}

async fn a_tenant_spreading_over_many_limit_keys_gains_nothing<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g18-spread")?;
    let (a, b) = (tenant("a")?, tenant("b")?);
    let one = limit_key("b-only")?;
    let mut items = Vec::with_capacity(4_000);
    let mut who = Vec::with_capacity(4_000);
    for i in 0..2_000 {
        items.push(
            item(&q)
                .fairness_key(a.clone())
                .limit_key(limit_key(&format!("a-{}", i % 200))?),
        );
        who.push(0);
        items.push(item(&q).fairness_key(b.clone()).limit_key(one.clone()));
        who.push(1);
    }
    let ids = enqueue_all(env.store(), items).await?;
    let of: HashMap<ItemId, usize> = ids.into_iter().zip(who).collect();
    let counts = served(env.store(), &q, 2_000, &of).await?;
    let gap = counts[0].abs_diff(counts[1]);
    ensure(
        gap <= 20,
        "2 000 claims over two tenants of one weight, one spread over 200 limit keys, to \
         serve them alike within 1 % (counts a, b)",
        &counts,
    )?;
    pass()
}
