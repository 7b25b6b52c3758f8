//! Lease listings: a queue's live leases, soonest expiry first, expired ones until
//! they are recovered, paged without skipping leases of one expiry.

use std::time::Duration;

use tenure_core::{LeaseListParams, LeaseToken, RecoverParams, RenewOutcome, Store};

use crate::case::{CaseResult, Env, Failure};
use crate::check::{ensure, ensure_eq, expect_state, get, pass, OrFail};
use crate::fixtures::{claim_for, enqueue_n, fail, owner, permanent, queue, renew, LEASE};
use crate::harness::Harness;

pub(super) async fn lease_list_shows_owner_attempt_expiry_and_renewals_soonest_expiry_first<
    H: Harness,
>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    let ids = enqueue_n(env.store(), &q, 4).await?;
    let (a, b) = (owner("w-a")?, owner("w-b")?);
    let long = claim_for(env.store(), &q, &a, 1, Duration::from_secs(90)).await?;
    let short = claim_for(env.store(), &q, &b, 1, Duration::from_secs(10)).await?;
    let mid = claim_for(env.store(), &q, &a, 1, Duration::from_secs(50)).await?;
    let renewed = renew(env.store(), mid[0].token, Duration::from_secs(60)).await?;
    let RenewOutcome::Renewed { expires_at, .. } = renewed else {
        return Err(Failure::new(
            "the renewal to be accepted",
            format!("{renewed:?}"),
        ));
    };
    // Shown soonest expiry first: short (10 s), mid renewed (60 s), long (90 s).
    let mut seen = Vec::new();
    let mut cursor = None;
    for _ in 0..10 {
        let mut p = LeaseListParams::new(q.clone()).limit(2);
        if let Some(c) = cursor.take() {
            p = p.after(c);
        }
        let page = env.store().lease_list(p).await.or_fail("lease_list")?;
        ensure(page.leases.len() <= 2, "a page of at most 2 leases", &page)?;
        seen.extend(page.leases);
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let tokens: Vec<LeaseToken> = seen.iter().map(|l| l.token).collect();
    ensure_eq(
        tokens,
        vec![short[0].token, mid[0].token, long[0].token],
        "the leases, soonest expiry first, each once",
    )?;
    let shown: Vec<_> = seen
        .iter()
        .map(|l| (l.owner.clone(), l.expires_at, l.renewals, l.queue.clone()))
        .collect();
    ensure_eq(
        shown,
        vec![
            (b.clone(), short[0].expires_at, 0, q.clone()),
            (a.clone(), expires_at, 1, q.clone()),
            (a.clone(), long[0].expires_at, 0, q.clone()),
        ],
        "each lease's owner, expiry, renewals and queue",
    )?;
    ensure_eq(
        seen[0].max_renewals,
        get(env.store(), short[0].token.id).await?.max_renewals,
        "max_renewals",
    )?;
    // The unclaimed item holds no lease; a finished one no longer shows.
    ensure(
        !seen.iter().any(|l| l.token.id == ids[3]),
        "the ready item not to be listed as a lease",
        &seen,
    )?;
    crate::fixtures::complete(env.store(), short[0].token).await?;
    fail(env.store(), permanent(long[0].token, "gone")).await?;
    let page = env
        .store()
        .lease_list(LeaseListParams::new(q.clone()))
        .await
        .or_fail("lease_list")?;
    let tokens: Vec<LeaseToken> = page.leases.iter().map(|l| l.token).collect();
    ensure_eq(tokens, vec![mid[0].token], "the leases once two finished")?;
    pass()
}

