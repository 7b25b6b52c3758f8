//! A claim skips recovery and promotion while its queue's `due` bound (the earliest
//! lease expiry or scheduled run_at the queue may hold) is in the future. Each test
//! drives one way the bound must come down, on a manual clock, and fails if that
//! write path left it where it was: the item would not be claimable when it should.

// Test bodies: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tenure_test_support::redis as common;

use std::time::Duration;

use tenure_core::{
    Clock, FailOutcome, Failure, ManualClock, NewItem, OwnerId, QueueName, StoreExt, Timestamp,
};
use tenure_redis::RedisStore;

/// A store on its own prefix and a manual clock, or `None` when Redis is not there
/// (and not required).
async fn open() -> Option<(RedisStore, ManualClock, QueueName)> {
    let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
    let (store, _) = common::on_fresh_prefix("due", &clock).await?;
    Some((store, clock, QueueName::new("q").unwrap()))
}

fn owner() -> OwnerId {
    OwnerId::new("w").unwrap()
}

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test]
async fn an_item_scheduled_after_a_claim_found_nothing_is_claimed_once_due() {
    let Some((store, clock, q)) = open().await else {
        return;
    };
    // The empty claim records that the queue holds nothing to wait for.
    assert!(store
        .claim_one(q.clone(), owner(), SECOND * 30)
        .await
        .unwrap()
        .is_none());
    store
        .enqueue_one(NewItem::new(q.clone(), b"x".to_vec()).delay(SECOND * 10))
        .await
        .unwrap();
    assert!(store
        .claim_one(q.clone(), owner(), SECOND * 30)
        .await
        .unwrap()
        .is_none());
    clock.advance(SECOND * 11);
    let lease = store
        .claim_one(q.clone(), owner(), SECOND * 30)
        .await
        .unwrap();
    assert!(
        lease.is_some(),
        "the scheduled item came due and was not claimed"
    );
    store.remove_prefix().await.unwrap();
}

#[tokio::test]
async fn a_lease_renewed_shorter_is_recovered_at_its_new_expiry() {
    let Some((store, clock, q)) = open().await else {
        return;
    };
    let id = store
        .enqueue_one(NewItem::new(q.clone(), b"x".to_vec()))
        .await
        .unwrap()
        .id;
    let first = store
        .claim_one(q.clone(), owner(), SECOND * 60)
        .await
        .unwrap()
        .unwrap();
    store.renew_one(first.token, SECOND * 5).await.unwrap();
    clock.advance(SECOND * 6);
    let again = store
        .claim_one(q.clone(), owner(), SECOND * 60)
        .await
        .unwrap()
        .expect("the lease renewed to 5 s expired and was not recovered");
    assert_eq!(
        (again.token.id, again.token.attempt),
        (id, first.token.attempt + 1)
    );
    store.remove_prefix().await.unwrap();
}

#[tokio::test]
async fn a_shorter_lease_claimed_after_a_longer_one_is_recovered_at_its_expiry() {
    let Some((store, clock, q)) = open().await else {
        return;
    };
    for _ in 0..2 {
        store
            .enqueue_one(NewItem::new(q.clone(), b"x".to_vec()))
            .await
            .unwrap();
    }
    let long = store
        .claim_one(q.clone(), owner(), SECOND * 60)
        .await
        .unwrap()
        .unwrap();
    let short = store
        .claim_one(q.clone(), owner(), SECOND * 5)
        .await
        .unwrap()
        .unwrap();
    clock.advance(SECOND * 6);
    let again = store
        .claim_one(q.clone(), owner(), SECOND * 60)
        .await
        .unwrap()
        .expect("the 5 s lease expired and was not recovered");
    assert_eq!(again.token.id, short.token.id);
    assert_ne!(again.token.id, long.token.id);
    store.remove_prefix().await.unwrap();
}

#[tokio::test]
async fn a_retry_is_claimed_once_its_delay_has_passed() {
    let Some((store, clock, q)) = open().await else {
        return;
    };
    store
        .enqueue_one(NewItem::new(q.clone(), b"x".to_vec()))
        .await
        .unwrap();
    let lease = store
        .claim_one(q.clone(), owner(), SECOND * 30)
        .await
        .unwrap()
        .unwrap();
    let outcome = store
        .fail_one(Failure::retry_after(lease.token, SECOND, "boom"))
        .await
        .unwrap();
    assert!(
        matches!(outcome, FailOutcome::Retrying { .. }),
        "{outcome:?}"
    );
    assert!(store
        .claim_one(q.clone(), owner(), SECOND * 30)
        .await
        .unwrap()
        .is_none());
    clock.advance(SECOND * 2);
    let retry = store
        .claim_one(q.clone(), owner(), SECOND * 30)
        .await
        .unwrap()
        .expect("the retry came due and was not claimed");
    assert_eq!(retry.token.attempt, lease.token.attempt + 1);
    store.remove_prefix().await.unwrap();
}

/// An item an enqueue put in `ready` at its own clock reading is claimable by a claim
/// that reached the server after it with an earlier reading (another process's clock, or
/// this process's on another connection): the claim takes it and answers it, as the
/// server ordered them, instead of leasing it to nobody until the lease runs out.
#[tokio::test]
async fn a_claim_whose_clock_reads_before_the_enqueue_it_follows_takes_the_item() {
    let Some((claimer, clock, q)) = open().await else {
        return;
    };
    let ahead = ManualClock::new(clock.now() + SECOND);
    let producer = common::on_shared_server(
        tenure_redis::RedisConfig::new(common::url())
            .prefix(claimer.prefix())
            .clock(ahead)
            .listen(false),
    )
    .await
    .unwrap();
    let id = producer
        .enqueue_one(NewItem::new(q.clone(), b"x".to_vec()))
        .await
        .unwrap()
        .id;
    let lease = claimer
        .claim_one(q.clone(), owner(), SECOND * 30)
        .await
        .unwrap()
        .expect("the item the enqueue made ready");
    assert_eq!(lease.item.id, id);
    assert_eq!(lease.item.run_at, clock.now() + SECOND, "run_at is kept");
    assert_eq!(lease.expires_at, clock.now() + SECOND * 30);
    claimer.complete_one(lease.token).await.unwrap();
}
