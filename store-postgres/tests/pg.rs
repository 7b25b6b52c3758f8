//! PostgreSQL-specific behaviour beyond the conformance suite: faults, transactional
//! enqueue, migrations, wake-ups, the stream-head write path under concurrency and
//! the stream pins of partitioned claims.
// Helpers outside #[test] fns are test code too; clippy.toml's allowance misses them.
#![allow(clippy::unwrap_used)]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Ctx;
use tenure_core::*;
use tenure_postgres::{PgConfig, PgStore};

const LEASE: Duration = Duration::from_secs(30);

fn q() -> QueueName {
    QueueName::new("q").unwrap()
}

fn owner(n: usize) -> OwnerId {
    OwnerId::new(format!("w{n}")).unwrap()
}

mod faults {
    use super::*;

    /// Runs `call` until it succeeds, allowing a few Unavailable answers (and nothing
    /// else) while the pool replaces connections that were killed.
    async fn until_available<T, F, Fut>(mut call: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Error>>,
    {
        let mut tries = 0;
        loop {
            match call().await {
                Ok(v) => return v,
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
                    tries += 1;
                    assert!(tries <= 4, "the store did not recover: {e}");
                }
            }
        }
    }

    /// Every connection of the store is killed three times while four workers claim
    /// and complete. Calls in the window answer Unavailable (nothing else), the same
    /// store works again afterwards, and every item is finalized exactly once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn killed_connections_answer_unavailable_and_no_item_is_lost_or_finalized_twice() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        // Only this store's connections carry this name.
        let store =
            PgStore::connect(common::config(&ctx.schema, &ctx.clock).application_name(&ctx.schema))
                .await
                .unwrap();
        let total = 2_000usize;
        let mut ids = Vec::new();
        for chunk in 0..4 {
            let items: Vec<NewItem> = (0..total / 4)
                .map(|i| NewItem::new(q(), format!("{chunk}-{i}").into_bytes()))
                .collect();
            ids.extend(items.iter().map(|it| it.id));
            store.enqueue(EnqueueParams::new(items)).await.unwrap();
        }
        let queue = q();
        let accepted: Arc<Mutex<HashMap<ItemId, u32>>> = Arc::default();
        let errors = Arc::new(Mutex::new(0u32));
        let done_count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let kills = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut workers = Vec::new();
        for w in 0..4 {
            let store = store.clone();
            let accepted = accepted.clone();
            let errors = errors.clone();
            let done_count = done_count.clone();
            workers.push(tokio::spawn(async move {
                let mut empty_since: Option<Instant> = None;
                loop {
                    let leases = match store
                        .claim(ClaimParams::new(q(), owner(w), 10, LEASE))
                        .await
                    {
                        Ok(l) => l,
                        Err(e) => {
                            assert!(e.is_retryable(), "claim answered {e}");
                            *errors.lock().unwrap() += 1;
                            continue;
                        }
                    };
                    if leases.is_empty() {
                        // Claims whose answer was lost stay running until their lease
                        // expires: the controller moves the clock on.
                        let since = *empty_since.get_or_insert_with(Instant::now);
                        if done_count.load(std::sync::atomic::Ordering::SeqCst) >= total
                            || since.elapsed() > Duration::from_secs(30)
                        {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    }
                    empty_since = None;
                    let tokens: Vec<LeaseToken> = leases.iter().map(|l| l.token).collect();
                    match store.complete(CompleteParams::new(tokens.clone())).await {
                        Ok(out) => {
                            let mut acc = accepted.lock().unwrap();
                            for (t, o) in tokens.iter().zip(out) {
                                if o == TokenOutcome::Accepted {
                                    *acc.entry(t.id).or_default() += 1;
                                    done_count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                }
                            }
                        }
                        Err(e) => {
                            assert!(e.is_retryable(), "complete answered {e}");
                            *errors.lock().unwrap() += 1;
                        }
                    }
                }
            }));
        }
        let kill_sql = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                        WHERE application_name = $1 AND pid <> pg_backend_pid()";
        let deadline = Instant::now() + Duration::from_secs(60);
        for at in [300usize, 800, 1300] {
            while done_count.load(std::sync::atomic::Ordering::SeqCst) < at {
                // A worker whose assertion failed has ended: fail now, not at CI's limit.
                assert!(
                    !workers.iter().any(|w| w.is_finished()),
                    "a worker stopped before the kills"
                );
                assert!(Instant::now() < deadline, "the workers made no progress");
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            let n: i64 = sqlx::query_scalar(kill_sql)
                .bind(&ctx.schema)
                .fetch_one(&mut ctx.admin)
                .await
                .unwrap();
            assert!(n > 0, "there were connections to kill");
            kills.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        // Orphaned claims (committed, answer lost) come back once their lease expires.
        let deadline = Instant::now() + Duration::from_secs(60);
        while done_count.load(std::sync::atomic::Ordering::SeqCst) < total {
            assert!(Instant::now() < deadline, "items were lost");
            // The controller's own calls may meet a killed connection too.
            let counts = until_available(|| store.queue_counts(&queue)).await;
            if counts.ready == 0 && counts.running > 0 {
                ctx.clock.advance(LEASE);
            }
            // A complete whose answer was lost removed its items: count them as done.
            let mut gone = 0;
            let acc = accepted.lock().unwrap().clone();
            for id in &ids {
                if !acc.contains_key(id) && until_available(|| store.item_get(*id)).await.is_none()
                {
                    gone += 1;
                }
            }
            if acc.len() + gone == total {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for w in workers {
            w.await.unwrap();
        }
        let acc = accepted.lock().unwrap().clone();
        assert!(acc.values().all(|n| *n == 1), "an item was finalized twice");
        for id in &ids {
            assert!(
                until_available(|| store.item_get(*id)).await.is_none(),
                "{id} is not finished"
            );
        }
        let counts = until_available(|| store.queue_counts(&queue)).await;
        assert_eq!(counts.pending() + counts.dead, 0);
        eprintln!(
            "calls answered Unavailable during the random kills: {}",
            *errors.lock().unwrap()
        );
        // Whether a random kill lands on a call in flight is chance: a connection
        // killed while idle in the pool is often replaced before anyone uses it. So
        // one kill is made certain to hit a call: an admin transaction holds the items
        // table, a claim waits on it, and the claim's own backend is terminated.
        let mut holder = common::admin().await.unwrap();
        sqlx::raw_sql(&format!(
            "BEGIN; LOCK TABLE {}.items IN ACCESS EXCLUSIVE MODE",
            ctx.schema
        ))
        .execute(&mut holder)
        .await
        .unwrap();
        let waiting = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .claim(ClaimParams::new(q(), owner(8), 10, LEASE))
                    .await
            })
        };
        let blocked_sql = "SELECT count(*) FROM pg_stat_activity \
                           WHERE application_name = $1 AND wait_event_type = 'Lock'";
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let n: i64 = sqlx::query_scalar(blocked_sql)
                .bind(&ctx.schema)
                .fetch_one(&mut ctx.admin)
                .await
                .unwrap();
            if n > 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the claim never waited on the lock"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let n: i64 = sqlx::query_scalar(kill_sql)
            .bind(&ctx.schema)
            .fetch_one(&mut ctx.admin)
            .await
            .unwrap();
        assert!(n > 0, "the waiting claim's connection was killed");
        let err = waiting
            .await
            .unwrap()
            .expect_err("a claim whose connection was killed cannot succeed");
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        assert!(err.is_retryable());
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut holder)
            .await
            .unwrap();
        // The same store still works. Idle pooled connections killed a moment ago may
        // each answer one more Unavailable before the pool replaces them.
        let item = NewItem::new(q(), b"after".to_vec());
        let id = item.id;
        until_available(|| store.enqueue_one(item.clone())).await;
        let l = until_available(|| store.claim_one(q(), owner(9), LEASE))
            .await
            .expect("the item enqueued after the kills is claimable");
        assert_eq!(l.item.id, id);
        until_available(|| store.complete_one(l.token)).await;
        assert!(
            until_available(|| store.item_get(id)).await.is_none(),
            "the item finished"
        );
        store.close().await;
        ctx.finish().await;
    }

