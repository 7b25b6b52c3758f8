use super::*;
use std::collections::{BTreeSet, HashMap};
use tenure_core::partition::{key_hash, takes};

fn who(name: &str) -> OwnerId {
    OwnerId::new(name).unwrap()
}

fn pclaim(name: &str, limit: u32) -> ClaimParams {
    ClaimParams::new(q(), who(name), limit, LEASE).partitioned(Partitioning::default())
}

async fn beat(store: &PgStore, name: &str) {
    store
        .instance_heartbeat(HeartbeatParams::new(who(name)))
        .await
        .unwrap();
}

/// Whether `name` among `all` (ids) takes the unpinned item with this stream and id.
fn in_share(stream: Option<&StreamKey>, id: ItemId, name: &str, all: &[&str]) -> bool {
    let rank = all.iter().filter(|o| **o < name).count() as u32;
    let p = Partitioning::default().partition_of(key_hash(stream, id));
    takes(p, rank, all.len() as u32)
}

/// The first stream key `prefix-N` for which `pick` holds.
fn stream_where(prefix: &str, pick: impl Fn(&StreamKey) -> bool) -> StreamKey {
    (0..100_000)
        .map(|n| StreamKey::new(format!("{prefix}-{n}")).unwrap())
        .find(|s| pick(s))
        .unwrap()
}

async fn pin_of(ctx: &mut Ctx, s: &StreamKey) -> Option<String> {
    sqlx::query_scalar(&format!(
        "SELECT pinned_to FROM {}.streams WHERE stream = $1",
        ctx.schema
    ))
    .bind(s.as_str())
    .fetch_one(&mut ctx.admin)
    .await
    .unwrap()
}

/// Claims and completes until a partitioned claim comes back empty; answers what
/// was claimed.
async fn drain(store: &PgStore, name: &str) -> Vec<Lease> {
    let mut all = Vec::new();
    loop {
        let leases = store.claim(pclaim(name, 7)).await.unwrap();
        if leases.is_empty() {
            return all;
        }
        let out = store
            .complete(CompleteParams::new(
                leases.iter().map(|l| l.token).collect(),
            ))
            .await
            .unwrap();
        assert!(out.iter().all(|o| *o == TokenOutcome::Accepted));
        all.extend(leases);
    }
}

/// Two processes' worth of stores (two pools) as two instances: each takes
/// exactly its share, the shares do not overlap, and together they take
/// everything, streams included.
#[tokio::test]
async fn two_pools_as_two_instances_split_the_work_without_overlap_and_take_all_of_it() {
    let Some(ctx) = Ctx::new().await else { return };
    let peer = ctx.peer().await;
    let (a, b) = ("node-a", "node-b");
    beat(&ctx.store, b).await;
    beat(&peer, a).await;
    let mut items: Vec<NewItem> = (0..100).map(|i| NewItem::new(q(), vec![i as u8])).collect();
    for round in 0..4 {
        for s in 0..15 {
            items.push(
                NewItem::new(q(), vec![round]).stream(StreamKey::new(format!("s{s}")).unwrap()),
            );
        }
    }
    let expected: HashMap<ItemId, Option<StreamKey>> =
        items.iter().map(|i| (i.id, i.stream.clone())).collect();
    ctx.store.enqueue(EnqueueParams::new(items)).await.unwrap();
    let got_a = drain(&ctx.store, a).await;
    let got_b = drain(&peer, b).await;
    let ids_a: BTreeSet<ItemId> = got_a.iter().map(|l| l.item.id).collect();
    let ids_b: BTreeSet<ItemId> = got_b.iter().map(|l| l.item.id).collect();
    assert!(ids_a.is_disjoint(&ids_b));
    assert_eq!(
        ids_a.len() + ids_b.len(),
        expected.len(),
        "together, everything"
    );
    assert!(!ids_a.is_empty() && !ids_b.is_empty(), "both have a share");
    for (ids, name) in [(&ids_a, a), (&ids_b, b)] {
        for id in ids {
            assert!(
                in_share(expected[id].as_ref(), *id, name, &[a, b]),
                "{id} is not {name}'s"
            );
        }
    }
    let counts = ctx.store.queue_counts(&q()).await.unwrap();
    assert_eq!(counts.pending(), 0);
    peer.close().await;
    ctx.finish().await;
}

