//! G11 Dedup: an enqueue whose `dedup_key` was seen within its window inserts nothing
//! and answers the existing id, flagged as a duplicate. Purge forgets expired keys and
//! old finished items, and nothing else.

use std::time::Duration;

use tenure_core::{
    DeadFilter, DiscardParams, EnqueueParams, Enqueued, ItemId, ItemState, NewItem, PurgeParams,
    QueueName, Store, TokenOutcome,
};

use crate::case::{register, Case, CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_absent, expect_counts, expect_state, pass, OrFail};
use crate::fixtures::{
    claim, claim_one, complete, counts, dedup, enqueue_n, enqueue_one, item, kill_next, owner,
    queue, race, retrying, HANDLES, RACERS, TICK,
};
use crate::harness::Harness;

pub(crate) const GROUP: &str = "g11_dedup";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        a_second_enqueue_within_the_window_is_a_duplicate_of_the_first,
        a_repeated_key_within_one_call_is_a_duplicate,
        the_key_is_new_again_once_its_window_has_passed,
        a_finished_item_still_dedups_within_the_window,
        dedup_keys_belong_to_their_queue,
        purge_forgets_only_expired_dedup_keys,
        purge_deletes_finished_items_once_they_are_old_enough,
        purge_never_deletes_ready_running_or_dead_items,
        sixteen_concurrent_enqueues_of_one_key_insert_once,
        a_discarded_dead_item_still_dedups_within_the_window,
        purge_keeps_finished_items_younger_than_keep_done_for_and_counts_those_it_deletes,
        each_queue_answers_its_own_earlier_item_for_a_shared_dedup_key,
        a_purge_pass_forgets_exactly_its_limit_of_expired_keys,
    ]
}

fn keyed(q: &QueueName, key: &str, payload: &[u8]) -> Result<NewItem, Failure> {
    Ok(NewItem::new(q.clone(), payload.to_vec()).dedup_key(dedup(key)?))
}

async fn enqueue_answers<S: Store + ?Sized>(
    store: &S,
    items: Vec<NewItem>,
) -> Result<Vec<Enqueued>, Failure> {
    store
        .enqueue(EnqueueParams::new(items))
        .await
        .or_fail("enqueue")
}

fn dup(id: ItemId) -> Enqueued {
    Enqueued {
        id,
        duplicate: true,
    }
}

fn fresh(id: ItemId) -> Enqueued {
    Enqueued {
        id,
        duplicate: false,
    }
}

async fn a_second_enqueue_within_the_window_is_a_duplicate_of_the_first<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g11")?;
    let first = enqueue_one(env.store(), keyed(&q, "order-1", b"first")?).await?;
    env.advance(Duration::from_secs(3600));
    let second = keyed(&q, "order-1", b"second")?;
    let second_id = second.id;
    let told = enqueue_answers(env.store(), vec![second]).await?;
    ensure_eq(
        told,
        vec![dup(first)],
        "the answer to a second enqueue of one key",
    )?;
    expect_absent(env.store(), second_id, "a duplicate enqueue").await?;
    let kept = expect_state(env.store(), first, ItemState::Ready, "after a duplicate").await?;
    ensure_eq(
        kept.payload,
        b"first".to_vec(),
        "the first item's payload (untouched)",
    )?;
    expect_counts(env.store(), &q, counts(1, 0, 0, 0, 0), "after a duplicate").await?;
    pass()
}

async fn a_repeated_key_within_one_call_is_a_duplicate<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g11")?;
    let a = keyed(&q, "k", b"a")?;
    let c = item(&q);
    let b = keyed(&q, "k", b"b")?;
    let (a_id, c_id, b_id) = (a.id, c.id, b.id);
    let told = enqueue_answers(env.store(), vec![a, c, b]).await?;
    ensure_eq(
        told,
        vec![fresh(a_id), fresh(c_id), dup(a_id)],
        "the answers to enqueuing [k, no key, k] in one call",
    )?;
    expect_absent(env.store(), b_id, "a duplicate within one call").await?;
    expect_counts(env.store(), &q, counts(2, 0, 0, 0, 0), "after the call").await?;
    pass()
}