    #[tokio::test]
    async fn a_closed_port_answers_unavailable_quickly_and_never_follower() {
        let store = PgStore::connect(
            PgConfig::new("postgres://postgres@127.0.0.1:1/test")
                .migrate_on_connect(false)
                .listen(false)
                .acquire_timeout(Duration::from_millis(500)),
        )
        .await
        .expect("construction is lazy");
        let started = Instant::now();
        let e = store.claim_one(q(), owner(1), LEASE).await.unwrap_err();
        assert!(e.is_retryable(), "{e}");
        let e = store
            .leader_acquire(LeaderParams::new(
                LeaderName::new("m").unwrap(),
                owner(1),
                LEASE,
            ))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let e = store.migrate().await.unwrap_err();
        assert!(e.is_retryable());
    }
}

mod transactional_enqueue {
    use super::*;
    use sqlx::Connection;

    #[tokio::test]
    async fn items_enqueued_in_a_committed_transaction_are_claimable() {
        let Some(ctx) = Ctx::new().await else { return };
        let mut conn = sqlx::PgConnection::connect(&common::url()).await.unwrap();
        let mut tx = conn.begin().await.unwrap();
        let out = ctx
            .store
            .enqueue_in_tx(
                &mut tx,
                EnqueueParams::one(NewItem::new(q(), b"x".to_vec())),
            )
            .await
            .unwrap();
        assert!(
            ctx.store
                .claim_one(q(), owner(1), LEASE)
                .await
                .unwrap()
                .is_none(),
            "invisible before the commit"
        );
        tx.commit().await.unwrap();
        let l = ctx
            .store
            .claim_one(q(), owner(1), LEASE)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(l.item.id, out[0].id);
        ctx.finish().await;
    }

    #[tokio::test]
    async fn a_rolled_back_transaction_leaves_no_item_no_stream_count_and_no_dedup_key() {
        let Some(ctx) = Ctx::new().await else { return };
        let mut conn = sqlx::PgConnection::connect(&common::url()).await.unwrap();
        let key = DedupKey::new("order-1").unwrap();
        let stream = StreamKey::new("s").unwrap();
        let mut tx = conn.begin().await.unwrap();
        let out = ctx
            .store
            .enqueue_in_tx(
                &mut tx,
                EnqueueParams::one(
                    NewItem::new(q(), b"x".to_vec())
                        .dedup_key(key.clone())
                        .stream(stream.clone()),
                ),
            )
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        assert!(ctx.store.item_get(out[0].id).await.unwrap().is_none());
        let again = ctx
            .store
            .enqueue_one(
                NewItem::new(q(), b"y".to_vec())
                    .dedup_key(key)
                    .stream(stream),
            )
            .await
            .unwrap();
        assert!(!again.duplicate, "the rolled-back key was never recorded");
        let l = ctx
            .store
            .claim_one(q(), owner(1), LEASE)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(l.item.id, again.id, "the stream has no phantom head");
        ctx.finish().await;
    }

    #[tokio::test]
    async fn a_failed_enqueue_leaves_the_callers_transaction_usable() {
        let Some(ctx) = Ctx::new().await else { return };
        let mut conn = sqlx::PgConnection::connect(&common::url()).await.unwrap();
        let mut tx = conn.begin().await.unwrap();
        let first = NewItem::new(q(), b"a".to_vec());
        let id = first.id;
        ctx.store
            .enqueue_in_tx(&mut tx, EnqueueParams::one(first))
            .await
            .unwrap();
        // The same id again violates the primary key inside the savepoint.
        let dup = NewItem::new(q(), b"b".to_vec()).with_id(id);
        assert!(ctx
            .store
            .enqueue_in_tx(&mut tx, EnqueueParams::one(dup))
            .await
            .is_err());
        let n: i64 = sqlx::query_scalar("SELECT 1::int8")
            .fetch_one(&mut *tx)
            .await
            .expect("the transaction is still usable");
        assert_eq!(n, 1);
        tx.commit().await.unwrap();
        assert!(ctx.store.item_get(id).await.unwrap().is_some());
        ctx.finish().await;
    }
}

