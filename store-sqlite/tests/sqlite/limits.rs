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

/// The payloads of `leases`, in claim order.
fn payloads(leases: &[tenure_core::Lease]) -> Vec<String> {
    leases
        .iter()
        .map(|l| String::from_utf8(l.item.payload.clone()).unwrap())
        .collect()
}

/// G16 with G8: a claim that passes over a saturated key holding many ready items
/// takes the key walk (`tenure_items_ready_key`), and takes exactly what the walk of
/// the ready index would: the open keys' items and the unkeyed ones in claim order,
/// each key up to its limit. The items were enqueued before the queue had limits, so
/// the unkeyed one is seen only if `limits_set` marked it.
#[tokio::test]
async fn a_claim_past_a_saturated_key_takes_the_other_items_in_order() {
    let dir = TempDir::new().unwrap();
    let c = clock();
    let store = open(&db(&dir), &c).await;
    let key = |k: &str| tenure_core::LimitKey::new(k).unwrap();
    let mut items: Vec<NewItem> = (0..150)
        .map(|_| NewItem::new(q(), b"hot".to_vec()).limit_key(key("hot")))
        .collect();
    items.push(NewItem::new(q(), b"c1".to_vec()).limit_key(key("cold1")));
    items.push(NewItem::new(q(), b"u1".to_vec()));
    items.push(NewItem::new(q(), b"c1b".to_vec()).limit_key(key("cold1")));
    items.push(NewItem::new(q(), b"c1c".to_vec()).limit_key(key("cold1")));
    items.push(NewItem::new(q(), b"c2".to_vec()).limit_key(key("cold2")));
    store.enqueue(EnqueueParams::new(items)).await.unwrap();
    store
        .limits_set(tenure_core::LimitsParams::new(
            q(),
            tenure_core::QueueLimits::new().per_key(2),
        ))
        .await
        .unwrap();
    let claim = |n: u32| store.claim(ClaimParams::new(q(), me(1), n, LEASE));
    let hot = claim(2).await.unwrap();
    assert_eq!(payloads(&hot), ["hot", "hot"]);
    let rest = claim(10).await.unwrap();
    assert_eq!(payloads(&rest), ["c1", "u1", "c1b", "c2"]);
    assert!(
        claim(10).await.unwrap().is_empty(),
        "every key is at its limit"
    );
    store.complete_one(hot[0].token).await.unwrap();
    assert_eq!(payloads(&claim(10).await.unwrap()), ["hot"]);
    store.complete_one(rest[0].token).await.unwrap();
    assert_eq!(payloads(&claim(10).await.unwrap()), ["c1c"]);
}