async fn the_key_is_new_again_once_its_window_has_passed<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g11")?;
    let window = Duration::from_secs(60);
    let first = enqueue_one(env.store(), keyed(&q, "k", b"1")?.dedup_window(window)).await?;
    env.advance(window - TICK);
    let told = enqueue_answers(
        env.store(),
        vec![keyed(&q, "k", b"2")?.dedup_window(window)],
    )
    .await?;
    ensure_eq(
        told,
        vec![dup(first)],
        "an enqueue one tick before the window ends",
    )?;
    env.advance(TICK);
    let again = keyed(&q, "k", b"3")?.dedup_window(window);
    let again_id = again.id;
    let told = enqueue_answers(env.store(), vec![again]).await?;
    ensure_eq(
        told,
        vec![fresh(again_id)],
        "an enqueue once the window has passed",
    )?;
    expect_counts(
        env.store(),
        &q,
        counts(2, 0, 0, 0, 0),
        "after the second insert",
    )
    .await?;
    pass()
}

async fn a_finished_item_still_dedups_within_the_window<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g11")?;
    let first = enqueue_one(env.store(), keyed(&q, "k", b"1")?).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    ensure_eq(
        complete(env.store(), lease.token).await?,
        TokenOutcome::Accepted,
        "the complete",
    )?;
    let told = enqueue_answers(env.store(), vec![keyed(&q, "k", b"2")?]).await?;
    ensure_eq(
        told,
        vec![dup(first)],
        "an enqueue of the key of a finished item",
    )?;
    expect_counts(
        env.store(),
        &q,
        counts(0, 0, 0, 0, 1),
        "after the duplicate",
    )
    .await?;
    pass()
}

async fn dedup_keys_belong_to_their_queue<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let (a, b) = (queue("g11-a")?, queue("g11-b")?);
    enqueue_one(env.store(), keyed(&a, "k", b"a")?).await?;
    enqueue_one(env.store(), keyed(&b, "k", b"b")?).await?;
    expect_counts(
        env.store(),
        &b,
        counts(1, 0, 0, 0, 0),
        "queue b after its own key",
    )
    .await?;
    pass()
}

async fn purge_forgets_only_expired_dedup_keys<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let q = queue("g11")?;
    let short = Duration::from_secs(10);
    enqueue_one(env.store(), keyed(&q, "short", b"1")?.dedup_window(short)).await?;
    let long = enqueue_one(env.store(), keyed(&q, "long", b"2")?).await?;
    env.advance(short);
    let purged = env
        .store()
        .purge(PurgeParams::new(Duration::from_secs(3600), 100))
        .await
        .or_fail("purge")?;
    ensure_eq(purged.dedup_keys, 1, "expired dedup keys purged")?;
    let told = enqueue_answers(env.store(), vec![keyed(&q, "long", b"3")?]).await?;
    ensure_eq(
        told,
        vec![dup(long)],
        "an enqueue of the key still inside its window",
    )?;
    let again = keyed(&q, "short", b"4")?;
    let again_id = again.id;
    let told = enqueue_answers(env.store(), vec![again]).await?;
    ensure_eq(told, vec![fresh(again_id)], "an enqueue of the purged key")?;
    pass()
}

async fn purge_deletes_finished_items_once_they_are_old_enough<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g11")?;
    let id = enqueue_one(env.store(), item(&q)).await?;
    let lease = claim_one(env.store(), &q, &owner("w1")?, "the claim").await?;
    ensure_eq(
        complete(env.store(), lease.token).await?,
        TokenOutcome::Accepted,
        "the complete",
    )?;
    let keep = Duration::from_secs(60);
    env.advance(keep);
    env.store()
        .purge(PurgeParams::new(keep, 100))
        .await
        .or_fail("purge")?;
    expect_absent(
        env.store(),
        id,
        "a purge once it finished 60 s ago with keep_done_for 60 s",
    )
    .await?;
    pass()
}

async fn purge_never_deletes_ready_running_or_dead_items<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g11")?;
    let w = owner("w1")?;
    let dead = enqueue_one(env.store(), item(&q)).await?;
    kill_next(env.store(), &q, &w).await?;
    let running = enqueue_one(env.store(), item(&q)).await?;
    claim_one(env.store(), &q, &w, "the claim").await?;
    let ready = enqueue_one(env.store(), item(&q)).await?;
    env.advance(Duration::from_secs(7 * 24 * 3600));
    env.store()
        .purge(PurgeParams::new(Duration::from_secs(1), 100))
        .await
        .or_fail("purge")?;
    expect_state(env.store(), dead, ItemState::Dead, "after a purge").await?;
    expect_state(env.store(), running, ItemState::Running, "after a purge").await?;
    expect_state(env.store(), ready, ItemState::Ready, "after a purge").await?;
    pass()
}