mod transactional_finalize {
    //! complete / fail / release inside the application's transaction (seed 003's
    //! ownership-verified finalize): one commit for the business row and the item.

    use super::*;
    use sqlx::{Connection, PgConnection};

    async fn business(ctx: &Ctx) -> PgConnection {
        let mut conn = PgConnection::connect(&common::url()).await.unwrap();
        sqlx::raw_sql(&format!(
            "CREATE TABLE {}.payments (item uuid NOT NULL, attempt int4 NOT NULL)",
            ctx.schema
        ))
        .execute(&mut conn)
        .await
        .unwrap();
        conn
    }

    async fn payments(ctx: &Ctx, conn: &mut PgConnection) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {}.payments", ctx.schema))
            .fetch_one(conn)
            .await
            .unwrap()
    }

    async fn pay(ctx: &Ctx, conn: &mut PgConnection, lease: &Lease) {
        sqlx::query(&format!(
            "INSERT INTO {}.payments VALUES ($1, $2)",
            ctx.schema
        ))
        .bind(lease.item.id.as_uuid())
        .bind(i32::try_from(lease.token.attempt).unwrap())
        .execute(conn)
        .await
        .unwrap();
    }

    /// One item claimed by `w1`, and a business connection.
    async fn claimed(ctx: &Ctx) -> (PgConnection, Lease) {
        ctx.store
            .enqueue_one(NewItem::new(q(), b"pay".to_vec()))
            .await
            .unwrap();
        let lease = ctx
            .store
            .claim_one(q(), owner(1), LEASE)
            .await
            .unwrap()
            .unwrap();
        (business(ctx).await, lease)
    }

    #[tokio::test]
    async fn a_committed_transaction_finishes_the_item_and_writes_the_business_row_together() {
        let Some(ctx) = Ctx::new().await else { return };
        let (mut conn, lease) = claimed(&ctx).await;
        let mut tx = conn.begin().await.unwrap();
        pay(&ctx, &mut tx, &lease).await;
        let answer = ctx
            .store
            .complete_in_tx(&mut tx, CompleteParams::new(vec![lease.token]))
            .await
            .unwrap();
        assert_eq!(answer, vec![TokenOutcome::Accepted]);
        let before = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
        assert_eq!(
            before.state,
            ItemState::Running,
            "invisible before the commit"
        );
        tx.commit().await.unwrap();
        assert_eq!(payments(&ctx, &mut conn).await, 1);
        assert!(ctx.store.item_get(lease.item.id).await.unwrap().is_none());
        assert_eq!(ctx.store.queue_counts(&q()).await.unwrap().pending(), 0);
        ctx.finish().await;
    }

    #[tokio::test]
    async fn a_rolled_back_transaction_leaves_neither_and_the_item_running_under_its_lease() {
        let Some(ctx) = Ctx::new().await else { return };
        let (mut conn, lease) = claimed(&ctx).await;
        let mut tx = conn.begin().await.unwrap();
        pay(&ctx, &mut tx, &lease).await;
        let answer = ctx
            .store
            .complete_in_tx(&mut tx, CompleteParams::new(vec![lease.token]))
            .await
            .unwrap();
        assert_eq!(answer, vec![TokenOutcome::Accepted]);
        tx.rollback().await.unwrap();
        assert_eq!(payments(&ctx, &mut conn).await, 0);
        let it = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
        assert_eq!(
            (it.state, it.attempt, it.owner.as_ref(), it.lease_expires_at),
            (
                ItemState::Running,
                lease.token.attempt,
                Some(&owner(1)),
                Some(lease.expires_at)
            ),
            "still running under the same lease"
        );
        // The same worker retries with the same token while the lease lasts.
        let mut tx = conn.begin().await.unwrap();
        pay(&ctx, &mut tx, &lease).await;
        let answer = ctx
            .store
            .complete_in_tx(&mut tx, CompleteParams::new(vec![lease.token]))
            .await
            .unwrap();
        assert_eq!(answer, vec![TokenOutcome::Accepted]);
        tx.commit().await.unwrap();
        assert_eq!(payments(&ctx, &mut conn).await, 1);
        assert!(ctx.store.item_get(lease.item.id).await.unwrap().is_none());
        ctx.finish().await;
    }

    #[tokio::test]
    async fn a_stale_token_inside_the_transaction_answers_lease_lost_and_the_rollback_leaves_the_business_table_unchanged(
    ) {
        let Some(ctx) = Ctx::new().await else { return };
        let (mut conn, stale) = claimed(&ctx).await;
        ctx.clock.advance(LEASE + Duration::from_secs(1));
        let peer = ctx.peer().await;
        let current = peer.claim_one(q(), owner(2), LEASE).await.unwrap().unwrap();
        assert_eq!(current.token.attempt, stale.token.attempt + 1);
        for op in ["complete", "fail", "release"] {
            let mut tx = conn.begin().await.unwrap();
            pay(&ctx, &mut tx, &stale).await;
            let lost = match op {
                "complete" => {
                    ctx.store
                        .complete_in_tx(&mut tx, CompleteParams::new(vec![stale.token]))
                        .await
                        .unwrap()
                        == vec![TokenOutcome::LeaseLost]
                }
                "fail" => {
                    ctx.store
                        .fail_in_tx(
                            &mut tx,
                            FailParams::one(Failure::permanent(stale.token, "declined")),
                        )
                        .await
                        .unwrap()
                        == vec![FailOutcome::LeaseLost]
                }
                _ => {
                    ctx.store
                        .release_in_tx(&mut tx, ReleaseParams::new(vec![stale.token]))
                        .await
                        .unwrap()
                        == vec![TokenOutcome::LeaseLost]
                }
            };
            assert!(lost, "{op} with a stale token answers lease lost");
            tx.rollback().await.unwrap();
            assert_eq!(
                payments(&ctx, &mut conn).await,
                0,
                "{op}: the business table is unchanged"
            );
            let it = ctx.store.item_get(stale.item.id).await.unwrap().unwrap();
            assert_eq!(
                (it.state, it.attempt, it.owner.as_ref()),
                (ItemState::Running, current.token.attempt, Some(&owner(2))),
                "{op}: the current attempt is untouched"
            );
        }
        peer.complete_one(current.token).await.unwrap();
        peer.close().await;
        ctx.finish().await;
    }

    #[tokio::test]
    async fn a_failure_and_a_release_commit_with_the_business_row() {
        let Some(ctx) = Ctx::new().await else { return };
        let (mut conn, lease) = claimed(&ctx).await;
        let mut tx = conn.begin().await.unwrap();
        pay(&ctx, &mut tx, &lease).await;
        let delay = Duration::from_secs(60);
        let answer = ctx
            .store
            .fail_in_tx(
                &mut tx,
                FailParams::one(Failure::retry_after(lease.token, delay, "gateway down")),
            )
            .await
            .unwrap();
        assert_eq!(
            answer,
            vec![FailOutcome::Retrying {
                run_at: ctx.clock.now() + delay
            }]
        );
        tx.commit().await.unwrap();
        let it = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
        assert_eq!(it.state, ItemState::Ready);
        assert_eq!(it.last_error.as_deref(), Some("gateway down"));
        assert_eq!(payments(&ctx, &mut conn).await, 1);

        ctx.clock.advance(delay);
        let again = ctx
            .store
            .claim_one(q(), owner(1), LEASE)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(again.token.attempt, 2);
        let before = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
        let mut tx = conn.begin().await.unwrap();
        pay(&ctx, &mut tx, &again).await;
        let answer = ctx
            .store
            .release_in_tx(&mut tx, ReleaseParams::new(vec![again.token]))
            .await
            .unwrap();
        assert_eq!(answer, vec![TokenOutcome::Accepted]);
        tx.commit().await.unwrap();
        let it = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
        assert_eq!(it.state, ItemState::Ready);
        assert_eq!(
            it.max_attempts,
            before.max_attempts + 1,
            "a release spends no attempt"
        );
        assert_eq!(payments(&ctx, &mut conn).await, 2);
        ctx.finish().await;
    }

    #[tokio::test]
    async fn while_the_transaction_is_open_no_peer_can_take_the_item_and_after_its_commit_there_is_nothing_to_take(
    ) {
        let Some(ctx) = Ctx::new().await else { return };
        let (mut conn, lease) = claimed(&ctx).await;
        let peer = ctx.peer().await;
        let mut tx = conn.begin().await.unwrap();
        pay(&ctx, &mut tx, &lease).await;
        let answer = ctx
            .store
            .complete_in_tx(&mut tx, CompleteParams::new(vec![lease.token]))
            .await
            .unwrap();
        assert_eq!(answer, vec![TokenOutcome::Accepted]);
        // The lease runs out before the commit; the answer still holds: the finished
        // row stays locked, and recovery and claims pass over locked rows.
        ctx.clock.advance(LEASE + Duration::from_secs(1));
        assert_eq!(
            peer.recover_expired(RecoverParams::new(100))
                .await
                .unwrap()
                .requeued,
            0
        );
        assert!(peer
            .claim_one(q(), owner(2), LEASE)
            .await
            .unwrap()
            .is_none());
        tx.commit().await.unwrap();
        assert!(peer
            .claim_one(q(), owner(2), LEASE)
            .await
            .unwrap()
            .is_none());
        assert_eq!(
            peer.recover_expired(RecoverParams::new(100))
                .await
                .unwrap()
                .requeued,
            0
        );
        assert_eq!(payments(&ctx, &mut conn).await, 1);
        peer.close().await;
        ctx.finish().await;
    }

    #[tokio::test]
    async fn completing_a_stream_head_in_a_transaction_promotes_the_next_item_at_the_commit() {
        let Some(ctx) = Ctx::new().await else { return };
        let s = StreamKey::new("order-7").unwrap();
        ctx.store
            .enqueue(EnqueueParams::new(vec![
                NewItem::new(q(), b"first".to_vec()).stream(s.clone()),
                NewItem::new(q(), b"second".to_vec()).stream(s),
            ]))
            .await
            .unwrap();
        let head = ctx
            .store
            .claim_one(q(), owner(1), LEASE)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(head.item.payload, b"first");
        let mut conn = business(&ctx).await;
        let mut tx = conn.begin().await.unwrap();
        pay(&ctx, &mut tx, &head).await;
        ctx.store
            .complete_in_tx(&mut tx, CompleteParams::new(vec![head.token]))
            .await
            .unwrap();
        assert!(
            ctx.store
                .claim_one(q(), owner(1), LEASE)
                .await
                .unwrap()
                .is_none(),
            "the next item waits for the commit"
        );
        tx.commit().await.unwrap();
        let next = ctx
            .store
            .claim_one(q(), owner(1), LEASE)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            next.item.payload, b"second",
            "G9 holds across the transaction"
        );
        ctx.finish().await;
    }

    #[tokio::test]
    async fn bad_params_answer_invalid_input_and_leave_the_callers_transaction_usable() {
        let Some(ctx) = Ctx::new().await else { return };
        let (mut conn, lease) = claimed(&ctx).await;
        let mut tx = conn.begin().await.unwrap();
        pay(&ctx, &mut tx, &lease).await;
        let e = ctx
            .store
            .complete_in_tx(&mut tx, CompleteParams::new(vec![]))
            .await
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("tokens"), "{e}");
        let e = ctx
            .store
            .fail_in_tx(&mut tx, FailParams::new(vec![]))
            .await
            .unwrap_err();
        assert!(e.invalid_field().is_some(), "{e}");
        let e = ctx
            .store
            .release_in_tx(&mut tx, ReleaseParams::new(vec![]))
            .await
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("tokens"), "{e}");
        tx.commit().await.unwrap();
        assert_eq!(
            payments(&ctx, &mut conn).await,
            1,
            "the caller's own row is kept"
        );
        let it = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
        assert_eq!(it.state, ItemState::Running, "nothing written to the item");
        ctx.finish().await;
    }

    #[tokio::test]
    async fn a_failing_finalize_leaves_the_callers_transaction_usable() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        let (mut conn, lease) = claimed(&ctx).await;
        let mut tx = conn.begin().await.unwrap();
        pay(&ctx, &mut tx, &lease).await;
        sqlx::raw_sql("SET LOCAL lock_timeout = '50ms'")
            .execute(&mut *tx)
            .await
            .unwrap();
        // Another session holds the items table: the fenced statement fails inside
        // its savepoint.
        let mut blocker = ctx.admin.begin().await.unwrap();
        sqlx::raw_sql(&format!(
            "LOCK TABLE {}.items IN ACCESS EXCLUSIVE MODE",
            ctx.schema
        ))
        .execute(&mut *blocker)
        .await
        .unwrap();
        let e = ctx
            .store
            .complete_in_tx(&mut tx, CompleteParams::new(vec![lease.token]))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("lock"), "{e}");
        blocker.rollback().await.unwrap();
        let n: i64 = sqlx::query_scalar("SELECT 1::int8")
            .fetch_one(&mut *tx)
            .await
            .expect("the transaction is still usable");
        assert_eq!(n, 1);
        tx.commit().await.unwrap();
        assert_eq!(payments(&ctx, &mut conn).await, 1);
        let it = ctx.store.item_get(lease.item.id).await.unwrap().unwrap();
        assert_eq!(
            it.state,
            ItemState::Running,
            "the failed call changed nothing"
        );
        ctx.finish().await;
    }

    #[tokio::test]
    #[allow(deprecated)]
    async fn the_former_name_enqueue_with_still_enqueues_in_the_callers_transaction() {
        let Some(ctx) = Ctx::new().await else { return };
        let mut conn = PgConnection::connect(&common::url()).await.unwrap();
        let mut tx = conn.begin().await.unwrap();
        let out = ctx
            .store
            .enqueue_with(
                &mut tx,
                EnqueueParams::one(NewItem::new(q(), b"x".to_vec())),
            )
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        assert!(ctx.store.item_get(out[0].id).await.unwrap().is_none());
        ctx.finish().await;
    }
}

