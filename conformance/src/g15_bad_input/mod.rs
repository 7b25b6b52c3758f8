//! G15 Bad input: empty or oversized names and keys, payloads over the limit, zero or
//! absurd lease durations, batch limits of 0 or over the maximum: a clear error naming
//! the field, and nothing written.

mod bounds;

use std::time::Duration;

use tenure_core::{
    validate_identifier, ClaimParams, CompleteParams, DedupKey, DiscardParams, EnqueueParams,
    EvictParams, FailParams, HeartbeatParams, ItemId, LeaderName, LeaderParams, LeaseToken,
    NewItem, OwnerId, PurgeParams, QueueName, RecoverParams, ReleaseParams, RenewParams,
    RequeueParams, ScopeKey, Store, StreamKey, MAX_ATTEMPTS_LIMIT, MAX_KEY_BYTES, MAX_NAME_BYTES,
};

use crate::case::{register, Case, CaseResult, Env};
use crate::check::{
    ensure_eq, expect_absent, expect_counts, expect_invalid, expect_unchanged, get, pass, OrFail,
};
use crate::fixtures::{
    claim_one, counts, enqueue_one, item, kill_next, leader, owner, queue, retry, LEASE,
};
use crate::harness::Harness;

use bounds::{
    a_claim_naming_more_queues_than_the_limit_names_queues_and_changes_nothing,
    a_delay_beyond_the_schedule_window_names_delay_and_writes_nothing,
    a_run_at_beyond_the_schedule_window_names_run_at_and_writes_nothing,
};

pub(crate) const GROUP: &str = "g15_bad_input";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        claim_limits_of_zero_or_over_the_maximum_name_limit,
        zero_or_absurd_lease_durations_name_lease_for,
        a_claim_without_queues_names_queues,
        an_oversized_payload_names_payload_and_writes_nothing,
        enqueue_batches_of_zero_or_over_the_maximum_name_items,
        bad_attempt_stall_renewal_and_window_settings_name_their_field,
        a_repeated_item_id_in_one_enqueue_names_id,
        finalize_batches_that_are_empty_oversized_or_repeat_a_token_name_tokens,
        a_retry_delay_over_a_year_names_retry_and_writes_nothing,
        requeue_and_discard_with_bad_lists_name_their_field,
        maintenance_bounds_name_their_field_and_change_nothing,
        empty_or_oversized_names_and_keys_are_refused_before_reaching_a_store,
        a_run_at_beyond_the_schedule_window_names_run_at_and_writes_nothing,
        a_delay_beyond_the_schedule_window_names_delay_and_writes_nothing,
        a_claim_naming_more_queues_than_the_limit_names_queues_and_changes_nothing,
    ]
}

async fn claim_limits_of_zero_or_over_the_maximum_name_limit<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g15")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let before = get(env.store(), id).await?;
    let max = u32::try_from(env.store().limits().max_batch).unwrap_or(u32::MAX - 1);
    for limit in [0, max.saturating_add(1)] {
        let r = env
            .store()
            .claim(ClaimParams::new(q.clone(), owner("w1")?, limit, LEASE))
            .await;
        expect_invalid(r, "limit", &format!("claim with limit {limit}"))?;
    }
    expect_unchanged(env.store(), &before, "refused claims").await?;
    pass()
}

