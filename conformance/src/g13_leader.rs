//! G13 Leader lease: per name at most one holder; each new holder gets a strictly
//! greater term; the lease expires without renewal; acquisition answers Leader or
//! Follower, and an unreachable store is an error (Faulted), never Follower.

use std::time::Duration;

use tenure_core::{LeaderInfo, LeaderName, LeaderParams, LeaderStatus, OwnerId, Store};

use crate::case::{register, Case, CaseResult, Env, Failure, Verdict};
use crate::check::{ensure, ensure_eq, expect_unavailable, pass, OrFail};
use crate::fixtures::{leader, owner, race, retrying, HANDLES, LEASE, LONG, RACERS, TICK};
use crate::harness::{Harness, Unreachable};

pub(crate) const GROUP: &str = "g13_leader";

pub(crate) fn cases<H: Harness>() -> Vec<Case<H>> {
    register![GROUP;
        a_free_lease_makes_the_caller_leader,
        a_held_lease_makes_others_followers_naming_the_holder,
        the_holder_extends_its_lease_keeping_its_term,
        after_expiry_another_takes_over_with_a_greater_term,
        a_holder_returning_after_expiry_gets_a_greater_term,
        a_resigned_lease_is_free_and_the_next_term_is_greater,
        terms_strictly_increase_over_many_handovers,
        leader_names_are_independent,
        sixteen_candidates_racing_elect_exactly_one_leader,
        an_unreachable_store_is_an_error_never_a_follower,
        reading_the_leader_answers_the_live_holder_its_term_and_expiry,
        reading_the_leader_never_changes_its_holder_or_term,
        an_expired_or_resigned_lease_reads_as_no_leader,
        reading_the_leader_of_an_unreachable_store_is_an_error_never_none,
        the_leader_lease_duration_decides_when_another_may_lead,
    ]
}

const TERM: Duration = Duration::from_secs(15);

async fn acquire<S: Store + ?Sized>(
    store: &S,
    name: &LeaderName,
    who: &OwnerId,
) -> Result<LeaderStatus, Failure> {
    store
        .leader_acquire(LeaderParams::new(name.clone(), who.clone(), TERM))
        .await
        .or_fail("leader_acquire")
}

async fn resign<S: Store + ?Sized>(
    store: &S,
    name: &LeaderName,
    who: &OwnerId,
) -> Result<bool, Failure> {
    store
        .leader_resign(LeaderParams::new(name.clone(), who.clone(), TERM))
        .await
        .or_fail("leader_resign")
}

async fn read<S: Store + ?Sized>(
    store: &S,
    name: &LeaderName,
) -> Result<Option<LeaderInfo>, Failure> {
    store.leader_get(name).await.or_fail("leader_get")
}

/// The term of a `Leader` answer; anything else fails with `what`.
fn led(status: &LeaderStatus, what: &str) -> Result<u64, Failure> {
    match status {
        LeaderStatus::Leader { term, .. } => Ok(*term),
        other => Err(Failure::new(
            format!("{what} to be Leader"),
            format!("{other:?}"),
        )),
    }
}

/// A `Follower` answer must name `holder` and `term`.
fn follows(status: &LeaderStatus, holder: &OwnerId, term: u64, what: &str) -> Result<(), Failure> {
    match status {
        LeaderStatus::Follower {
            holder: h, term: t, ..
        } if h == holder && *t == term => Ok(()),
        other => Err(Failure::new(
            format!("{what} to be Follower of {holder} (term {term})"),
            format!("{other:?}"),
        )),
    }
}

async fn a_free_lease_makes_the_caller_leader<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let name = leader("maintenance")?;
    let told = acquire(env.store(), &name, &owner("a")?).await?;
    let term = led(&told, "the first acquisition")?;
    ensure(term >= 1, "the first term to be at least 1", term)?;
    ensure_eq(
        told,
        LeaderStatus::Leader {
            term,
            expires_at: env.now() + TERM,
        },
        "the first acquisition",
    )?;
    pass()
}

async fn a_held_lease_makes_others_followers_naming_the_holder<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let name = leader("maintenance")?;
    let (a, b) = (owner("a")?, owner("b")?);
    let term = led(&acquire(env.store(), &name, &a).await?, "a's acquisition")?;
    let expires_at = env.now() + TERM;
    env.advance(TERM - TICK);
    let peer = env.peer().await?;
    let told = acquire(&*peer, &name, &b).await?;
    ensure_eq(
        told,
        LeaderStatus::Follower {
            holder: a,
            term,
            expires_at,
        },
        "b's acquisition one tick before a's lease ends",
    )?;
    pass()
}