mod migrations {
    use super::*;

    #[tokio::test]
    async fn an_unsafe_schema_name_is_refused_before_anything_runs() {
        // The URL points nowhere: an attempt to run anything would answer Unavailable.
        for bad in [
            "Tenure",
            "a;drop table x",
            "a\"b",
            "1abc",
            "",
            &"x".repeat(49),
        ] {
            let e =
                PgStore::connect(PgConfig::new("postgres://postgres@127.0.0.1:1/test").schema(bad))
                    .await
                    .unwrap_err();
            assert_eq!(e.invalid_field(), Some("schema"), "{bad:?}: {e}");
        }
    }

    #[tokio::test]
    async fn concurrent_connects_migrate_once_into_our_own_table() {
        let Some(mut admin) = common::admin().await else {
            return;
        };
        let schema = common::fresh_schema();
        let clock = ManualClock::starting_now();
        let mut joins = Vec::new();
        for _ in 0..4 {
            let cfg = common::config(&schema, &clock)
                .max_connections(1)
                .listen(false);
            joins.push(tokio::spawn(PgStore::connect(cfg)));
        }
        for j in joins {
            j.await.unwrap().expect("every connect succeeds");
        }
        let versions: Vec<i32> = sqlx::query_scalar(&format!(
            "SELECT version FROM {schema}.tenure_migrations ORDER BY version"
        ))
        .fetch_all(&mut admin)
        .await
        .unwrap();
        assert_eq!(versions, vec![1, 2, 3, 4, 5, 6, 7]);
        let sqlx_table: Option<String> = sqlx::query_scalar(&format!(
            "SELECT to_regclass('{schema}._sqlx_migrations')::text"
        ))
        .fetch_one(&mut admin)
        .await
        .unwrap();
        assert_eq!(sqlx_table, None, "we never touch sqlx's bookkeeping");
        common::drop_schema(&mut admin, &schema).await;
    }

