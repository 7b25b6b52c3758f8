//! Bad cancel and filter input is refused naming the field, and writes nothing.

use std::time::Duration;

use tenure_core::{
    CancelParams, DeadFilter, DiscardParams, ItemId, ItemState, RequeueParams, Store,
};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure_eq, expect_invalid, expect_state, get, pass};
use crate::fixtures::{enqueue_n, queue};
use crate::harness::Harness;

use super::dead_filter::make_dead;

/// Both filtered calls, a requeue and a discard, must refuse `filter` as invalid
/// input naming `field` (`what` says how the filter is bad).
pub(super) async fn expect_filter_refused<S: Store + ?Sized>(
    store: &S,
    filter: DeadFilter,
    field: &str,
    what: &str,
) -> Result<(), Failure> {
    expect_invalid(
        store
            .dead_requeue(RequeueParams::matching(filter.clone()))
            .await,
        field,
        &format!("a filtered requeue {what}"),
    )?;
    expect_invalid(
        store.dead_discard(DiscardParams::matching(filter)).await,
        field,
        &format!("a filtered discard {what}"),
    )
}

pub(super) async fn bad_cancel_and_filter_input_is_refused_and_writes_nothing<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let dead = make_dead(env.store(), &q, 1).await?[0];
    let ready = enqueue_n(env.store(), &q, 1).await?[0];
    expect_invalid(
        env.store().item_cancel(CancelParams::new(vec![])).await,
        "ids",
        "a cancel of no items",
    )?;
    expect_invalid(
        env.store()
            .item_cancel(CancelParams::new(vec![ready, ready]))
            .await,
        "ids",
        "a cancel naming an item twice",
    )?;
    for bad in [0, tenure_core::MAX_DEAD_BATCH + 1] {
        let filter = DeadFilter::new(q.clone()).limit(bad);
        expect_filter_refused(env.store(), filter, "limit", "with a limit out of bounds").await?;
    }
    expect_state(env.store(), ready, ItemState::Ready, "refused cancels").await?;
    expect_state(env.store(), dead, ItemState::Dead, "refused filters").await?;
    pass()
}

pub(super) async fn bad_filter_ages_granted_attempts_and_cancel_batches_are_refused_naming_the_field<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("control")?;
    let dead = make_dead(env.store(), &q, 1).await?[0];
    let ready = enqueue_n(env.store(), &q, 1).await?[0];
    let before = (
        get(env.store(), dead).await?,
        get(env.store(), ready).await?,
    );
    // Eleven years: over the ten a filter's age may be.
    let absurd = DeadFilter::new(q.clone()).older_than(Duration::from_secs(11 * 366 * 24 * 3600));
    expect_filter_refused(
        env.store(),
        absurd,
        "older_than",
        "of items dead for over ten years",
    )
    .await?;
    for bad in [0, tenure_core::MAX_ATTEMPTS_LIMIT + 1] {
        expect_invalid(
            env.store()
                .dead_requeue(
                    RequeueParams::matching(DeadFilter::new(q.clone())).additional_attempts(bad),
                )
                .await,
            "additional_attempts",
            &format!("a filtered requeue granting {bad} attempts"),
        )?;
    }
    let mut many = vec![ready];
    many.extend((0..env.store().limits().max_batch).map(|_| ItemId::new()));
    expect_invalid(
        env.store().item_cancel(CancelParams::new(many)).await,
        "ids",
        "a cancel of more ids than a batch may hold",
    )?;
    ensure_eq(
        (
            get(env.store(), dead).await?,
            get(env.store(), ready).await?,
        ),
        before,
        "the dead and the ready item after the refused calls",
    )?;
    pass()
}