async fn the_holder_extends_its_lease_keeping_its_term<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let name = leader("maintenance")?;
    let (a, b) = (owner("a")?, owner("b")?);
    let term = led(&acquire(env.store(), &name, &a).await?, "a's acquisition")?;
    env.advance(Duration::from_secs(10));
    let told = acquire(env.store(), &name, &a).await?;
    ensure_eq(
        told,
        LeaderStatus::Leader {
            term,
            expires_at: env.now() + TERM,
        },
        "a's acquisition while it holds the lease",
    )?;
    env.advance(Duration::from_secs(10));
    follows(
        &acquire(env.store(), &name, &b).await?,
        &a,
        term,
        "b's acquisition inside the extension",
    )?;
    pass()
}

async fn after_expiry_another_takes_over_with_a_greater_term<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let name = leader("maintenance")?;
    let (a, b) = (owner("a")?, owner("b")?);
    let first = led(&acquire(env.store(), &name, &a).await?, "a's acquisition")?;
    env.advance(TERM);
    let peer = env.peer().await?;
    let second = led(
        &acquire(&*peer, &name, &b).await?,
        "b's acquisition at a's expiry",
    )?;
    ensure(
        second > first,
        format!("b's term to be greater than a's {first}"),
        second,
    )?;
    follows(
        &acquire(env.store(), &name, &a).await?,
        &b,
        second,
        "a's acquisition after b took over",
    )?;
    ensure_eq(
        resign(env.store(), &name, &a).await?,
        false,
        "a's resign of a lease it lost",
    )?;
    follows(
        &acquire(env.store(), &name, &owner("c")?).await?,
        &b,
        second,
        "c's acquisition",
    )?;
    pass()
}

async fn a_holder_returning_after_expiry_gets_a_greater_term<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let name = leader("maintenance")?;
    let a = owner("a")?;
    let first = led(&acquire(env.store(), &name, &a).await?, "a's acquisition")?;
    env.advance(TERM);
    let second = led(
        &acquire(env.store(), &name, &a).await?,
        "a's acquisition after expiry",
    )?;
    ensure(
        second > first,
        format!("the new term to be greater than {first}"),
        second,
    )?;
    pass()
}

async fn a_resigned_lease_is_free_and_the_next_term_is_greater<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let name = leader("maintenance")?;
    let (a, b) = (owner("a")?, owner("b")?);
    let first = led(&acquire(env.store(), &name, &a).await?, "a's acquisition")?;
    ensure_eq(
        resign(env.store(), &name, &b).await?,
        false,
        "b's resign of a's lease",
    )?;
    follows(
        &acquire(env.store(), &name, &b).await?,
        &a,
        first,
        "b's acquisition after its refused resign",
    )?;
    ensure_eq(resign(env.store(), &name, &a).await?, true, "a's resign")?;
    let second = led(
        &acquire(env.store(), &name, &b).await?,
        "b's acquisition after a resigned",
    )?;
    ensure(
        second > first,
        format!("b's term to be greater than a's {first}"),
        second,
    )?;
    ensure_eq(
        resign(env.store(), &name, &a).await?,
        false,
        "a's second resign",
    )?;
    pass()
}

async fn terms_strictly_increase_over_many_handovers<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let name = leader("maintenance")?;
    let candidates = [owner("a")?, owner("b")?, owner("c")?];
    let handles = env.handles(2).await?;
    let mut last = 0;
    for round in 0..9usize {
        let who = &candidates[round % 3];
        let store = &handles[round % 2];
        let term = led(
            &acquire(&**store, &name, who).await?,
            "a candidate's acquisition of a free lease",
        )?;
        ensure(
            term > last,
            format!("term of handover {round} to be greater than {last}"),
            term,
        )?;
        last = term;
        if round % 2 == 0 {
            ensure_eq(
                resign(&**store, &name, who).await?,
                true,
                "the holder's resign",
            )?;
        } else {
            env.advance(TERM);
        }
    }
    pass()
}