    #[tokio::test]
    async fn an_applications_own_sqlx_migrations_and_ours_share_a_schema_without_clashing() {
        let Some(mut admin) = common::admin().await else {
            return;
        };
        let schema = common::fresh_schema();
        sqlx::raw_sql(&format!("CREATE SCHEMA {schema}"))
            .execute(&mut admin)
            .await
            .unwrap();
        let dir = std::env::temp_dir().join(format!("tenure-app-migrations-{schema}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("1_app.sql"), "CREATE TABLE app_things (id int);").unwrap();
        let opts: sqlx::postgres::PgConnectOptions = common::url().parse().unwrap();
        let app_pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect_with(opts.options([("search_path", schema.as_str())]))
            .await
            .unwrap();
        let migrator = sqlx::migrate::Migrator::new(dir.as_path()).await.unwrap();
        migrator.run(&app_pool).await.unwrap();
        let clock = ManualClock::starting_now();
        let store = PgStore::connect(common::config(&schema, &clock))
            .await
            .unwrap();
        // The application's migrator still agrees with what it finds.
        migrator.run(&app_pool).await.expect("no clash with ours");
        store.migrate().await.expect("no clash with theirs");
        store
            .enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap();
        app_pool.close().await;
        store.close().await;
        std::fs::remove_dir_all(&dir).ok();
        common::drop_schema(&mut admin, &schema).await;
    }

    /// `pending` of the stream `st` in `schema`.
    async fn pending(admin: &mut sqlx::PgConnection, schema: &str, st: &str) -> i64 {
        sqlx::query_scalar(&format!(
            "SELECT pending FROM {schema}.streams WHERE stream = $1"
        ))
        .bind(st)
        .fetch_one(admin)
        .await
        .unwrap()
    }

    /// A version 4 schema (the complete function of migration 2, which counts each
    /// stream's unfinished items down on every finish) with streams in the middle of
    /// their items upgrades to 5, and its streams go on in order from the counts the
    /// old function left: each claim takes the next item, a stream whose last item
    /// finishes reads 0, and a new item of it is head at once.
    #[tokio::test]
    async fn a_version_4_schema_with_streams_in_flight_upgrades_and_they_go_on_in_order() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        let s = ctx.schema.clone();
        let old_complete = include_str!("../migrations/0002_complete_function.sql")
            .replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
            .replace("__SCHEMA__", &s);
        // Version 6's lease column stays (its migration adds it only when missing);
        // its complete function goes, as the version-4 code below never calls it.
        sqlx::raw_sql(&format!(
            "DROP FUNCTION {s}.tenure_promote(text[]); \
             DROP FUNCTION {s}.tenure_complete(bigint, uuid[], integer[], bigint[], boolean); \
             {old_complete}; \
             DELETE FROM {s}.tenure_migrations WHERE version >= 5"
        ))
        .execute(&mut ctx.admin)
        .await
        .unwrap();
        let (a, b) = (StreamKey::new("a").unwrap(), StreamKey::new("b").unwrap());
        let mut ids = Vec::new();
        for st in [&a, &b, &a, &a] {
            let it = NewItem::new(q(), b"x".to_vec()).stream(st.clone());
            ids.push(it.id);
            ctx.store.enqueue_one(it).await.unwrap();
        }
        // Under version 4: the heads of a and b, completed by the old function as the
        // version-4 code called it (no lease ids).
        let first = ctx
            .store
            .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
            .await
            .unwrap();
        let got: Vec<ItemId> = first.iter().map(|l| l.item.id).collect();
        assert_eq!(got, vec![ids[0], ids[1]]);
        let done: Vec<uuid::Uuid> = sqlx::query_scalar(&format!(
            "SELECT {s}.tenure_complete($1, $2::uuid[], $3::int4[], false)"
        ))
        .bind(0_i64)
        .bind(got.iter().map(|id| *id.as_uuid()).collect::<Vec<_>>())
        .bind(vec![1_i32; got.len()])
        .fetch_all(&mut ctx.admin)
        .await
        .unwrap();
        assert_eq!(done.len(), 2);
        assert_eq!(
            pending(&mut ctx.admin, &s, "a").await,
            2,
            "counted down by version 4"
        );
        assert_eq!(pending(&mut ctx.admin, &s, "b").await, 0);

        ctx.store.migrate().await.unwrap();
        let versions: Vec<i32> = sqlx::query_scalar(&format!(
            "SELECT version FROM {s}.tenure_migrations ORDER BY version"
        ))
        .fetch_all(&mut ctx.admin)
        .await
        .unwrap();
        assert_eq!(versions, vec![1, 2, 3, 4, 5, 6, 7]);
        for next in [ids[2], ids[3]] {
            let leases = ctx
                .store
                .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
                .await
                .unwrap();
            let got: Vec<ItemId> = leases.iter().map(|l| l.item.id).collect();
            assert_eq!(got, vec![next], "stream a, in order, one at a time");
            ctx.store.complete_one(leases[0].token).await.unwrap();
        }
        assert_eq!(
            pending(&mut ctx.admin, &s, "a").await,
            0,
            "a has nothing left"
        );
        let later = NewItem::new(q(), b"y".to_vec()).stream(a.clone());
        ctx.store.enqueue_one(later.clone()).await.unwrap();
        let leases = ctx
            .store
            .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
            .await
            .unwrap();
        let got: Vec<ItemId> = leases.iter().map(|l| l.item.id).collect();
        assert_eq!(
            got,
            vec![later.id],
            "a new item of an emptied stream is its head"
        );
        ctx.finish().await;
    }

    #[tokio::test]
    async fn a_schema_newer_than_this_code_is_a_conflict() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        sqlx::query(&format!(
            "INSERT INTO {}.tenure_migrations (version, name) VALUES (999, 'future')",
            ctx.schema
        ))
        .execute(&mut ctx.admin)
        .await
        .unwrap();
        let e = ctx.store.migrate().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
        ctx.finish().await;
    }
}