/// The pin is the stream row's `pinned_to`: set by the first partitioned claim,
/// kept when a third instance registers (whose share the stream then is), and
/// still honoured through another pool.
#[tokio::test]
async fn a_pinned_stream_stays_with_its_instance_when_a_third_registers() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let peer = ctx.peer().await;
    let (a, b, c) = ("node-a", "node-b", "node-c");
    beat(&ctx.store, a).await;
    beat(&ctx.store, b).await;
    let s = stream_where("pin", |s| {
        let id = ItemId::new();
        in_share(Some(s), id, a, &[a, b]) && in_share(Some(s), id, c, &[a, b, c])
    });
    let items: Vec<NewItem> = (0..3)
        .map(|i| NewItem::new(q(), vec![i]).stream(s.clone()))
        .collect();
    let ids: Vec<ItemId> = items.iter().map(|i| i.id).collect();
    ctx.store.enqueue(EnqueueParams::new(items)).await.unwrap();
    assert_eq!(pin_of(&mut ctx, &s).await, None, "no pin before a claim");
    // An ordinary claim pins nothing.
    let plain = ctx
        .store
        .claim(ClaimParams::new(q(), who(c), 1, LEASE))
        .await
        .unwrap();
    assert_eq!(plain[0].item.id, ids[0]);
    assert_eq!(
        pin_of(&mut ctx, &s).await,
        None,
        "an ordinary claim pins nothing"
    );
    ctx.store.release_one(plain[0].token).await.unwrap();

    let first = ctx.store.claim(pclaim(a, 10)).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].item.id, ids[0]);
    assert_eq!(pin_of(&mut ctx, &s).await.as_deref(), Some(a));
    ctx.store.complete_one(first[0].token).await.unwrap();

    beat(&peer, c).await;
    for other in [b, c] {
        let took = peer.claim(pclaim(other, 10)).await.unwrap();
        assert!(took.is_empty(), "{other} took {took:?}");
    }
    let next = peer.claim(pclaim(a, 10)).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].item.id, ids[1]);
    assert_eq!(pin_of(&mut ctx, &s).await.as_deref(), Some(a));
    peer.close().await;
    ctx.finish().await;
}