async fn leader_names_are_independent<H: Harness>(env: Env<'_, H>) -> CaseResult {
    let (x, y) = (leader("maintenance")?, leader("reports")?);
    let (a, b) = (owner("a")?, owner("b")?);
    led(
        &acquire(env.store(), &x, &a).await?,
        "a's acquisition of maintenance",
    )?;
    led(
        &acquire(env.store(), &y, &b).await?,
        "b's acquisition of reports while a holds maintenance",
    )?;
    pass()
}

async fn sixteen_candidates_racing_elect_exactly_one_leader<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let handles = env.handles(HANDLES).await?;
    for round in 0..4 {
        let name = leader(&format!("race-{round}"))?;
        let told = race(&handles, RACERS, |i, store| {
            let name = name.clone();
            async move {
                let me = owner(&format!("candidate-{i}"))?;
                let status = retrying("leader_acquire", || {
                    store.leader_acquire(LeaderParams::new(name.clone(), me.clone(), TERM))
                })
                .await?;
                Ok((me, status))
            }
        })
        .await?;
        let leaders: Vec<(&OwnerId, u64)> = told
            .iter()
            .filter_map(|(me, s)| match s {
                LeaderStatus::Leader { term, .. } => Some((me, *term)),
                LeaderStatus::Follower { .. } => None,
            })
            .collect();
        ensure(
            leaders.len() == 1,
            format!("exactly one of {RACERS} candidates to be told Leader (round {round})"),
            &leaders,
        )?;
        let (winner, term) = leaders[0];
        for (me, status) in &told {
            if me != winner {
                follows(status, winner, term, &format!("{me}'s answer"))?;
            }
        }
    }
    pass()
}

async fn an_unreachable_store_is_an_error_never_a_follower<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let down = match env.unreachable().await? {
        Unreachable::Store(down) => down,
        Unreachable::NotOffered { reason } => {
            return Ok(Verdict::DidNotApply {
                reason: format!("the harness offers no unreachable store: {reason}"),
            })
        }
    };
    let name = leader("maintenance")?;
    let told = down
        .leader_acquire(LeaderParams::new(name, owner("a")?, TERM))
        .await;
    expect_unavailable(told, "leader_acquire")?;
    pass()
}

async fn reading_the_leader_answers_the_live_holder_its_term_and_expiry<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let (name, other) = (leader("maintenance")?, leader("reports")?);
    let a = owner("a")?;
    ensure_eq(
        read(env.store(), &name).await?,
        None,
        "the leader of a lease nobody ever held",
    )?;
    let term = led(&acquire(env.store(), &name, &a).await?, "a's acquisition")?;
    let expires_at = env.now() + TERM;
    let peer = env.peer().await?;
    ensure_eq(
        read(&*peer, &name).await?,
        Some(LeaderInfo::new(a.clone(), term, expires_at)),
        "the leader read through a peer right after a's acquisition",
    )?;
    env.advance(TERM - TICK);
    ensure_eq(
        read(env.store(), &name).await?,
        Some(LeaderInfo::new(a.clone(), term, expires_at)),
        "the leader one tick before a's lease ends",
    )?;
    ensure_eq(
        read(env.store(), &other).await?,
        None,
        "the leader of another name",
    )?;
    // Extended by its holder: the new expiry, the same term.
    ensure_eq(
        acquire(env.store(), &name, &a).await?,
        LeaderStatus::Leader {
            term,
            expires_at: env.now() + TERM,
        },
        "a's extension",
    )?;
    ensure_eq(
        read(env.store(), &name).await?,
        Some(LeaderInfo::new(a, term, env.now() + TERM)),
        "the leader after a extended its lease",
    )?;
    pass()
}