mod wakeups {
    use super::*;

    #[tokio::test]
    async fn an_enqueue_through_another_pool_wakes_a_listening_store() {
        let Some(ctx) = Ctx::new().await else { return };
        assert!(ctx.store.capabilities().cross_process_wakeups);
        let signal = ctx.store.wake_signal().unwrap();
        // The listener fires once when its LISTEN is in place.
        tokio::time::timeout(Duration::from_secs(10), signal.notified())
            .await
            .expect("the listener started");
        // notify() also stores one wake-up for the next wait: drop it, so only the
        // peer's NOTIFY can end the wait below.
        let _ = tokio::time::timeout(Duration::ZERO, signal.notified()).await;
        let peer = ctx.peer().await;
        peer.enqueue_one(NewItem::new(q(), b"x".to_vec()))
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), signal.notified())
            .await
            .expect("the NOTIFY of the peer's enqueue arrived");
        peer.close().await;
        ctx.finish().await;
    }

    #[tokio::test]
    async fn without_listen_there_are_no_cross_process_wakeups() {
        let Some(ctx) = Ctx::with(|c| c.listen(false)).await else {
            return;
        };
        assert!(!ctx.store.capabilities().cross_process_wakeups);
        assert!(
            ctx.store.wake_signal().is_some(),
            "the in-process signal remains"
        );
        ctx.finish().await;
    }

    #[tokio::test]
    async fn without_statement_caching_every_operation_still_works() {
        let Some(ctx) =
            Ctx::with(|c| c.statement_cache(false).listen(false).max_connections(1)).await
        else {
            return;
        };
        for _ in 0..3 {
            ctx.store
                .enqueue_one(NewItem::new(q(), b"x".to_vec()))
                .await
                .unwrap();
            let l = ctx
                .store
                .claim_one(q(), owner(1), LEASE)
                .await
                .unwrap()
                .unwrap();
            ctx.store.complete_one(l.token).await.unwrap();
        }
        // No named statement is left on the server (a proxy's shared server
        // connections would refuse a second one of the same name).
        let mut conn = ctx.store.pool().acquire().await.unwrap();
        let named: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_prepared_statements")
            .persistent(false)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(named, 0);
        drop(conn);
        ctx.finish().await;
    }
}