/// Eviction and deregistration clear the column itself (the claim would also
/// treat a pin to an unregistered instance as none, so the conformance suite
/// cannot tell the difference), and only for the instance that left.
#[tokio::test]
async fn eviction_and_deregistration_clear_the_instances_pins_and_no_others() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let names = ["node-a", "node-b", "node-c"];
    for n in names {
        beat(&ctx.store, n).await;
    }
    // One stream in each instance's share, each pinned by a claim of its head.
    let mut streams = Vec::new();
    for n in names {
        let s = stream_where(n, |s| in_share(Some(s), ItemId::new(), n, &names));
        ctx.store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()).stream(s.clone()))
            .await
            .unwrap();
        let got = ctx.store.claim(pclaim(n, 10)).await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(pin_of(&mut ctx, &s).await.as_deref(), Some(n));
        streams.push(s);
    }
    // node-a goes silent and is evicted; node-b deregisters.
    // (Less than a lease: node-c's own head stays running.)
    ctx.clock.advance(Duration::from_secs(11));
    beat(&ctx.store, "node-b").await;
    beat(&ctx.store, "node-c").await;
    let ev = ctx
        .store
        .instance_evict_stale(EvictParams::new(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(ev.instances, vec![who("node-a")]);
    assert_eq!(pin_of(&mut ctx, &streams[0]).await, None);
    assert_eq!(
        pin_of(&mut ctx, &streams[1]).await.as_deref(),
        Some("node-b")
    );
    ctx.store
        .instance_deregister(DeregisterParams::new(who("node-b")))
        .await
        .unwrap();
    assert_eq!(pin_of(&mut ctx, &streams[1]).await, None);
    assert_eq!(
        pin_of(&mut ctx, &streams[2]).await.as_deref(),
        Some("node-c")
    );
    // node-c, alone, takes both released heads and pins their streams.
    let got = ctx.store.claim(pclaim("node-c", 10)).await.unwrap();
    assert_eq!(got.len(), 2);
    for s in &streams {
        assert_eq!(pin_of(&mut ctx, s).await.as_deref(), Some("node-c"));
    }
    ctx.finish().await;
}

/// A pin to an instance that is not registered (left behind by a claim that
/// committed while its owner was being evicted, or by an older version's
/// eviction) counts as none: the stream goes by partition and is pinned anew.
#[tokio::test]
async fn a_pin_to_an_unregistered_instance_counts_as_none_and_is_replaced() {
    let Some(mut ctx) = Ctx::new().await else {
        return;
    };
    let (a, b) = ("node-a", "node-b");
    beat(&ctx.store, a).await;
    beat(&ctx.store, b).await;
    let s = stream_where("ghost", |s| in_share(Some(s), ItemId::new(), b, &[a, b]));
    ctx.store
        .enqueue_one(NewItem::new(q(), b"x".to_vec()).stream(s.clone()))
        .await
        .unwrap();
    sqlx::query(&format!(
        "UPDATE {}.streams SET pinned_to = 'node-gone' WHERE stream = $1",
        ctx.schema
    ))
    .bind(s.as_str())
    .execute(&mut ctx.admin)
    .await
    .unwrap();
    assert!(ctx.store.claim(pclaim(a, 10)).await.unwrap().is_empty());
    let got = ctx.store.claim(pclaim(b, 10)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(pin_of(&mut ctx, &s).await.as_deref(), Some(b));
    ctx.finish().await;
}

/// Two instances on two pools race partitioned claims over 30 streams while a
/// third registers midway (so shares move under them). No stream is ever taken
/// by two instances, every stream's pin names the one that took it, and the
/// items of a stream are taken in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_instances_never_both_take_or_pin_a_stream() {
    let Some(mut ctx) = Ctx::with(|c| c.max_connections(6)).await else {
        return;
    };
    const STREAMS: usize = 30;
    const PER: u8 = 6;
    let peer = ctx.peer().await;
    let (a, b, c) = ("node-a", "node-b", "node-c");
    beat(&ctx.store, a).await;
    beat(&ctx.store, b).await;
    let mut items = Vec::new();
    for i in 0..PER {
        for s in 0..STREAMS {
            items.push(NewItem::new(q(), vec![i]).stream(StreamKey::new(format!("r{s}")).unwrap()));
        }
    }
    let total = items.len();
    ctx.store.enqueue(EnqueueParams::new(items)).await.unwrap();
    let taken: Arc<Mutex<Vec<(String, StreamKey, u8)>>> = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (store, name) in [
        (ctx.store.clone(), a),
        (peer.clone(), b),
        (ctx.store.clone(), c),
    ] {
        let taken = taken.clone();
        tasks.push(tokio::spawn(async move {
            if name == c {
                // Joins once the others are under way.
                tokio::time::sleep(Duration::from_millis(30)).await;
                beat(&store, c).await;
            }
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut idle = 0;
            loop {
                assert!(Instant::now() < deadline, "{name} never finished");
                let leases = store.claim(pclaim(name, 4)).await.unwrap();
                if leases.is_empty() {
                    if taken.lock().unwrap().len() == total {
                        return;
                    }
                    idle += 1;
                    tokio::time::sleep(Duration::from_millis(if idle > 20 { 5 } else { 1 })).await;
                    continue;
                }
                idle = 0;
                for l in &leases {
                    taken.lock().unwrap().push((
                        name.to_owned(),
                        l.item.stream.clone().unwrap(),
                        l.item.payload[0],
                    ));
                }
                let out = store
                    .complete(CompleteParams::new(
                        leases.iter().map(|l| l.token).collect(),
                    ))
                    .await
                    .unwrap();
                assert!(out.iter().all(|o| *o == TokenOutcome::Accepted));
                tokio::task::yield_now().await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let taken = taken.lock().unwrap().clone();
    assert_eq!(taken.len(), total);
    let mut by_stream: HashMap<StreamKey, Vec<(String, u8)>> = HashMap::new();
    for (name, s, i) in taken {
        by_stream.entry(s).or_default().push((name, i));
    }
    assert_eq!(by_stream.len(), STREAMS);
    let mut takers = BTreeSet::new();
    for (s, claims) in &by_stream {
        let first = &claims[0].0;
        assert!(
            claims.iter().all(|(n, _)| n == first),
            "stream {s} taken by more than one instance: {claims:?}"
        );
        let order: Vec<u8> = claims.iter().map(|(_, i)| *i).collect();
        assert_eq!(order, (0..PER).collect::<Vec<_>>(), "stream {s} in order");
        assert_eq!(pin_of(&mut ctx, s).await.as_deref(), Some(first.as_str()));
        takers.insert(first.clone());
    }
    assert!(takers.len() >= 2, "the work was shared: {takers:?}");
    peer.close().await;
    ctx.finish().await;
}
