//! G8 Order: claimable items go by priority (smaller first), then `run_at`, then
//! enqueue order.

use std::collections::HashSet;
use std::time::Duration;

use tenure_core::{ClaimParams, FailOutcome, ItemId, NewItem, QueueName, Store};

use crate::case::{register, Case, CaseResult, Env, Failure};
use crate::check::{ensure_eq, pass, OrFail};
use crate::fixtures::{
    check_leases, claim, claim_one, enqueue, fail, item, owner, queue, retry, LEASE,
};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g08_order";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        smaller_priority_goes_first,
        equal_priority_goes_by_run_at,
        equal_priority_and_run_at_go_by_enqueue_order,
        a_batch_claim_takes_the_first_items_in_order,
        a_retried_item_goes_by_its_new_run_at,
        order_holds_across_the_queues_of_one_claim,
        a_claim_takes_exactly_its_limit_in_claim_order,
    ]
}

/// Claims one item at a time until `n` are claimed; returns their ids in claim order.
async fn claim_in_turn<S: Store + ?Sized>(
    store: &S,
    q: &QueueName,
    n: usize,
) -> Result<Vec<ItemId>, Failure> {
    let w = owner("w1")?;
    let mut order = Vec::with_capacity(n);
    for _ in 0..n {
        order.push(claim_one(store, q, &w, "a claim in turn").await?.token.id);
    }
    Ok(order)
}

async fn smaller_priority_goes_first<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g08")?;
    let priorities = [5, -3, 0, i16::MAX, 1, i16::MIN];
    let ids = enqueue(
        env.store(),
        priorities.iter().map(|&p| item(&q).priority(p)).collect(),
    )
    .await?;
    let mut expected: Vec<(i16, ItemId)> = priorities.iter().copied().zip(ids).collect();
    expected.sort_by_key(|(p, _)| *p);
    let expected: Vec<ItemId> = expected.into_iter().map(|(_, id)| id).collect();
    let got = claim_in_turn(env.store(), &q, expected.len()).await?;
    ensure_eq(
        got,
        expected,
        "the claim order of priorities 5, -3, 0, MAX, 1, MIN",
    )?;
    pass()
}

async fn equal_priority_goes_by_run_at<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g08")?;
    let ago = |s: u64| env.now() - Duration::from_secs(s);
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).run_at(ago(1)),
            item(&q).run_at(ago(3)),
            item(&q).run_at(ago(2)),
        ],
    )
    .await?;
    let got = claim_in_turn(env.store(), &q, 3).await?;
    ensure_eq(
        got,
        vec![ids[1], ids[2], ids[0]],
        "the claim order of run_at -1 s, -3 s, -2 s",
    )?;
    pass()
}

async fn equal_priority_and_run_at_go_by_enqueue_order<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g08")?;
    // Ids minted in the reverse of enqueue order, so ordering by id would be caught.
    let mut ids: Vec<ItemId> = (0..20).map(|_| ItemId::new()).collect();
    ids.reverse();
    let items: Vec<NewItem> = ids.iter().map(|&id| item(&q).with_id(id)).collect();
    let (first, second) = items.split_at(12);
    enqueue(env.store(), first.to_vec()).await?;
    enqueue(env.store(), second.to_vec()).await?;
    let got = claim_in_turn(env.store(), &q, ids.len()).await?;
    ensure_eq(
        got,
        ids,
        "the claim order of 20 equal items, enqueued in two calls",
    )?;
    pass()
}

async fn a_batch_claim_takes_the_first_items_in_order<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g08")?;
    let priorities = [3, 1, 4, 1, 5, 9, 2, 6];
    let ids = enqueue(
        env.store(),
        priorities.iter().map(|&p| item(&q).priority(p)).collect(),
    )
    .await?;
    // Priorities 1, 1, 2, 3 are the first four.
    let expected: HashSet<ItemId> = [ids[1], ids[3], ids[6], ids[0]].into_iter().collect();
    let leases = claim(env.store(), &q, &owner("w1")?, 4).await?;
    let got: HashSet<ItemId> = leases.iter().map(|l| l.token.id).collect();
    ensure_eq(
        got,
        expected,
        "the items a claim of 4 takes (priorities 1, 1, 2, 3)",
    )?;
    pass()
}

async fn a_retried_item_goes_by_its_new_run_at<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g08")?;
    let ids = enqueue(env.store(), vec![item(&q), item(&q)]).await?;
    let w = owner("w1")?;
    let first = claim_one(env.store(), &q, &w, "the first claim").await?;
    ensure_eq(first.token.id, ids[0], "the first item claimed")?;
    env.advance(Duration::from_secs(1));
    let told = fail(env.store(), retry(first.token, Duration::ZERO, "again")).await?;
    ensure_eq(
        told,
        FailOutcome::Retrying { run_at: env.now() },
        "the retry",
    )?;
    let got = claim_in_turn(env.store(), &q, 2).await?;
    ensure_eq(
        got,
        vec![ids[1], ids[0]],
        "the claim order once the first item's retry runs at a later run_at",
    )?;
    pass()
}

async fn order_holds_across_the_queues_of_one_claim<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let a = queue("g08-a")?;
    let b = queue("g08-b")?;
    let ids = enqueue(
        env.store(),
        vec![
            item(&a).priority(5),
            item(&b).priority(1),
            item(&a).priority(3),
        ],
    )
    .await?;
    let w = owner("w1")?;
    let mut got = Vec::new();
    for _ in 0..3 {
        let params =
            ClaimParams::new(a.clone(), w.clone(), 1, LEASE).queues(vec![a.clone(), b.clone()]);
        let leases = env.store().claim(params).await.or_fail("claim")?;
        check_leases(&leases, &w, 1)?;
        got.extend(leases.iter().map(|l| l.token.id));
    }
    ensure_eq(
        got,
        vec![ids[1], ids[2], ids[0]],
        "the claim order across two queues",
    )?;
    pass()
}

async fn a_claim_takes_exactly_its_limit_in_claim_order<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g08-limit")?;
    let ids = enqueue(
        env.store(),
        vec![
            item(&q).priority(3),
            item(&q).priority(1),
            item(&q).priority(2),
            item(&q).priority(1),
            item(&q).priority(0),
            item(&q).priority(5),
        ],
    )
    .await?;
    let order = [ids[4], ids[1], ids[3], ids[2], ids[0], ids[5]];
    let w = owner("w1")?;
    let mut taken = 0;
    for (limit, expect) in [(1u32, 1usize), (3, 3), (10, 2)] {
        let leases = claim(env.store(), &q, &w, limit).await?;
        let mut got: Vec<_> = leases.iter().map(|l| l.token.id).collect();
        let mut want = order[taken..taken + expect].to_vec();
        got.sort();
        want.sort();
        ensure_eq(
            got,
            want,
            &format!(
                "a claim of {limit} with {} claimable: the next {expect} in claim order",
                6 - taken
            ),
        )?;
        taken += expect;
    }
    pass()
}