mod g09_stream_fifo {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The handle that completes a stream head need not be the one that claimed it.
    #[tokio::test]
    async fn a_head_completed_through_another_pool_promotes_the_next_item() {
        let Some(ctx) = Ctx::new().await else { return };
        let stream = StreamKey::new("s").unwrap();
        let mut ids = Vec::new();
        for i in 0..3 {
            let it = NewItem::new(q(), vec![i]).stream(stream.clone());
            ids.push(ctx.store.enqueue_one(it).await.unwrap().id);
        }
        let plain = ctx
            .store
            .enqueue_one(NewItem::new(q(), b"plain".to_vec()))
            .await
            .unwrap()
            .id;
        let peer = ctx.peer().await;
        for expected in &ids {
            let leases = ctx
                .store
                .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
                .await
                .unwrap();
            let claimed: Vec<ItemId> = leases.iter().map(|l| l.item.id).collect();
            assert!(claimed.contains(expected), "{claimed:?}");
            assert_eq!(
                claimed.iter().filter(|id| ids.contains(id)).count(),
                1,
                "one item of the stream at a time"
            );
            let out = peer
                .complete(CompleteParams::new(
                    leases.iter().map(|l| l.token).collect(),
                ))
                .await
                .unwrap();
            assert!(out.iter().all(|o| *o == TokenOutcome::Accepted));
        }
        assert!(ctx.store.item_get(plain).await.unwrap().is_none());
        peer.close().await;
        ctx.finish().await;
    }