async fn zero_or_absurd_lease_durations_name_lease_for<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g15")?;
    let limits = env.store().limits();
    let bad = [
        Duration::ZERO,
        limits.min_lease.saturating_sub(Duration::from_micros(1)),
        limits.max_lease + Duration::from_secs(1),
    ];
    let id = enqueue_one(env.store(), item(&q)).await?;
    let ready = get(env.store(), id).await?;
    let w = owner("w1")?;
    for lease_for in bad {
        let r = env
            .store()
            .claim(ClaimParams::new(q.clone(), w.clone(), 1, lease_for))
            .await;
        expect_invalid(r, "lease_for", &format!("claim for {lease_for:?}"))?;
    }
    expect_unchanged(env.store(), &ready, "claims with bad leases").await?;

    let lease = claim_one(env.store(), &q, &w, "the claim").await?;
    let running = get(env.store(), id).await?;
    for lease_for in bad {
        let r = env
            .store()
            .renew(RenewParams::new(vec![lease.token], lease_for))
            .await;
        expect_invalid(r, "lease_for", &format!("renew for {lease_for:?}"))?;
    }
    expect_unchanged(env.store(), &running, "renewals with bad leases").await?;

    let name = leader("maintenance")?;
    for lease_for in bad {
        let r = env
            .store()
            .leader_acquire(LeaderParams::new(name.clone(), w.clone(), lease_for))
            .await;
        expect_invalid(r, "lease_for", &format!("leader_acquire for {lease_for:?}"))?;
    }
    let other = env
        .store()
        .leader_acquire(LeaderParams::new(name, owner("w2")?, LEASE))
        .await
        .or_fail("leader_acquire")?;
    ensure_eq(
        other.is_leader(),
        true,
        "another candidate leading after refused acquisitions",
    )?;
    pass()
}

async fn a_claim_without_queues_names_queues<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g15")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let before = get(env.store(), id).await?;
    let params = ClaimParams::new(q, owner("w1")?, 1, LEASE).queues(Vec::new());
    expect_invalid(
        env.store().claim(params).await,
        "queues",
        "claim from no queue",
    )?;
    expect_unchanged(env.store(), &before, "a refused claim").await?;
    pass()
}

async fn an_oversized_payload_names_payload_and_writes_nothing<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g15")?;
    let max = env.store().limits().max_payload_bytes;
    let fine = NewItem::new(q.clone(), vec![7; max]);
    let big = NewItem::new(q.clone(), vec![7; max + 1]);
    let ids = [fine.id, big.id];
    let r = env
        .store()
        .enqueue(EnqueueParams::new(vec![fine.clone(), big]))
        .await;
    expect_invalid(
        r,
        "payload",
        "enqueue of [a payload at the limit, one over it]",
    )?;
    for id in ids {
        expect_absent(env.store(), id, "a refused enqueue").await?;
    }
    expect_counts(
        env.store(),
        &q,
        counts(0, 0, 0, 0, 0),
        "after a refused enqueue",
    )
    .await?;
    enqueue_one(env.store(), fine).await?;
    pass()
}

async fn enqueue_batches_of_zero_or_over_the_maximum_name_items<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g15")?;
    let r = env.store().enqueue(EnqueueParams::new(Vec::new())).await;
    expect_invalid(r, "items", "enqueue of no items")?;
    let over = env.store().limits().max_enqueue_batch + 1;
    let items: Vec<NewItem> = (0..over)
        .map(|_| NewItem::new(q.clone(), Vec::new()))
        .collect();
    let first = items[0].id;
    let r = env.store().enqueue(EnqueueParams::new(items)).await;
    expect_invalid(r, "items", &format!("enqueue of {over} items"))?;
    expect_absent(env.store(), first, "a refused enqueue").await?;
    expect_counts(
        env.store(),
        &q,
        counts(0, 0, 0, 0, 0),
        "after refused enqueues",
    )
    .await?;
    pass()
}

async fn bad_attempt_stall_renewal_and_window_settings_name_their_field<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g15")?;
    let bad: Vec<(&str, NewItem)> = vec![
        ("max_attempts", item(&q).max_attempts(0)),
        (
            "max_attempts",
            item(&q).max_attempts(MAX_ATTEMPTS_LIMIT + 1),
        ),
        ("max_stalls", item(&q).max_stalls(0)),
        ("max_stalls", item(&q).max_stalls(MAX_ATTEMPTS_LIMIT + 1)),
        (
            "max_renewals",
            item(&q).max_renewals(MAX_ATTEMPTS_LIMIT + 1),
        ),
        ("dedup_window", item(&q).dedup_window(Duration::ZERO)),
        (
            "dedup_window",
            item(&q).dedup_window(Duration::from_secs(400 * 24 * 3600)),
        ),
    ];
    for (field, new) in bad {
        let id = new.id;
        let good = item(&q);
        let good_id = good.id;
        let r = env
            .store()
            .enqueue(EnqueueParams::new(vec![good, new]))
            .await;
        expect_invalid(r, field, &format!("enqueue with a bad {field}"))?;
        expect_absent(env.store(), id, "a refused enqueue").await?;
        expect_absent(
            env.store(),
            good_id,
            "a refused enqueue (its good neighbour)",
        )
        .await?;
    }
    expect_counts(
        env.store(),
        &q,
        counts(0, 0, 0, 0, 0),
        "after refused enqueues",
    )
    .await?;
    pass()
}