async fn sixteen_concurrent_enqueues_of_one_key_insert_once<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g11-race")?;
    let handles = env.handles(HANDLES).await?;
    for round in 0..4 {
        let key = format!("race-{round}");
        let told = race(&handles, RACERS, |i, store| {
            let new = keyed(&q, &key, format!("{i}").as_bytes());
            async move {
                let new = new?;
                let mine = new.id;
                let answers =
                    retrying("enqueue", || store.enqueue(EnqueueParams::one(new.clone()))).await?;
                ensure_eq(answers.len(), 1, "answers to an enqueue of one item")?;
                Ok((mine, answers[0]))
            }
        })
        .await?;
        let inserted: Vec<ItemId> = told
            .iter()
            .filter(|(mine, e)| !e.duplicate && e.id == *mine)
            .map(|(mine, _)| *mine)
            .collect();
        ensure(
            inserted.len() == 1,
            format!("exactly one of {RACERS} racers enqueuing one key to be told it inserted (round {round})"),
            &told,
        )?;
        let winner = inserted[0];
        for (mine, e) in &told {
            ensure(
                *mine == winner || *e == dup(winner),
                "every other racer to be told duplicate, with the winner's id",
                (mine, e),
            )?;
        }
        expect_state(env.store(), winner, ItemState::Ready, "after the race").await?;
    }
    expect_counts(env.store(), &q, counts(4, 0, 0, 0, 0), "after four races").await?;
    pass()
}

async fn a_discarded_dead_item_still_dedups_within_the_window<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g11")?;
    let w = owner("w1")?;
    // One dead item discarded by id, one by a filter: both keys stay recorded.
    let by_id = enqueue_one(env.store(), keyed(&q, "by-id", b"1")?).await?;
    kill_next(env.store(), &q, &w).await?;
    let n = env
        .store()
        .dead_discard(DiscardParams::new(vec![by_id]))
        .await
        .or_fail("dead_discard")?;
    ensure_eq(n, 1, "items discarded by id")?;
    expect_absent(env.store(), by_id, "its discard").await?;
    let told = enqueue_answers(env.store(), vec![keyed(&q, "by-id", b"2")?]).await?;
    ensure_eq(
        told,
        vec![dup(by_id)],
        "an enqueue of the key of an item discarded by id",
    )?;
    let by_filter = enqueue_one(env.store(), keyed(&q, "by-filter", b"3")?).await?;
    kill_next(env.store(), &q, &w).await?;
    let n = env
        .store()
        .dead_discard(DiscardParams::matching(DeadFilter::new(q.clone())))
        .await
        .or_fail("dead_discard")?;
    ensure_eq(n, 1, "items discarded by filter")?;
    expect_absent(env.store(), by_filter, "its discard").await?;
    let told = enqueue_answers(env.store(), vec![keyed(&q, "by-filter", b"4")?]).await?;
    ensure_eq(
        told,
        vec![dup(by_filter)],
        "an enqueue of the key of an item discarded by filter",
    )?;
    expect_counts(
        env.store(),
        &q,
        counts(0, 0, 0, 0, 0),
        "after the duplicates of discarded items",
    )
    .await?;
    pass()
}

