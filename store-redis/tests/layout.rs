//! Key layout 2 (the operator's listing indexes) on a store written before it: the
//! first operator call builds the indexes from the item hashes, so every item lists,
//! and the oldest due item's wait is counted. Key layout 3 (ready items counted by
//! their index, the pause flag beside the due bound) on a store written in layout 2:
//! a claim does not take from a queue paused there, and the counts are the index's.
//! Key layout 4 (no owner sets, an item's `s` marked) on a store written in layout 3:
//! items whose `s` has no mark keep their scope and stream through a claim and a
//! finalize, an eviction finds the owner's leases without its set, and the first
//! operator call deletes the sets. Key layout 5 (dead items sorted by when they
//! died) on a store written in layout 4: a filtered requeue takes the earliest death.
//! Key layout 6 (limit keys' candidates in sets of their own, their running items
//! beside them) on a store written in layout 5: the first claim upgrades it, keyed
//! items keep their key's limit, and an old lease's finish gives its slot back.

// Test bodies: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tenure_test_support::redis as common;

use std::time::Duration;

use tenure_core::{
    ClaimParams, CompleteParams, DeregisterParams, ItemId, ItemListParams, LeaseId, LeaseToken,
    LimitKey, LimitsParams, ListState, ManualClock, NewItem, OwnerId, PauseParams, QueueLimits,
    QueueName, ScopeKey, Store, StoreExt, StreamKey, Timestamp, TokenOutcome,
};
use tenure_redis::RedisStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_written_before_layout_2_lists_every_item_after_its_upgrade() {
    let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
    let Some((store, prefix)) = common::on_fresh_prefix("l", &clock).await else {
        return;
    };
    let q = QueueName::new("layout").unwrap();
    let mut ids: Vec<ItemId> = Vec::new();
    for i in 0..5u8 {
        ids.push(
            store
                .enqueue_one(NewItem::new(q.clone(), vec![i]))
                .await
                .unwrap()
                .id,
        );
    }
    let held = store
        .claim_one(
            q.clone(),
            OwnerId::new("w").unwrap(),
            Duration::from_secs(30),
        )
        .await
        .unwrap()
        .unwrap();
    // Back to the layout before 2: no listing indexes, no layout key.
    let client = redis::Client::open(common::url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let root = format!("{{{prefix}}}");
    let _: () = redis::cmd("DEL")
        .arg(format!("{root}:e:layout"))
        .arg(format!("{root}:y:layout"))
        .arg(format!("{root}:layout"))
        .query_async(&mut conn)
        .await
        .unwrap();
    clock.advance(Duration::from_secs(3));
    let page = store
        .item_list(ItemListParams::new(q.clone(), ListState::Ready))
        .await
        .unwrap();
    let listed: Vec<ItemId> = page.items.iter().map(|i| i.id).collect();
    assert_eq!(listed, ids[1..].to_vec(), "the ready items, oldest first");
    let running = store
        .item_list(ItemListParams::new(q.clone(), ListState::Running))
        .await
        .unwrap();
    assert_eq!(running.items.len(), 1);
    assert_eq!(running.items[0].id, held.item.id);
    let counts = store.queue_counts(&q).await.unwrap();
    assert_eq!(counts.oldest_ready_age, Some(Duration::from_secs(3)));
    let layout: String = redis::cmd("GET")
        .arg(format!("{root}:layout"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(layout, "6");
    // Cancel and claim keep the rebuilt indexes in step.
    store.cancel_one(ids[1]).await.unwrap();
    let page = store
        .item_list(ItemListParams::new(q.clone(), ListState::Ready))
        .await
        .unwrap();
    assert_eq!(page.items.len(), 3);
    forget(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_paused_in_layout_2_stays_paused_and_counts_its_index_after_the_upgrade() {
    let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
    let Some((store, prefix)) = common::on_fresh_prefix("l", &clock).await else {
        return;
    };
    let q = QueueName::new("paused").unwrap();
    let owner = OwnerId::new("w").unwrap();
    for i in 0..3u8 {
        store
            .enqueue_one(NewItem::new(q.clone(), vec![i]))
            .await
            .unwrap();
    }
    // A claim of this layout writes the queue's due bound and pause flag.
    store
        .claim_one(q.clone(), owner.clone(), Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    // Back to layout 2: its `due` bound (far ahead, so a claim of layout 2 would skip
    // recovery), a `ready` counter (wrong here, to tell it from the index), no flag
    // beside the bound, and the queue paused the way layout 2 pauses: in the paused
    // set alone.
    let client = redis::Client::open(common::url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let root = format!("{{{prefix}}}");
    let count = format!("{root}:a:paused");
    let _: () = redis::cmd("HDEL")
        .arg(&count)
        .arg("d")
        .arg("p")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&count)
        .arg("due")
        .arg("9000000000000000")
        .arg("ready")
        .arg("99")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(format!("{root}:paused"))
        .arg("paused")
        .arg("1700000000000000")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(format!("{root}:layout"))
        .arg("2")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        store
            .claim_one(q.clone(), owner.clone(), Duration::from_secs(30))
            .await
            .unwrap()
            .is_none(),
        "a claim took an item of a queue paused in layout 2"
    );
    let counts = store.queue_counts(&q).await.unwrap();
    assert_eq!((counts.ready, counts.running), (2, 1));
    assert!(counts.paused);
    let layout: String = redis::cmd("GET")
        .arg(format!("{root}:layout"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(layout, "6");
    let left: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(&count)
        .arg("due")
        .arg("ready")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, [None, None], "layout 2's fields are gone");
    // Resumed, the queue's items are claimed again.
    assert!(store
        .queue_resume(PauseParams::new(q.clone()))
        .await
        .unwrap());
    assert!(store
        .claim_one(q.clone(), owner, Duration::from_secs(30))
        .await
        .unwrap()
        .is_some());
    forget(&store).await;
}

/// Rewrites every item hash of `root` the way layout 3 wrote it (`s` of four words,
/// no mark or queue), puts `owner`'s running items in an owner set, and records
/// layout 3.
async fn back_to_layout_3(
    conn: &mut redis::aio::MultiplexedConnection,
    root: &str,
    owner: &str,
    running: &[ItemId],
) {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{root}:i:*"))
        .query_async(conn)
        .await
        .unwrap();
    assert!(!keys.is_empty());
    for key in keys {
        let s: String = redis::cmd("HGET")
            .arg(&key)
            .arg("s")
            .query_async(conn)
            .await
            .unwrap();
        let words: Vec<&str> = s.split(' ').collect();
        if words.len() == 4 {
            continue;
        }
        // Six words, and a seventh, the lease, once claimed (layout 5).
        assert!(
            words.len() == 6 || words.len() == 7,
            "a layout 5 `s` has six or seven words: {s:?}"
        );
        let _: () = redis::cmd("HSET")
            .arg(&key)
            .arg("s")
            .arg(words[..4].join(" "))
            .query_async(conn)
            .await
            .unwrap();
    }
    if !running.is_empty() {
        let _: () = redis::cmd("SADD")
            .arg(format!("{root}:o:{owner}"))
            .arg(running.iter().map(ToString::to_string).collect::<Vec<_>>())
            .query_async(conn)
            .await
            .unwrap();
    }
    let _: () = redis::cmd("SET")
        .arg(format!("{root}:layout"))
        .arg("3")
        .query_async(conn)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_written_in_layout_3_keep_their_scope_stream_and_owner_in_layout_4() {
    let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
    let Some((store, prefix)) = common::on_fresh_prefix("l", &clock).await else {
        return;
    };
    let q = QueueName::new("layout").unwrap();
    let scope = ScopeKey::new("k").unwrap();
    let stream = StreamKey::new("s").unwrap();
    let mut ids = Vec::new();
    for item in [
        NewItem::new(q.clone(), b"a".to_vec()).scope(scope.clone()),
        NewItem::new(q.clone(), b"b".to_vec()).scope(scope.clone()),
        NewItem::new(q.clone(), b"c".to_vec()).stream(stream.clone()),
        NewItem::new(q.clone(), b"d".to_vec()).stream(stream.clone()),
    ] {
        ids.push(store.enqueue_one(item).await.unwrap().id);
    }
    let client = redis::Client::open(common::url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let root = format!("{{{prefix}}}");
    for id in &ids {
        let s: String = redis::cmd("HGET")
            .arg(format!("{root}:i:{id}"))
            .arg("s")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            s.ends_with(" + layout"),
            "an item with a key is marked: {s:?}"
        );
    }
    let lease = Duration::from_secs(30);
    let w1 = OwnerId::new("w1").unwrap();
    let w2 = OwnerId::new("w2").unwrap();

    // A claim of unmarked items reads their keys: the scope is taken (G10), and the
    // leases carry the scope and the stream.
    back_to_layout_3(&mut conn, &root, "w1", &[]).await;
    let first = store
        .claim(ClaimParams::new(q.clone(), w1.clone(), 10, lease))
        .await
        .unwrap();
    let got: Vec<ItemId> = first.iter().map(|l| l.item.id).collect();
    assert_eq!(
        got,
        [ids[0], ids[2]],
        "the heads of the scope and the stream"
    );
    assert_eq!(first[0].item.scope.as_ref(), Some(&scope));
    assert_eq!(first[1].item.stream.as_ref(), Some(&stream));

    // A finalize of unmarked running items frees the scope and moves the stream on.
    // Layout 3 kept no lease ids: the tokens its code held name none (G3).
    back_to_layout_3(&mut conn, &root, "w1", &[ids[0], ids[2]]).await;
    let tokens = first
        .iter()
        .map(|l| LeaseToken::new(l.token.id, l.token.attempt, LeaseId::NONE))
        .collect();
    assert_eq!(
        store.complete(CompleteParams::new(tokens)).await.unwrap(),
        [TokenOutcome::Accepted, TokenOutcome::Accepted]
    );
    let second = store
        .claim(ClaimParams::new(q.clone(), w2.clone(), 10, lease))
        .await
        .unwrap();
    let got: Vec<ItemId> = second.iter().map(|l| l.item.id).collect();
    assert_eq!(got, [ids[1], ids[3]], "the scope freed, the stream's next");

    // An eviction finds w2's unmarked leases without an owner set of its own.
    back_to_layout_3(&mut conn, &root, "w2", &[]).await;
    let evicted = store
        .instance_deregister(DeregisterParams::new(w2.clone()))
        .await
        .unwrap();
    assert_eq!(evicted.released, 2);
    let counts = store.queue_counts(&q).await.unwrap();
    assert_eq!((counts.ready, counts.running), (2, 0));

    // The operator call above upgraded the store: layout 4, and no owner set left.
    let layout: String = redis::cmd("GET")
        .arg(format!("{root}:layout"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(layout, "6");
    let sets: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{root}:o:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(sets.is_empty(), "owner sets left: {sets:?}");
    // The released items are claimed again, their keys intact.
    let third = store
        .claim(ClaimParams::new(q.clone(), w1, 10, lease))
        .await
        .unwrap();
    assert_eq!(third.len(), 2);
    assert_eq!(third[0].item.scope.as_ref(), Some(&scope));
    assert_eq!(third[1].item.stream.as_ref(), Some(&stream));
    forget(&store).await;
}

/// Layout 5 adds the lease id to a running item's `s` (G3). An item a layout-4 claim
/// left running has none: it reads as lease 0 and finishes with the token its code
/// held, and nothing is rewritten by the upgrade. A claim after it mints a lease id,
/// and that attempt's token without it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_granted_in_layout_4_finishes_and_new_claims_are_fenced_on_their_lease_id() {
    let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
    let Some((store, prefix)) = common::on_fresh_prefix("l", &clock).await else {
        return;
    };
    let q = QueueName::new("layout").unwrap();
    let a = store
        .enqueue_one(NewItem::new(q.clone(), b"a".to_vec()))
        .await
        .unwrap();
    let b = store
        .enqueue_one(NewItem::new(q.clone(), b"b".to_vec()))
        .await
        .unwrap();
    let lease = Duration::from_secs(30);
    let old = store
        .claim_one(q.clone(), OwnerId::new("w1").unwrap(), lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(old.token.id, a.id);
    let client = redis::Client::open(common::url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let root = format!("{{{prefix}}}");
    let key = format!("{root}:i:{}", a.id);
    let s: String = redis::cmd("HGET")
        .arg(&key)
        .arg("s")
        .query_async(&mut conn)
        .await
        .unwrap();
    let words: Vec<&str> = s.split(' ').collect();
    assert_eq!(
        words.len(),
        7,
        "a running item's `s` ends with its lease: {s:?}"
    );
    assert_eq!(words[6], old.token.lease.to_string());
    // Back to layout 4: the lease word goes.
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("s")
        .arg(words[..6].join(" "))
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(format!("{root}:layout"))
        .arg("4")
        .query_async(&mut conn)
        .await
        .unwrap();
    let legacy = LeaseToken::new(a.id, old.token.attempt, LeaseId::NONE);
    assert_eq!(store.item_get(a.id).await.unwrap().unwrap().token(), legacy);
    let fresh = store
        .claim_one(q.clone(), OwnerId::new("w2").unwrap(), lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(fresh.token.id, b.id);
    let unleased = LeaseToken::new(b.id, fresh.token.attempt, LeaseId::NONE);
    assert_eq!(
        store
            .complete(CompleteParams::new(vec![unleased, legacy]))
            .await
            .unwrap(),
        [TokenOutcome::LeaseLost, TokenOutcome::Accepted]
    );
    assert_eq!(
        store
            .complete(CompleteParams::new(vec![fresh.token]))
            .await
            .unwrap(),
        [TokenOutcome::Accepted]
    );
    // An operator call records layout 5.
    store.queue_counts(&q).await.unwrap();
    let layout: String = redis::cmd("GET")
        .arg(format!("{root}:layout"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(layout, "6");
    forget(&store).await;
}

/// Deletes every key of the case's prefix on the shared server, and checks that the
/// prefix is then unused.
async fn forget(store: &RedisStore) {
    assert!(store.prefix_in_use().await.unwrap());
    assert!(store.remove_prefix().await.unwrap() > 0);
    assert!(!store.prefix_in_use().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_items_written_in_layout_4_are_taken_earliest_death_first_after_the_upgrade() {
    let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
    let Some((store, prefix)) = common::on_fresh_prefix("l", &clock).await else {
        return;
    };
    let q = QueueName::new("layout").unwrap();
    let owner = OwnerId::new("w1").unwrap();
    let mut ids = Vec::new();
    for p in ["a", "b", "c"] {
        ids.push(
            store
                .enqueue_one(NewItem::new(q.clone(), p.as_bytes().to_vec()))
                .await
                .unwrap()
                .id,
        );
    }
    let leases = store
        .claim(ClaimParams::new(
            q.clone(),
            owner,
            3,
            Duration::from_secs(30),
        ))
        .await
        .unwrap();
    // Dead in the order c, a, b, a second apart.
    for id in [ids[2], ids[0], ids[1]] {
        clock.advance(Duration::from_secs(1));
        let l = leases.iter().find(|l| l.token.id == id).unwrap();
        store
            .fail_one(tenure_core::Failure::permanent(l.token, "gone"))
            .await
            .unwrap();
    }
    // Back to layout 4: the dead items in a plain set, no sorted one.
    let client = redis::Client::open(common::url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let root = format!("{{{prefix}}}");
    let _: () = redis::cmd("DEL")
        .arg(format!("{root}:z:layout"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("SADD")
        .arg(format!("{root}:x:layout"))
        .arg(ids.iter().map(ToString::to_string).collect::<Vec<_>>())
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(format!("{root}:layout"))
        .arg("4")
        .query_async(&mut conn)
        .await
        .unwrap();
    // The first filtered requeue upgrades and takes the earliest death: c.
    let n = store
        .dead_requeue(tenure_core::RequeueParams::matching(
            tenure_core::DeadFilter::new(q.clone()).limit(1),
        ))
        .await
        .unwrap();
    assert_eq!(n, 1);
    let states: Vec<_> = {
        let mut v = Vec::new();
        for id in &ids {
            v.push(store.item_get(*id).await.unwrap().unwrap().state);
        }
        v
    };
    use tenure_core::ItemState::{Dead, Ready};
    assert_eq!(states, [Dead, Dead, Ready]);
    let layout: String = redis::cmd("GET")
        .arg(format!("{root}:layout"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(layout, "6");
    let old: bool = redis::cmd("EXISTS")
        .arg(format!("{root}:x:layout"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!old, "layout 4's dead set is gone");
    assert_eq!(store.queue_counts(&q).await.unwrap().dead, 2);
    forget(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_items_written_in_layout_5_keep_their_key_limit_in_layout_6() {
    let clock = ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000));
    let Some((store, prefix)) = common::on_fresh_prefix("l", &clock).await else {
        return;
    };
    let q = QueueName::new("layout").unwrap();
    store
        .limits_set(LimitsParams::new(q.clone(), QueueLimits::new().per_key(2)))
        .await
        .unwrap();
    let (a, b) = (LimitKey::new("a").unwrap(), LimitKey::new("b").unwrap());
    let mut of_a = Vec::new();
    for i in 0..4u8 {
        let item = NewItem::new(q.clone(), vec![i]).limit_key(a.clone());
        of_a.push(store.enqueue_one(item).await.unwrap().id);
    }
    let of_b = store
        .enqueue_one(NewItem::new(q.clone(), b"b".to_vec()).limit_key(b.clone()))
        .await
        .unwrap()
        .id;
    let lease = Duration::from_secs(30);
    let w = OwnerId::new("w").unwrap();
    let held = store
        .claim_one(q.clone(), w.clone(), lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held.token.id, of_a[0]);
    // Back to layout 5: every keyed candidate in `ready`, no key sets, and the running
    // item in no key's running set, its `s` unmarked (a limit key set no mark).
    let client = redis::Client::open(common::url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let root = format!("{{{prefix}}}");
    for key in ["a", "b"] {
        let members: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(format!("{root}:kr:layout\0{key}"))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await
            .unwrap();
        for (m, score) in members {
            let _: () = redis::cmd("ZADD")
                .arg(format!("{root}:r:layout"))
                .arg(score)
                .arg(m)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    }
    let _: () = redis::cmd("DEL")
        .arg(format!("{root}:kr:layout\0a"))
        .arg(format!("{root}:kr:layout\0b"))
        .arg(format!("{root}:kq:layout"))
        .arg(format!("{root}:kl:layout\0a"))
        .arg(format!("{root}:pk:layout"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let key = format!("{root}:i:{}", held.token.id);
    let s: String = redis::cmd("HGET")
        .arg(&key)
        .arg("s")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut words: Vec<&str> = s.split(' ').collect();
    assert_eq!(words[4], "+", "a limit key marks the item: {s:?}");
    words[4] = "-";
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("s")
        .arg(words.join(" "))
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(format!("{root}:layout"))
        .arg("5")
        .query_async(&mut conn)
        .await
        .unwrap();
    // The claim upgrades first: key a has the old lease running, so one more of it
    // starts, beside b's item.
    let got = store
        .claim(ClaimParams::new(q.clone(), w.clone(), 10, lease))
        .await
        .unwrap();
    let ids: Vec<ItemId> = got.iter().map(|l| l.token.id).collect();
    assert_eq!(
        ids,
        [of_a[1], of_b],
        "one more of a (its limit is 2), and b"
    );
    let layout: String = redis::cmd("GET")
        .arg(format!("{root}:layout"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(layout, "6");
    assert!(store
        .claim(ClaimParams::new(q.clone(), w.clone(), 10, lease))
        .await
        .unwrap()
        .is_empty());
    // The old lease's finish gives its slot back (it is in its key's running set now).
    assert_eq!(
        store
            .complete(CompleteParams::new(vec![held.token]))
            .await
            .unwrap(),
        [TokenOutcome::Accepted]
    );
    let next = store
        .claim(ClaimParams::new(q.clone(), w, 10, lease))
        .await
        .unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].token.id, of_a[2]);
    forget(&store).await;
}