async fn reading_the_leader_never_changes_its_holder_or_term<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    // Two names with the same history, except that one is read many times while it is
    // free and while it is held: the next holders' terms must have gone up alike.
    let (control, read_one) = (leader("control")?, leader("read")?);
    let (a, b) = (owner("a")?, owner("b")?);
    let peer = env.peer().await?;
    let c0 = led(
        &acquire(env.store(), &control, &a).await?,
        "a's acquisition of control",
    )?;
    let r0 = led(
        &acquire(env.store(), &read_one, &a).await?,
        "a's acquisition of read",
    )?;
    let expires_at = env.now() + TERM;
    for _ in 0..3 {
        ensure_eq(
            read(&*peer, &read_one).await?,
            Some(LeaderInfo::new(a.clone(), r0, expires_at)),
            "the leader read while a holds it",
        )?;
    }
    follows(
        &acquire(env.store(), &read_one, &b).await?,
        &a,
        r0,
        "b's acquisition after the reads",
    )?;
    ensure_eq(
        resign(env.store(), &control, &a).await?,
        true,
        "a's resign of control",
    )?;
    ensure_eq(
        resign(env.store(), &read_one, &a).await?,
        true,
        "a's resign of read",
    )?;
    for _ in 0..3 {
        ensure_eq(
            read(&*peer, &read_one).await?,
            None,
            "the leader read while nobody holds it",
        )?;
    }
    let c1 = led(
        &acquire(env.store(), &control, &b).await?,
        "b's acquisition of control",
    )?;
    let r1 = led(
        &acquire(env.store(), &read_one, &b).await?,
        "b's acquisition of read",
    )?;
    ensure_eq(
        r1.checked_sub(r0),
        c1.checked_sub(c0),
        &format!(
            "the rise of the term of the lease read six times (terms {r0} then {r1}) to be \
             the rise of an unread lease with the same history (terms {c0} then {c1})"
        ),
    )?;
    ensure_eq(
        read(env.store(), &read_one).await?,
        Some(LeaderInfo::new(b, r1, env.now() + TERM)),
        "the leader after b took it",
    )?;
    pass()
}

async fn an_expired_or_resigned_lease_reads_as_no_leader<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let name = leader("maintenance")?;
    let (a, b) = (owner("a")?, owner("b")?);
    let first = led(&acquire(env.store(), &name, &a).await?, "a's acquisition")?;
    env.advance(TERM);
    ensure_eq(
        read(env.store(), &name).await?,
        None,
        "the leader at the instant a's lease ends",
    )?;
    env.advance(Duration::from_secs(60));
    ensure_eq(
        read(env.store(), &name).await?,
        None,
        "the leader a minute after a's lease ended",
    )?;
    let second = led(&acquire(env.store(), &name, &b).await?, "b's acquisition")?;
    ensure(
        second > first,
        format!("b's term to be greater than a's {first}"),
        second,
    )?;
    ensure_eq(resign(env.store(), &name, &b).await?, true, "b's resign")?;
    ensure_eq(
        read(env.store(), &name).await?,
        None,
        "the leader right after b resigned",
    )?;
    pass()
}

async fn reading_the_leader_of_an_unreachable_store_is_an_error_never_none<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    let down = match env.unreachable().await? {
        Unreachable::Store(down) => down,
        Unreachable::NotOffered { reason } => {
            return Ok(Verdict::DidNotApply {
                reason: format!("the harness offers no unreachable store: {reason}"),
            })
        }
    };
    let told = down.leader_get(&leader("maintenance")?).await;
    expect_unavailable(told, "leader_get")?;
    pass()
}

async fn the_leader_lease_duration_decides_when_another_may_lead<H: Harness>(
    env: Env<'_, H>,
) -> CaseResult {
    for (n, lease_for) in [Duration::from_secs(4), LONG].into_iter().enumerate() {
        let name = leader(&format!("varied-{n}"))?;
        let (a, b) = (owner("a")?, owner("b")?);
        let first = env
            .store()
            .leader_acquire(LeaderParams::new(name.clone(), a.clone(), lease_for))
            .await
            .or_fail("leader_acquire")?;
        let LeaderStatus::Leader { term, expires_at } = first else {
            return Err(Failure::new(
                format!("a's acquisition of a free lease for {lease_for:?} to lead"),
                format!("{first:?}"),
            ));
        };
        ensure_eq(
            expires_at,
            env.now() + lease_for,
            &format!("the expiry of a leader lease of {lease_for:?}"),
        )?;
        env.advance(lease_for - TICK);
        let early = env
            .store()
            .leader_acquire(LeaderParams::new(name.clone(), b.clone(), LEASE))
            .await
            .or_fail("leader_acquire")?;
        ensure(
            matches!(&early, LeaderStatus::Follower { holder, .. } if *holder == a),
            format!("b to follow a a tick before a's lease of {lease_for:?} ends"),
            &early,
        )?;
        env.advance(TICK);
        let late = env
            .store()
            .leader_acquire(LeaderParams::new(name, b, LEASE))
            .await
            .or_fail("leader_acquire")?;
        ensure(
            matches!(late, LeaderStatus::Leader { term: t, .. } if t > term),
            format!(
                "b to lead with a greater term than {term} once a's lease of {lease_for:?} ended"
            ),
            &late,
        )?;
    }
    pass()
}