pub(super) async fn lease_list_shows_an_expired_lease_until_it_is_recovered<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    let ids = enqueue_n(env.store(), &q, 3).await?;
    let (a, b) = (owner("w-a")?, owner("w-b")?);
    let short = claim_for(env.store(), &q, &a, 1, Duration::from_secs(10)).await?;
    let long = claim_for(env.store(), &q, &b, 1, Duration::from_secs(60)).await?;
    // At the instant the short lease ends, and well after: it has expired, nobody
    // recovered it, and it is still the item's lease (its holder may still renew or
    // finish it), so it is listed, first, with its expiry.
    for (wait, when) in [
        (
            Duration::from_secs(10),
            "at the instant the short lease ends",
        ),
        (Duration::from_secs(20), "20 s after the short lease ended"),
    ] {
        env.advance(wait);
        let page = env
            .store()
            .lease_list(LeaseListParams::new(q.clone()))
            .await
            .or_fail("lease_list")?;
        let shown: Vec<_> = page
            .leases
            .iter()
            .map(|l| (l.token, l.owner.clone(), l.expires_at))
            .collect();
        ensure_eq(
            shown,
            vec![
                (short[0].token, a.clone(), short[0].expires_at),
                (long[0].token, b.clone(), long[0].expires_at),
            ],
            &format!("the leases {when} (expired first, then the live one)"),
        )?;
        ensure(
            page.leases[0].expires_at <= page.as_of && page.leases[1].expires_at > page.as_of,
            "the expired lease's expiry to be at or before the page's as_of, the live one's after",
            (&page.leases, page.as_of),
        )?;
        ensure_eq(
            get(env.store(), ids[0]).await?.lease_expires_at,
            Some(short[0].expires_at),
            "the expired item's lease expiry",
        )?;
    }
    // The first page of one is the expired lease; the next holds the live one.
    let first = env
        .store()
        .lease_list(LeaseListParams::new(q.clone()).limit(1))
        .await
        .or_fail("lease_list")?;
    let tokens: Vec<LeaseToken> = first.leases.iter().map(|l| l.token).collect();
    ensure_eq(tokens, vec![short[0].token], "a first page of one lease")?;
    let next = first.next.ok_or_else(|| {
        Failure::new(
            "a first page of one of two leases to have a next cursor",
            "None",
        )
    })?;
    let rest = env
        .store()
        .lease_list(LeaseListParams::new(q.clone()).after(next))
        .await
        .or_fail("lease_list")?;
    let tokens: Vec<LeaseToken> = rest.leases.iter().map(|l| l.token).collect();
    ensure_eq(
        tokens,
        vec![long[0].token],
        "the page after the expired lease",
    )?;
    // Recovery takes it back: it is no longer a lease.
    let recovered = env
        .store()
        .recover_expired(RecoverParams::new(10))
        .await
        .or_fail("recover_expired")?;
    ensure_eq(recovered.requeued, 1, "leases recovered")?;
    expect_state(
        env.store(),
        ids[0],
        tenure_core::ItemState::Ready,
        "its recovery",
    )
    .await?;
    let page = env
        .store()
        .lease_list(LeaseListParams::new(q.clone()))
        .await
        .or_fail("lease_list")?;
    let tokens: Vec<LeaseToken> = page.leases.iter().map(|l| l.token).collect();
    ensure_eq(
        tokens,
        vec![long[0].token],
        "the leases once the expired one was recovered",
    )?;
    pass()
}

pub(super) async fn lease_pages_show_leases_of_one_expiry_each_once<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let q = queue("inspect")?;
    enqueue_n(env.store(), &q, 6).await?;
    let w = owner("w1")?;
    // Five leases from one claim share one expiry; a sixth, claimed later, ends later.
    let together = claim_for(env.store(), &q, &w, 5, LEASE).await?;
    ensure_eq(together.len(), 5, "the claim of five")?;
    env.advance(Duration::from_secs(1));
    let last = claim_for(env.store(), &q, &w, 1, LEASE).await?;
    ensure_eq(last.len(), 1, "the claim of the sixth")?;
    for limit in [1, 2, 3] {
        let mut seen: Vec<tenure_core::LeaseInfo> = Vec::new();
        let mut cursor = None;
        for _ in 0..20 {
            let mut p = LeaseListParams::new(q.clone()).limit(limit);
            if let Some(c) = cursor.take() {
                p = p.after(c);
            }
            let page = env.store().lease_list(p).await.or_fail("lease_list")?;
            ensure(
                page.leases.len() <= limit as usize,
                format!("a page of at most {limit} leases"),
                &page,
            )?;
            seen.extend(page.leases);
            match page.next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        let mut first: Vec<LeaseToken> = seen.iter().take(5).map(|l| l.token).collect();
        first.sort_by_key(|t| t.id);
        let mut want: Vec<LeaseToken> = together.iter().map(|l| l.token).collect();
        want.sort_by_key(|t| t.id);
        ensure_eq(
            (seen.len(), first, seen.last().map(|l| l.token)),
            (6, want, Some(last[0].token)),
            &format!(
                "pages of {limit} through five leases of one expiry and a later one: each \
                 lease once, the five first in any order, the later one last"
            ),
        )?;
    }
    pass()
}