async fn purge_keeps_finished_items_younger_than_keep_done_for_and_counts_those_it_deletes<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g11")?;
    let w = owner("w1")?;
    let ids = enqueue_n(env.store(), &q, 3).await?;
    // Two finish now, the third 50 s later; 10 s after that a purge keeps 60 s.
    for lease in claim(env.store(), &q, &w, 2).await? {
        ensure_eq(
            complete(env.store(), lease.token).await?,
            TokenOutcome::Accepted,
            "the complete of one of the first two",
        )?;
    }
    env.advance(Duration::from_secs(50));
    let lease = claim_one(env.store(), &q, &w, "the claim of the third").await?;
    ensure_eq(lease.token.id, ids[2], "the third item claimed")?;
    ensure_eq(
        complete(env.store(), lease.token).await?,
        TokenOutcome::Accepted,
        "the complete of the third",
    )?;
    let kept = env
        .store()
        .item_get(ids[2])
        .await
        .or_fail("item_get")?
        .is_some();
    env.advance(Duration::from_secs(10));
    let keep = Duration::from_secs(60);
    let purged = env
        .store()
        .purge(PurgeParams::new(keep, 100))
        .await
        .or_fail("purge")?;
    if !kept {
        // A store that deletes finished items at once has none left to purge.
        ensure_eq(
            purged.items,
            0,
            "finished items purged by a store that deletes them when they finish",
        )?;
        return pass();
    }
    ensure_eq(
        purged.items,
        2,
        "finished items purged: the two that finished 60 s ago, not the one 10 s ago",
    )?;
    expect_absent(env.store(), ids[0], "a purge 60 s after it finished").await?;
    expect_absent(env.store(), ids[1], "a purge 60 s after it finished").await?;
    expect_state(
        env.store(),
        ids[2],
        ItemState::Done,
        "a purge keeping 60 s, 10 s after it finished",
    )
    .await?;
    env.advance(Duration::from_secs(50));
    let purged = env
        .store()
        .purge(PurgeParams::new(keep, 100))
        .await
        .or_fail("purge")?;
    ensure_eq(
        purged.items,
        1,
        "finished items purged once the third is 60 s old",
    )?;
    expect_absent(env.store(), ids[2], "a purge 60 s after it finished").await?;
    pass()
}

fn keyed_item(q: &QueueName, key: &str) -> Result<NewItem, Failure> {
    Ok(item(q).dedup_key(dedup(key)?))
}

fn answer(id: ItemId, duplicate: bool) -> Enqueued {
    Enqueued { id, duplicate }
}

async fn each_queue_answers_its_own_earlier_item_for_a_shared_dedup_key<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (qa, qb) = (queue("g11-a")?, queue("g11-b")?);
    let (a1, b1) = (keyed_item(&qa, "k")?, keyed_item(&qb, "k")?);
    let (a1_id, b1_id) = (a1.id, b1.id);
    for (it, id, which) in [(a1, a1_id, "queue a"), (b1, b1_id, "queue b")] {
        let told = enqueue_answers(env.store(), vec![it]).await?;
        ensure_eq(
            told,
            vec![answer(id, false)],
            &format!("the first enqueue of key k in {which}"),
        )?;
    }
    let told = enqueue_answers(
        env.store(),
        vec![keyed_item(&qa, "k")?, keyed_item(&qb, "k")?],
    )
    .await?;
    ensure_eq(
        told,
        vec![answer(a1_id, true), answer(b1_id, true)],
        "an enqueue of key k in [queue a, queue b] after both queues used it \
         (each queue's own earlier item, as a duplicate)",
    )?;
    // Interleaved within one call.
    let batch = vec![
        keyed_item(&qa, "j")?,
        keyed_item(&qb, "j")?,
        keyed_item(&qa, "j")?,
        keyed_item(&qb, "j")?,
    ];
    let (ja, jb) = (batch[0].id, batch[1].id);
    let told = enqueue_answers(env.store(), batch).await?;
    ensure_eq(
        told,
        vec![
            answer(ja, false),
            answer(jb, false),
            answer(ja, true),
            answer(jb, true),
        ],
        "one enqueue of key j in [queue a, queue b, queue a, queue b]",
    )?;
    for q in [&qa, &qb] {
        expect_counts(env.store(), q, counts(2, 0, 0, 0, 0), "after the enqueues").await?;
    }
    pass()
}

async fn a_purge_pass_forgets_exactly_its_limit_of_expired_keys<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("g11-purge")?;
    let window = Duration::from_secs(10);
    for n in 0..5 {
        let it = item(&q)
            .dedup_key(dedup(&format!("k{n}"))?)
            .dedup_window(window);
        enqueue_one(env.store(), it).await?;
    }
    env.advance(window);
    for (limit, purged) in [(2, 2), (1, 1), (10, 2), (10, 0)] {
        let p = env
            .store()
            .purge(PurgeParams::new(Duration::from_secs(3600), limit))
            .await
            .or_fail("purge")?;
        ensure_eq(
            p.dedup_keys,
            purged,
            &format!("expired dedup keys forgotten by a purge pass with limit {limit}"),
        )?;
    }
    pass()
}