async fn a_repeated_item_id_in_one_enqueue_names_id<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g15")?;
    let first = item(&q);
    let twin = item(&q).with_id(first.id);
    let r = env
        .store()
        .enqueue(EnqueueParams::new(vec![first.clone(), twin]))
        .await;
    expect_invalid(r, "id", "enqueue of two items with one id")?;
    expect_absent(env.store(), first.id, "a refused enqueue").await?;
    expect_counts(
        env.store(),
        &q,
        counts(0, 0, 0, 0, 0),
        "after a refused enqueue",
    )
    .await?;
    pass()
}

async fn finalize_batches_that_are_empty_oversized_or_repeat_a_token_name_tokens<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g15")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    let before = get(env.store(), id).await?;
    let t = lease.token;
    let over = env.store().limits().max_batch + 1;
    let mut oversized = vec![t];
    oversized
        .extend((1..over).map(|_| LeaseToken::new(ItemId::new(), 1, tenure_core::LeaseId::mint())));
    let batches: [(&str, Vec<LeaseToken>); 3] = [
        ("an empty batch", Vec::new()),
        ("a batch repeating a token", vec![t, t]),
        ("a batch over the maximum", oversized),
    ];
    for (what, tokens) in batches {
        let s = env.store();
        expect_invalid(
            s.complete(CompleteParams::new(tokens.clone())).await,
            "tokens",
            &format!("complete of {what}"),
        )?;
        expect_invalid(
            s.release(ReleaseParams::new(tokens.clone())).await,
            "tokens",
            &format!("release of {what}"),
        )?;
        expect_invalid(
            s.renew(RenewParams::new(tokens.clone(), LEASE)).await,
            "tokens",
            &format!("renew of {what}"),
        )?;
        let failures = tokens
            .iter()
            .map(|&t| retry(t, Duration::from_secs(1), "x"))
            .collect();
        expect_invalid(
            s.fail(FailParams::new(failures)).await,
            "tokens",
            &format!("fail of {what}"),
        )?;
        expect_unchanged(env.store(), &before, &format!("finalizes of {what}")).await?;
    }
    pass()
}

async fn a_retry_delay_over_a_year_names_retry_and_writes_nothing<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g15")?;
    enqueue_one(env.store(), item(&q)).await?;
    enqueue_one(env.store(), item(&q)).await?;
    let w = owner("w1")?;
    let a = claim_one(env.store(), &q, &w, "the first claim").await?;
    let b = claim_one(env.store(), &q, &w, "the second claim").await?;
    let before = [
        get(env.store(), a.token.id).await?,
        get(env.store(), b.token.id).await?,
    ];
    let failures = vec![
        retry(a.token, Duration::from_secs(1), "fine"),
        retry(b.token, Duration::from_secs(400 * 24 * 3600), "absurd"),
    ];
    let r = env.store().fail(FailParams::new(failures)).await;
    expect_invalid(r, "retry", "fail with a retry delay of 400 days")?;
    for it in &before {
        expect_unchanged(env.store(), it, "a refused fail").await?;
    }
    pass()
}

