//! Queue limits beyond the shared suite: the worker's hint.

use super::*;

/// The worker's hint (G16, G17): after a claim that took the one start a rate allows,
/// the next start is one period away; under a concurrency limit, the running lease's
/// expiry gives a slot back; with no limits, nothing waits on time.
#[tokio::test]
async fn limits_wait_answers_the_next_start_and_the_next_expiry() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let store = open(&db(&dir), &c).await;
    assert_eq!(store.limits_wait(&[q()]).await.unwrap(), None);
    let k = tenure_core::LimitKey::new("k").unwrap();
    store
        .limits_set(tenure_core::LimitsParams::new(
            q(),
            tenure_core::QueueLimits::new()
                .key_rate(tenure_core::Rate::new(1, Duration::from_secs(60))),
        ))
        .await
        .unwrap();
    store
        .enqueue(EnqueueParams::new(vec![
            NewItem::new(q(), b"a".to_vec()).limit_key(k.clone()),
            NewItem::new(q(), b"b".to_vec()).limit_key(k.clone()),
        ]))
        .await
        .unwrap();
    let first = store.claim_one(q(), me(1), LEASE).await.unwrap().unwrap();
    assert!(store.claim_one(q(), me(1), LEASE).await.unwrap().is_none());
    c.advance(Duration::from_secs(10));
    assert_eq!(
        store.limits_wait(&[q()]).await.unwrap(),
        Some(Duration::from_secs(50))
    );
    store.complete_one(first.token).await.unwrap();
    store
        .limits_set(tenure_core::LimitsParams::new(
            q(),
            tenure_core::QueueLimits::new().per_key(1),
        ))
        .await
        .unwrap();
    let held = store.claim_one(q(), me(2), LEASE).await.unwrap().unwrap();
    assert_eq!(
        store.limits_wait(&[q()]).await.unwrap(),
        Some(LEASE),
        "the running lease's expiry"
    );
    store.complete_one(held.token).await.unwrap();
}