    /// Waits until `n` of the store's connections (named after the schema) wait on a
    /// lock.
    async fn wait_for_lock_waiters(ctx: &mut Ctx, n: i64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE application_name = $1 AND wait_event_type = 'Lock'",
            )
            .bind(&ctx.schema)
            .fetch_one(&mut ctx.admin)
            .await
            .unwrap();
            if waiting >= n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{n} calls never queued on the lock"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The enqueue/promote race, forced in both orders: an admin transaction holds the
    /// stream's row, so a complete of the running head and an enqueue of the next
    /// item both queue on it (seen in pg_stat_activity, one after the other) before
    /// it is let go. Whichever goes first, the new item ends up the stream's head: the
    /// next claim takes it, and nothing else of the stream is claimable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_complete_and_an_enqueue_queued_on_one_stream_row_leave_the_new_item_head() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        // Only this store's connections carry this name.
        let store =
            PgStore::connect(common::config(&ctx.schema, &ctx.clock).application_name(&ctx.schema))
                .await
                .unwrap();
        let stream = StreamKey::new("s").unwrap();
        let item = |n: &str| NewItem::new(q(), n.as_bytes().to_vec()).stream(stream.clone());
        let first = item("first");
        store.enqueue_one(first.clone()).await.unwrap();
        let mut running = store
            .claim_one(q(), owner(1), LEASE)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(running.item.id, first.id);
        for complete_first in [true, false] {
            let mut holder = common::admin().await.unwrap();
            sqlx::raw_sql(&format!(
                "BEGIN; SELECT 1 FROM {}.streams WHERE stream = 's' FOR UPDATE",
                ctx.schema
            ))
            .execute(&mut holder)
            .await
            .unwrap();
            let next = item(if complete_first { "second" } else { "third" });
            let start_complete = {
                let (store, token) = (store.clone(), running.token);
                move || tokio::spawn(async move { store.complete_one(token).await })
            };
            let start_enqueue = {
                let (store, next) = (store.clone(), next.clone());
                move || tokio::spawn(async move { store.enqueue_one(next).await.map(|_| ()) })
            };
            // The first call queues on the row before the second is sent.
            let (complete, enqueue) = if complete_first {
                let complete = start_complete();
                wait_for_lock_waiters(&mut ctx, 1).await;
                let enqueue = start_enqueue();
                wait_for_lock_waiters(&mut ctx, 2).await;
                (complete, enqueue)
            } else {
                let enqueue = start_enqueue();
                wait_for_lock_waiters(&mut ctx, 1).await;
                let complete = start_complete();
                wait_for_lock_waiters(&mut ctx, 2).await;
                (complete, enqueue)
            };
            sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();
            complete.await.unwrap().unwrap();
            enqueue.await.unwrap().unwrap();
            let claimed = store
                .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
                .await
                .unwrap();
            let ids: Vec<ItemId> = claimed.iter().map(|l| l.item.id).collect();
            assert_eq!(
                ids,
                vec![next.id],
                "complete first: {complete_first}; the new item is the one head"
            );
            running = claimed.into_iter().next().unwrap();
        }
        store.complete_one(running.token).await.unwrap();
        let counts = store.queue_counts(&q()).await.unwrap();
        assert_eq!(counts.pending() + counts.dead, 0);
        store.close().await;
        ctx.finish().await;
    }

    /// A stress run beside the forced test below: producers enqueue into three streams
    /// one item at a time while four claimers take and complete batches, so enqueues
    /// and completes of one stream often overlap. Each stream is claimed exactly in
    /// enqueue order, item k+1 only after item k's complete began, and no stream is
    /// left without a head.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn enqueues_racing_completes_keep_each_stream_in_order_and_moving() {
        let Some(ctx) = Ctx::with(|c| c.max_connections(8)).await else {
            return;
        };
        const STREAMS: usize = 3;
        const PER: usize = 60;
        let total = STREAMS * PER;
        // (stream, index) -> started completing
        let completing: Arc<Mutex<Vec<Vec<bool>>>> =
            Arc::new(Mutex::new(vec![vec![false; PER]; STREAMS]));
        let claimed: Arc<Mutex<Vec<Vec<usize>>>> = Arc::new(Mutex::new(vec![vec![]; STREAMS]));
        let finished = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for s in 0..STREAMS {
            let store = ctx.store.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..PER {
                    let item = NewItem::new(q(), format!("{s}:{i}").into_bytes())
                        .stream(StreamKey::new(format!("s{s}")).unwrap());
                    store.enqueue_one(item).await.unwrap();
                    tokio::task::yield_now().await;
                }
            }));
        }
        for w in 0..4 {
            let store = ctx.store.clone();
            let completing = completing.clone();
            let claimed = claimed.clone();
            let finished = finished.clone();
            tasks.push(tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(60);
                while finished.load(Ordering::SeqCst) < total {
                    assert!(Instant::now() < deadline, "a stream stopped moving");
                    let leases = store
                        .claim(ClaimParams::new(q(), owner(w), 5, LEASE))
                        .await
                        .unwrap();
                    if leases.is_empty() {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                    for l in &leases {
                        let text = String::from_utf8(l.item.payload.clone()).unwrap();
                        let (s, i) = text.split_once(':').unwrap();
                        let (s, i): (usize, usize) = (s.parse().unwrap(), i.parse().unwrap());
                        if i > 0 {
                            assert!(
                                completing.lock().unwrap()[s][i - 1],
                                "stream {s}: item {i} claimed before item {} was completed",
                                i - 1
                            );
                        }
                        claimed.lock().unwrap()[s].push(i);
                        completing.lock().unwrap()[s][i] = true;
                    }
                    let tokens = leases.iter().map(|l| l.token).collect();
                    let out = store.complete(CompleteParams::new(tokens)).await.unwrap();
                    assert!(out.iter().all(|o| *o == TokenOutcome::Accepted));
                    finished.fetch_add(out.len(), Ordering::SeqCst);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let claimed = claimed.lock().unwrap().clone();
        for (s, order) in claimed.iter().enumerate() {
            assert_eq!(*order, (0..PER).collect::<Vec<_>>(), "stream {s}");
        }
        ctx.finish().await;
    }
}

mod privileges {
    use super::*;

    /// A worker role with only the documented grants (and no right to create
    /// anything) runs every operation once the schema was migrated by another role.
    #[tokio::test]
    async fn a_worker_with_the_documented_grants_runs_every_operation() {
        let Some(mut ctx) = Ctx::new().await else {
            return;
        };
        let role = format!("w_{}", ctx.schema);
        let s = &ctx.schema;
        let setup = format!(
            "CREATE ROLE {role} LOGIN PASSWORD '{role}'; \
             GRANT USAGE ON SCHEMA {s} TO {role}; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {role};"
        );
        sqlx::Executor::execute(&mut ctx.admin, setup.as_str())
            .await
            .unwrap();
        let url = common::url().replacen(
            "postgres://postgres@",
            &format!("postgres://{role}:{role}@"),
            1,
        );
        let worker = PgStore::connect(
            PgConfig::new(url)
                .schema(s)
                .clock(ctx.clock.clone())
                .migrate_on_connect(false)
                .max_connections(2),
        )
        .await
        .unwrap();
        let stream = StreamKey::new("s").unwrap();
        let key = DedupKey::new("k").unwrap();
        let items = vec![
            NewItem::new(q(), b"a".to_vec())
                .stream(stream.clone())
                .dedup_key(key),
            NewItem::new(q(), b"b".to_vec()).stream(stream),
            NewItem::new(q(), b"c".to_vec()).scope(ScopeKey::new("sc").unwrap()),
        ];
        worker.enqueue(EnqueueParams::new(items)).await.unwrap();
        let leases = worker
            .claim(ClaimParams::new(q(), owner(1), 10, LEASE))
            .await
            .unwrap();
        assert_eq!(leases.len(), 2);
        worker.renew_one(leases[0].token, LEASE).await.unwrap();
        worker.complete_one(leases[0].token).await.unwrap();
        worker
            .fail_one(Failure::permanent(leases[1].token, "no"))
            .await
            .unwrap();
        let next = worker
            .claim_one(q(), owner(1), LEASE)
            .await
            .unwrap()
            .unwrap();
        worker.release_one(next.token).await.unwrap();
        worker
            .dead_requeue(RequeueParams::new(vec![leases[1].item.id]))
            .await
            .unwrap();
        worker
            .instance_heartbeat(HeartbeatParams::new(owner(1)))
            .await
            .unwrap();
        let partitioned = worker
            .claim(ClaimParams::new(q(), owner(1), 10, LEASE).partitioned(Partitioning::default()))
            .await
            .unwrap();
        worker.release_one(partitioned[0].token).await.unwrap();
        worker
            .instance_deregister(DeregisterParams::new(owner(1)))
            .await
            .unwrap();
        worker
            .instance_evict_stale(EvictParams::default())
            .await
            .unwrap();
        worker
            .leader_acquire(LeaderParams::new(
                LeaderName::new("m").unwrap(),
                owner(1),
                LEASE,
            ))
            .await
            .unwrap();
        worker
            .recover_expired(RecoverParams::default())
            .await
            .unwrap();
        worker
            .purge(PurgeParams::new(Duration::from_secs(1), 100))
            .await
            .unwrap();
        worker.queue_counts(&q()).await.unwrap();
        // The role really has no more than that: it cannot create anything there.
        let denied = sqlx::Executor::execute(
            worker.pool(),
            format!("CREATE TABLE {s}.not_allowed (x int)").as_str(),
        )
        .await;
        assert!(
            denied.is_err(),
            "the worker role must not be able to create tables"
        );
        worker.close().await;
        let teardown = format!("DROP OWNED BY {role}; DROP ROLE {role};");
        sqlx::Executor::execute(&mut ctx.admin, teardown.as_str())
            .await
            .unwrap();
        ctx.finish().await;
    }
}

mod partitioned {
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
                items.push(
                    NewItem::new(q(), vec![i]).stream(StreamKey::new(format!("r{s}")).unwrap()),
                );
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
                        tokio::time::sleep(Duration::from_millis(if idle > 20 { 5 } else { 1 }))
                            .await;
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
}