async fn requeue_and_discard_with_bad_lists_name_their_field<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g15")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    kill_next(env.store(), &q, &owner("w1")?).await?;
    let dead = get(env.store(), id).await?;
    let s = env.store();
    expect_invalid(
        s.dead_requeue(RequeueParams::new(Vec::new())).await,
        "ids",
        "requeue of no ids",
    )?;
    expect_invalid(
        s.dead_requeue(RequeueParams::new(vec![id]).additional_attempts(0))
            .await,
        "additional_attempts",
        "requeue granting 0 attempts",
    )?;
    expect_invalid(
        s.dead_requeue(RequeueParams::new(vec![id]).additional_attempts(MAX_ATTEMPTS_LIMIT + 1))
            .await,
        "additional_attempts",
        "requeue granting too many attempts",
    )?;
    expect_invalid(
        s.dead_discard(DiscardParams::new(Vec::new())).await,
        "ids",
        "discard of no ids",
    )?;
    let over = s.limits().max_enqueue_batch + 1;
    let mut many = vec![id];
    many.extend((1..over).map(|_| ItemId::new()));
    expect_invalid(
        s.dead_requeue(RequeueParams::new(many.clone())).await,
        "ids",
        "requeue of too many ids",
    )?;
    expect_invalid(
        s.dead_discard(DiscardParams::new(many)).await,
        "ids",
        "discard of too many ids",
    )?;
    expect_unchanged(env.store(), &dead, "refused requeues and discards").await?;
    pass()
}

async fn maintenance_bounds_name_their_field_and_change_nothing<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g15")?;
    let w = owner("w1")?;
    env.store()
        .instance_heartbeat(HeartbeatParams::new(w.clone()))
        .await
        .or_fail("instance_heartbeat")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    claim_one(env.store(), &q, &w, "the claim").await?;
    env.advance(Duration::from_secs(2 * 24 * 3600));
    let expired = get(env.store(), id).await?;
    let s = env.store();
    let over = u32::try_from(s.limits().max_enqueue_batch + 1).unwrap_or(u32::MAX);
    for limit in [0, over] {
        expect_invalid(
            s.recover_expired(RecoverParams::new(limit)).await,
            "limit",
            &format!("recover_expired with limit {limit}"),
        )?;
        expect_invalid(
            s.purge(PurgeParams::new(Duration::from_secs(60), limit))
                .await,
            "limit",
            &format!("purge with limit {limit}"),
        )?;
    }
    for stale_after in [Duration::ZERO, Duration::from_secs(2 * 24 * 3600)] {
        expect_invalid(
            s.instance_evict_stale(EvictParams::new(stale_after)).await,
            "stale_after",
            &format!("instance_evict_stale after {stale_after:?}"),
        )?;
    }
    expect_unchanged(env.store(), &expired, "refused maintenance calls").await?;
    let listed = s.instance_list().await.or_fail("instance_list")?;
    ensure_eq(listed.len(), 1, "instances after refused evictions")?;
    pass()
}

/// Names and keys are validated when they are built, so a store never sees a bad one.
/// This case pins that boundary: each constructor refuses empty and oversized values
/// naming its field, as does the check stores run on a configured schema or prefix.
async fn empty_or_oversized_names_and_keys_are_refused_before_reaching_a_store<H: Harness>(
    _env: Env<'_, H>,
) -> CaseResult {
    let long_name = "n".repeat(MAX_NAME_BYTES + 1);
    let long_key = "k".repeat(MAX_KEY_BYTES + 1);
    for bad in ["", long_name.as_str(), "has space"] {
        expect_invalid(
            QueueName::new(bad),
            "queue",
            &format!("QueueName::new({bad:.8?})"),
        )?;
        expect_invalid(
            OwnerId::new(bad),
            "owner",
            &format!("OwnerId::new({bad:.8?})"),
        )?;
        expect_invalid(
            LeaderName::new(bad),
            "leader",
            &format!("LeaderName::new({bad:.8?})"),
        )?;
    }
    for bad in ["", long_key.as_str(), "line\nbreak"] {
        expect_invalid(
            StreamKey::new(bad),
            "stream",
            &format!("StreamKey::new({bad:.8?})"),
        )?;
        expect_invalid(
            ScopeKey::new(bad),
            "scope",
            &format!("ScopeKey::new({bad:.8?})"),
        )?;
        expect_invalid(
            DedupKey::new(bad),
            "dedup_key",
            &format!("DedupKey::new({bad:.8?})"),
        )?;
    }
    for bad in ["", "Tenure", "a;drop table x", "q\"x", "1abc"] {
        expect_invalid(
            validate_identifier("schema", bad),
            "schema",
            &format!("validate_identifier({bad:?})"),
        )?;
    }
    pass()
}
