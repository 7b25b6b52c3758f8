//! Quick end-to-end pass over every operation.
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used)]

use std::time::Duration;
use tenure_test_support::postgres as common;

use tenure_core::*;

const LEASE: Duration = Duration::from_secs(30);

fn q() -> QueueName {
    QueueName::new("q").unwrap()
}
fn me() -> OwnerId {
    OwnerId::new("w1").unwrap()
}

#[tokio::test]
async fn every_operation_round_trips() {
    let Some(ctx) = common::Ctx::new().await else {
        return;
    };
    let s = &ctx.store;
    let a = s
        .enqueue_one(NewItem::new(q(), b"a".to_vec()))
        .await
        .unwrap();
    let b = s
        .enqueue_one(NewItem::new(q(), b"b".to_vec()).stream(StreamKey::new("s").unwrap()))
        .await
        .unwrap();
    let c = s
        .enqueue_one(NewItem::new(q(), b"c".to_vec()).stream(StreamKey::new("s").unwrap()))
        .await
        .unwrap();
    let d = s
        .enqueue_one(NewItem::new(q(), b"d".to_vec()).dedup_key(DedupKey::new("k").unwrap()))
        .await
        .unwrap();
    let d2 = s
        .enqueue_one(NewItem::new(q(), b"d".to_vec()).dedup_key(DedupKey::new("k").unwrap()))
        .await
        .unwrap();
    assert!(d2.duplicate);
    assert_eq!(d2.id, d.id);
    let leases = s
        .claim(ClaimParams::new(q(), me(), 10, LEASE))
        .await
        .unwrap();
    let ids: Vec<ItemId> = leases.iter().map(|l| l.item.id).collect();
    assert_eq!(ids, vec![a.id, b.id, d.id], "c waits behind b");
    let out = s
        .renew(RenewParams::new(
            leases.iter().map(|l| l.token).collect(),
            LEASE,
        ))
        .await
        .unwrap();
    assert!(out
        .iter()
        .all(|o| matches!(o, RenewOutcome::Renewed { renewals: 1, .. })));
    let out = s
        .complete(CompleteParams::new(
            leases.iter().map(|l| l.token).collect(),
        ))
        .await
        .unwrap();
    assert_eq!(out, vec![TokenOutcome::Accepted; 3]);
    let again = s
        .complete(CompleteParams::new(vec![leases[0].token]))
        .await
        .unwrap();
    assert_eq!(again, vec![TokenOutcome::LeaseLost]);
    let next = s
        .claim(ClaimParams::new(q(), me(), 10, LEASE))
        .await
        .unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].item.id, c.id);
    let f = s
        .fail_one(Failure::permanent(next[0].token, "boom"))
        .await
        .unwrap();
    assert_eq!(f, FailOutcome::Dead);
    let counts = s.queue_counts(&q()).await.unwrap();
    assert_eq!(counts.dead, 1);
    assert_eq!(
        s.dead_requeue(RequeueParams::new(vec![c.id]))
            .await
            .unwrap(),
        1
    );
    ctx.clock.advance(Duration::from_secs(1));
    let l = s.claim_one(q(), me(), LEASE).await.unwrap().unwrap();
    assert_eq!(l.token.attempt, 2);
    ctx.clock.advance(LEASE);
    let l2 = s.claim_one(q(), me(), LEASE).await.unwrap().unwrap();
    assert_eq!(l2.token.attempt, 3, "expired lease recovered by the claim");
    assert_eq!(l2.item.stalls, 1);
    assert!(s.complete_one(l.token).await.is_err());
    s.release_one(l2.token).await.unwrap();
    s.instance_heartbeat(HeartbeatParams::new(me()))
        .await
        .unwrap();
    assert_eq!(s.instance_list().await.unwrap().len(), 1);
    let name = LeaderName::new("m").unwrap();
    let st = s
        .leader_acquire(LeaderParams::new(name.clone(), me(), LEASE))
        .await
        .unwrap();
    assert!(matches!(st, LeaderStatus::Leader { term: 1, .. }));
    let other = OwnerId::new("w2").unwrap();
    let st = s
        .leader_acquire(LeaderParams::new(name.clone(), other.clone(), LEASE))
        .await
        .unwrap();
    assert!(matches!(st, LeaderStatus::Follower { term: 1, .. }));
    assert!(s
        .leader_resign(LeaderParams::new(name.clone(), me(), LEASE))
        .await
        .unwrap());
    let st = s
        .leader_acquire(LeaderParams::new(name, other, LEASE))
        .await
        .unwrap();
    assert!(matches!(st, LeaderStatus::Leader { term: 2, .. }));
    let p = s
        .purge(PurgeParams::new(Duration::ZERO, 100))
        .await
        .unwrap();
    assert_eq!(p.items, 0);
    ctx.finish().await;
}
