//! Tests that need the store's private statements: the claim plan and the claim held
//! open in a transaction. They run against `TENURE_POSTGRES_URL` like the integration
//! tests (skipped with a message when the server is missing, unless
//! `TENURE_REQUIRE_STORES=1`).

use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tenure_core::{
    machine, ClaimParams, Clock, CompleteParams, ManualClock, NewItem, OwnerId, QueueName,
    ScopeKey, Store, StoreExt,
};

use crate::store::ClaimRun;
use crate::{PgConfig, PgStore};

const LEASE: Duration = Duration::from_secs(30);

fn url() -> String {
    std::env::var("TENURE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

async fn admin() -> Option<PgConnection> {
    match PgConnection::connect(&url()).await {
        Ok(c) => Some(c),
        Err(e) if std::env::var("TENURE_REQUIRE_STORES").is_ok_and(|v| v == "1") => {
            panic!("PostgreSQL at {} is required: {e}", url())
        }
        Err(e) => {
            eprintln!("skipped: PostgreSQL at {} is unreachable ({e})", url());
            None
        }
    }
}

async fn open(keep_done: bool) -> Option<(PgStore, PgConnection, String, ManualClock)> {
    let admin = admin().await?;
    let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
    let clock = ManualClock::starting_now();
    let store = PgStore::connect(
        PgConfig::new(url())
            .schema(&schema)
            .clock(clock.clone())
            .max_connections(4)
            .keep_done(keep_done)
            .application_name(&schema),
    )
    .await
    .expect("connect");
    Some((store, admin, schema, clock))
}

async fn drop_schema(admin: &mut PgConnection, schema: &str) {
    sqlx::raw_sql(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(admin)
        .await
        .expect("drop schema");
}

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn owner(name: &str) -> OwnerId {
    OwnerId::new(name).unwrap()
}

/// The claim statement as a prepared statement with literal arguments, explained
/// under `plan_cache_mode` (`force_custom_plan` or `force_generic_plan`).
async fn explain_claim(
    store: &PgStore,
    conn: &mut PgConnection,
    mode: &str,
    now: i64,
    analyze: bool,
) -> String {
    let name = format!("claim_{}", mode.replace('_', ""));
    let prepare = format!(
        "PREPARE {name}(text[], int8, int8, text, int8, bool, int8) AS {}",
        store.sql().claim
    );
    let opts = if analyze {
        "(ANALYZE, BUFFERS, COSTS OFF)"
    } else {
        "(COSTS OFF)"
    };
    let mut tx = conn.begin().await.unwrap();
    sqlx::raw_sql(&format!("SET LOCAL plan_cache_mode = {mode}; {prepare}"))
        .execute(&mut *tx)
        .await
        .unwrap();
    let lines: Vec<String> = sqlx::query_scalar(&format!(
        "EXPLAIN {opts} EXECUTE {name}('{{q}}', {now}, 100, 'explainer', {}, true, 7)",
        now + 30_000_000
    ))
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    // Rolled back: an analyzed claim changes nothing, and the prepared statement goes
    // with the transaction's session state only for this connection.
    tx.rollback().await.unwrap();
    sqlx::raw_sql(&format!("DEALLOCATE {name}"))
        .execute(&mut *conn)
        .await
        .unwrap();
    lines.join("\n")
}

/// The lines of a plan that scan the pick's alias `p`.
fn pick_scans(plan: &str) -> Vec<&str> {
    plan.lines()
        .filter(|l| l.contains(" on items p") && l.contains("Scan"))
        .collect()
}

mod claim_plan {
    use super::*;

    async fn claim_stays_on_the_partial_index(keep_done: bool) {
        let Some((store, mut admin, schema, clock)) = open(keep_done).await else {
            return;
        };
        let queue = q("q");
        for _ in 0..4 {
            let items = (0..5_000)
                .map(|_| NewItem::new(queue.clone(), b"x".to_vec()))
                .collect();
            store
                .enqueue(tenure_core::EnqueueParams::new(items))
                .await
                .unwrap();
        }
        // The trap of limits.md note 3: statistics taken while every row is ready.
        sqlx::raw_sql(&format!("ANALYZE {schema}.items"))
            .execute(&mut admin)
            .await
            .unwrap();
        let me = owner("w");
        for _ in 0..18 {
            let leases = store
                .claim(ClaimParams::new(queue.clone(), me.clone(), 1_000, LEASE))
                .await
                .unwrap();
            assert_eq!(leases.len(), 1_000);
            let out = store
                .complete(CompleteParams::new(
                    leases.iter().map(|l| l.token).collect(),
                ))
                .await
                .unwrap();
            assert!(out
                .iter()
                .all(|o| *o == tenure_core::TokenOutcome::Accepted));
        }
        let now = clock.now().as_micros();
        for mode in ["force_custom_plan", "force_generic_plan"] {
            let plan = explain_claim(&store, &mut admin, mode, now, false).await;
            let scans = pick_scans(&plan);
            assert!(
                !scans.is_empty()
                    && scans
                        .iter()
                        .all(|l| l.contains("using items_claim on items p")),
                "keep_done={keep_done}, {mode}: the pick must scan items_claim only:\n{plan}"
            );
        }
        // And with statistics taken now, when most rows are finished.
        sqlx::raw_sql(&format!("ANALYZE {schema}.items"))
            .execute(&mut admin)
            .await
            .unwrap();
        let plan = explain_claim(&store, &mut admin, "force_generic_plan", now, true).await;
        println!("claim plan, keep_done={keep_done}, 18,000 of 20,000 finished:\n{plan}");
        let scans = pick_scans(&plan);
        assert!(
            !scans.is_empty()
                && scans
                    .iter()
                    .all(|l| l.contains("using items_claim on items p")),
            "keep_done={keep_done}, fresh statistics:\n{plan}"
        );
        store.close().await;
        drop_schema(&mut admin, &schema).await;
    }

    #[tokio::test]
    async fn the_pick_scans_the_ready_index_after_most_rows_finished_and_were_kept() {
        claim_stays_on_the_partial_index(true).await;
    }

    #[tokio::test]
    async fn the_pick_scans_the_ready_index_after_most_rows_finished_and_were_deleted() {
        claim_stays_on_the_partial_index(false).await;
    }
}

mod g10_scope {
    use super::*;

    /// The overlap is forced: claimer A's claim is held open in a transaction while
    /// claimer B's claim picks another item of the same scope (its NOT EXISTS cannot
    /// see A's uncommitted running row) and blocks on the partial unique index. When
    /// A commits, the index refuses B's row; B's call picks again, passes over the
    /// busy scope and takes the other item instead, without failing.
    #[tokio::test]
    async fn a_claim_that_loses_the_race_to_the_scope_index_takes_other_items() {
        let Some((store, mut admin, schema, clock)) = open(false).await else {
            return;
        };
        let scope = ScopeKey::new("config-7").unwrap();
        // Different queues, so each claimer's pick sees its own item as the scope's
        // first eligible one.
        let a = store
            .enqueue_one(NewItem::new(q("qa"), b"a".to_vec()).scope(scope.clone()))
            .await
            .unwrap();
        let b = store
            .enqueue_one(NewItem::new(q("qb"), b"b".to_vec()).scope(scope.clone()))
            .await
            .unwrap();
        let c = store
            .enqueue_one(
                NewItem::new(q("qb"), b"c".to_vec()).scope(ScopeKey::new("other").unwrap()),
            )
            .await
            .unwrap();
        let now = clock.now();

        // Claimer A: the store's own claim statement, held open in a transaction.
        let mut held = PgConnection::connect(&url()).await.unwrap();
        let mut tx = held.begin().await.unwrap();
        let params_a = ClaimParams::new(q("qa"), owner("a"), 10, LEASE);
        let run = store
            .claim_run(&mut *tx, &["qa".to_owned()], now, &params_a, true)
            .await
            .unwrap();
        let ClaimRun::Claimed(got_a) = run else {
            panic!("nothing expired here")
        };
        assert_eq!(got_a.len(), 1);
        assert_eq!(got_a[0].1.id, a.id);

        // Claimer B, through the store, in another task.
        let peer = store.clone();
        let claim_b = tokio::spawn(async move {
            peer.claim(ClaimParams::new(q("qb"), owner("b"), 10, LEASE))
                .await
        });
        // Wait until B is blocked on A's uncommitted index entry.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE application_name = $1 AND wait_event_type = 'Lock'",
            )
            .bind(&schema)
            .fetch_one(&mut admin)
            .await
            .unwrap();
            if waiting > 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "B never blocked on the index"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tx.commit().await.unwrap();

        let got_b = claim_b.await.unwrap().expect("B's call does not fail");
        assert_eq!(
            store.scope_races(),
            1,
            "B's first pick was refused by the index"
        );
        let ids: Vec<_> = got_b.iter().map(|l| l.item.id).collect();
        assert_eq!(
            ids,
            vec![c.id],
            "B passes over the busy scope and takes the other item"
        );
        let b_item = store.item_get(b.id).await.unwrap().unwrap();
        assert_eq!(b_item.state, tenure_core::ItemState::Ready);
        let a_item = store.item_get(a.id).await.unwrap().unwrap();
        assert_eq!(a_item.state, tenure_core::ItemState::Running);
        let max_running: i64 = sqlx::query_scalar(&format!(
            "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM {schema}.items \
             WHERE state = 'running' AND scope IS NOT NULL GROUP BY scope) s"
        ))
        .fetch_one(&mut admin)
        .await
        .unwrap();
        assert_eq!(max_running, 1, "no scope ever has two running items");
        store.close().await;
        drop_schema(&mut admin, &schema).await;
    }

    #[tokio::test]
    async fn the_index_refuses_a_second_running_item_of_a_scope_whatever_writes_it() {
        let Some((store, mut admin, schema, _clock)) = open(false).await else {
            return;
        };
        let scope = ScopeKey::new("s").unwrap();
        let a = store
            .enqueue_one(NewItem::new(q("q"), b"a".to_vec()).scope(scope.clone()))
            .await
            .unwrap();
        let b = store
            .enqueue_one(NewItem::new(q("q"), b"b".to_vec()).scope(scope))
            .await
            .unwrap();
        let set_running = format!("UPDATE {schema}.items SET state = 'running' WHERE id = $1");
        sqlx::query(&set_running)
            .bind(a.id.as_uuid())
            .execute(&mut admin)
            .await
            .unwrap();
        let err = sqlx::query(&set_running)
            .bind(b.id.as_uuid())
            .execute(&mut admin)
            .await
            .unwrap_err();
        let (code, constraint) = crate::error::db_code(&err).unwrap();
        assert_eq!(code, "23505");
        assert_eq!(constraint.as_deref(), Some(crate::sql::SCOPE_INDEX));
        store.close().await;
        drop_schema(&mut admin, &schema).await;
    }
}

mod g06_stalls {
    use super::*;

    #[tokio::test]
    async fn the_stalled_error_written_by_sql_matches_the_state_machine() {
        let Some((store, mut admin, schema, clock)) = open(false).await else {
            return;
        };
        let it = store
            .enqueue_one(NewItem::new(q("q"), b"x".to_vec()).max_stalls(2))
            .await
            .unwrap();
        for _ in 0..2 {
            store.claim_one(q("q"), owner("w"), LEASE).await.unwrap();
            clock.advance(LEASE);
            store
                .recover_expired(tenure_core::RecoverParams::default())
                .await
                .unwrap();
        }
        let item = store.item_get(it.id).await.unwrap().unwrap();
        assert_eq!(item.state, tenure_core::ItemState::Dead);
        assert_eq!(item.last_error, Some(machine::stalled_error(2)));
        store.close().await;
        drop_schema(&mut admin, &schema).await;
    }
}

mod report {
    use super::*;

    /// Prints the claim's generic plan, analyzed, with 100,000 items over 1,000 streams
    /// after half were claimed and completed. For the report, not for CI:
    /// `cargo test -p tenure-postgres --lib report -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "prints a plan for the report; takes a while"]
    async fn claim_plan_with_100k_items_over_1000_streams_half_done() {
        let Some((store, mut admin, schema, clock)) = open(false).await else {
            return;
        };
        let queue = q("q");
        let all: Vec<NewItem> = (0..100_000)
            .map(|i| {
                NewItem::new(queue.clone(), b"x".to_vec())
                    .stream(tenure_core::StreamKey::new(format!("s{}", i % 1_000)).unwrap())
            })
            .collect();
        for chunk in all.chunks(10_000) {
            store
                .enqueue(tenure_core::EnqueueParams::new(chunk.to_vec()))
                .await
                .unwrap();
        }
        sqlx::raw_sql(&format!("VACUUM ANALYZE {schema}.items"))
            .execute(&mut admin)
            .await
            .unwrap();
        let me = owner("w");
        let mut done = 0;
        while done < 50_000 {
            let leases = store
                .claim(ClaimParams::new(queue.clone(), me.clone(), 100, LEASE))
                .await
                .unwrap();
            let out = store
                .complete(CompleteParams::new(
                    leases.iter().map(|l| l.token).collect(),
                ))
                .await
                .unwrap();
            done += out.len();
        }
        let now = clock.now().as_micros();
        let plan = explain_claim(&store, &mut admin, "force_generic_plan", now, true).await;
        println!("claim, 100,000 items over 1,000 streams, {done} finished:\n{plan}");
        let scans = pick_scans(&plan);
        assert!(scans
            .iter()
            .all(|l| l.contains("using items_claim on items p")));
        store.close().await;
        drop_schema(&mut admin, &schema).await;
    }
}

mod finalize_plan {
    use super::*;

    /// Finalizes look their tokens up by primary key, so their cost follows the batch,
    /// not the number of items running elsewhere. (complete runs its statements inside
    /// the `tenure_complete` function, whose DELETE has the same `id = ANY($ids)`
    /// shape; EXPLAIN cannot reach inside a function.)
    #[tokio::test]
    async fn release_renew_and_fail_read_their_rows_by_primary_key_with_many_running() {
        let Some((store, mut admin, schema, clock)) = open(false).await else {
            return;
        };
        let queue = q("q");
        let items = (0..3_000)
            .map(|_| NewItem::new(queue.clone(), b"x".to_vec()))
            .collect();
        store
            .enqueue(tenure_core::EnqueueParams::new(items))
            .await
            .unwrap();
        let mut tokens = Vec::new();
        for _ in 0..2 {
            let leases = store
                .claim(ClaimParams::new(queue.clone(), owner("w"), 1_000, LEASE))
                .await
                .unwrap();
            tokens.extend(leases.iter().map(|l| l.token));
        }
        sqlx::raw_sql(&format!("ANALYZE {schema}.items"))
            .execute(&mut admin)
            .await
            .unwrap();
        let ids: Vec<String> = tokens[..100].iter().map(|t| format!("{}", t.id)).collect();
        let ids = format!("'{{{}}}'", ids.join(","));
        let attempts = format!("'{{{}}}'", vec!["1"; 100].join(","));
        let lease_arr = format!("'{{{}}}'", vec!["7"; 100].join(","));
        let now = clock.now().as_micros();
        let sql = store.sql();
        let cases = [
            (
                "release",
                &sql.release,
                "(int8, uuid[], int4[], int8[])",
                format!("{now}, {ids}, {attempts}, {lease_arr}"),
            ),
            (
                "renew",
                &sql.renew,
                "(int8, uuid[], int4[], int8, int8[])",
                format!("{now}, {ids}, {attempts}, {now}, {lease_arr}"),
            ),
            (
                "fail",
                &sql.fail,
                "(int8, uuid[], int4[], int8[], text[], int8[])",
                format!("{now}, {ids}, {attempts}, NULL, NULL, {lease_arr}"),
            ),
        ];
        for (name, stmt, types, args) in cases {
            let mut tx = admin.begin().await.unwrap();
            sqlx::raw_sql(&format!(
                "SET LOCAL plan_cache_mode = force_generic_plan; PREPARE p{name}{types} AS {stmt}"
            ))
            .execute(&mut *tx)
            .await
            .unwrap();
            let plan: Vec<String> =
                sqlx::query_scalar(&format!("EXPLAIN (COSTS OFF) EXECUTE p{name}({args})"))
                    .fetch_all(&mut *tx)
                    .await
                    .unwrap();
            tx.rollback().await.unwrap();
            let plan = plan.join("\n");
            assert!(
                plan.contains("items_pkey") && !plan.contains("items_running"),
                "{name} must look its rows up by key:\n{plan}"
            );
        }
        store.close().await;
        drop_schema(&mut admin, &schema).await;
    }
}

mod g14_partitioned {
    use super::*;
    use tenure_core::partition::{key_hash, takes, Partitioning};
    use tenure_core::{HeartbeatParams, ItemId, StreamKey};

    fn partitioned(queue: &str, who: &str, limit: u32) -> ClaimParams {
        ClaimParams::new(q(queue), owner(who), limit, LEASE).partitioned(Partitioning::default())
    }

    async fn pin(admin: &mut PgConnection, schema: &str, s: &StreamKey) -> Option<String> {
        sqlx::query_scalar(&format!(
            "SELECT pinned_to FROM {schema}.streams WHERE stream = $1"
        ))
        .bind(s.as_str())
        .fetch_one(admin)
        .await
        .unwrap()
    }

    async fn beat(store: &PgStore, who: &str) {
        store
            .instance_heartbeat(HeartbeatParams::new(owner(who)))
            .await
            .unwrap();
    }

    /// Rows written before migration 3 have no `phash`; the claim computes it in SQL,
    /// so the SQL hash must be the Rust one, byte for byte.
    #[tokio::test]
    async fn the_sql_key_hash_agrees_with_rust_for_streams_and_ids() {
        let Some((store, mut admin, schema, _clock)) = open(false).await else {
            return;
        };
        let mut streams: Vec<String> = ["a", "orders:42", "é-ü-✓-𝄞", "x y z", &"k".repeat(200)]
            .iter()
            .map(|s| s.to_string())
            .collect();
        streams.extend((0..50).map(|i| format!("stream-{i}")));
        for s in &streams {
            let key = StreamKey::new(s.clone()).unwrap();
            let sql: i64 = sqlx::query_scalar(&format!(
                "SELECT {schema}.tenure_key_hash($1, gen_random_uuid())"
            ))
            .bind(s)
            .fetch_one(&mut admin)
            .await
            .unwrap();
            assert_eq!(sql, key_hash(Some(&key), ItemId::new()), "stream {s:?}");
        }
        let mut ids = vec![
            ItemId::from_uuid(uuid::Uuid::nil()),
            ItemId::from_uuid(uuid::Uuid::max()),
        ];
        ids.extend((0..50).map(|_| ItemId::new()));
        for id in ids {
            let sql: i64 =
                sqlx::query_scalar(&format!("SELECT {schema}.tenure_key_hash(NULL, $1)"))
                    .bind(id.as_uuid())
                    .fetch_one(&mut admin)
                    .await
                    .unwrap();
            assert_eq!(sql, key_hash(None, id), "id {id}");
        }
        // And what enqueue stores is Rust's hash.
        let key = StreamKey::new("stored").unwrap();
        let it = store
            .enqueue_one(NewItem::new(q("q"), b"x".to_vec()).stream(key.clone()))
            .await
            .unwrap();
        let stored: Option<i64> =
            sqlx::query_scalar(&format!("SELECT phash FROM {schema}.items WHERE id = $1"))
                .bind(it.id.as_uuid())
                .fetch_one(&mut admin)
                .await
                .unwrap();
        assert_eq!(stored, Some(key_hash(Some(&key), it.id)));
        store.close().await;
        drop_schema(&mut admin, &schema).await;
    }

    /// Rows with a NULL `phash` (enqueued before migration 3, or by older code during
    /// a rolling deploy) are split exactly as if it had been stored.
    #[tokio::test]
    async fn rows_without_a_stored_hash_go_to_the_instance_their_hash_gives() {
        let Some((store, mut admin, schema, _clock)) = open(false).await else {
            return;
        };
        let (a, b) = ("inst-a", "inst-b");
        beat(&store, b).await;
        beat(&store, a).await;
        let mut items: Vec<NewItem> = (0..40)
            .map(|_| NewItem::new(q("q"), b"x".to_vec()))
            .collect();
        items.extend((0..20).map(|i| {
            NewItem::new(q("q"), b"s".to_vec()).stream(StreamKey::new(format!("old-{i}")).unwrap())
        }));
        let expected: Vec<(ItemId, Option<StreamKey>)> =
            items.iter().map(|i| (i.id, i.stream.clone())).collect();
        store
            .enqueue(tenure_core::EnqueueParams::new(items))
            .await
            .unwrap();
        sqlx::query(&format!("UPDATE {schema}.items SET phash = NULL"))
            .execute(&mut admin)
            .await
            .unwrap();
        let p = Partitioning::default();
        for (rank, who) in [a, b].into_iter().enumerate() {
            let got: std::collections::BTreeSet<ItemId> = store
                .claim(partitioned("q", who, 100))
                .await
                .unwrap()
                .iter()
                .map(|l| l.item.id)
                .collect();
            let want: std::collections::BTreeSet<ItemId> = expected
                .iter()
                .filter(|(id, s)| takes(p.partition_of(key_hash(s.as_ref(), *id)), rank as u32, 2))
                .map(|(id, _)| *id)
                .collect();
            assert_eq!(got, want, "{who}");
        }
        store.close().await;
        drop_schema(&mut admin, &schema).await;
    }

    /// The partitioned claim's pick scans `items_claim` too, whether or not the plan
    /// is generic, after most rows finished. 2,500 streams of two items: enough rows
    /// in `streams` that a lookup by key beats reading the whole table (finishes no
    /// longer write a stream's row, so the table is as small as its streams).
    #[tokio::test]
    async fn the_partitioned_pick_scans_the_ready_index() {
        let Some((store, mut admin, schema, clock)) = open(false).await else {
            return;
        };
        beat(&store, "explainer").await;
        beat(&store, "other").await;
        let items: Vec<NewItem> = (0..10_000)
            .map(|i| {
                let it = NewItem::new(q("q"), b"x".to_vec());
                if i % 2 == 0 {
                    it.stream(StreamKey::new(format!("s{}", i % 5_000)).unwrap())
                } else {
                    it
                }
            })
            .collect();
        store
            .enqueue(tenure_core::EnqueueParams::new(items))
            .await
            .unwrap();
        sqlx::raw_sql(&format!("ANALYZE {schema}.items"))
            .execute(&mut admin)
            .await
            .unwrap();
        // Drain most of it with ordinary claims, then take fresh statistics.
        for _ in 0..9 {
            let leases = store
                .claim(ClaimParams::new(q("q"), owner("w"), 1_000, LEASE))
                .await
                .unwrap();
            store
                .complete(CompleteParams::new(
                    leases.iter().map(|l| l.token).collect(),
                ))
                .await
                .unwrap();
        }
        let now = clock.now().as_micros();
        for analyze_first in [false, true] {
            if analyze_first {
                sqlx::raw_sql(&format!("ANALYZE {schema}.items; ANALYZE {schema}.streams"))
                    .execute(&mut admin)
                    .await
                    .unwrap();
            }
            for mode in ["force_custom_plan", "force_generic_plan"] {
                let mut tx = admin.begin().await.unwrap();
                sqlx::raw_sql(&format!(
                    "SET LOCAL plan_cache_mode = {mode}; \
                     PREPARE pclaim(text[], int8, int8, text, int8, bool, int8, int8) AS {}",
                    store.sql().claim_partitioned
                ))
                .execute(&mut *tx)
                .await
                .unwrap();
                let plan: Vec<String> = sqlx::query_scalar(&format!(
                    "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) \
                     EXECUTE pclaim('{{q}}', {now}, 100, 'explainer', {}, true, 10000, 7)",
                    now + 30_000_000
                ))
                .fetch_all(&mut *tx)
                .await
                .unwrap();
                tx.rollback().await.unwrap();
                sqlx::raw_sql("DEALLOCATE pclaim")
                    .execute(&mut admin)
                    .await
                    .unwrap();
                let plan = plan.join("\n");
                if analyze_first && mode == "force_generic_plan" {
                    println!("partitioned claim plan, 9,000 of 10,000 finished:\n{plan}");
                }
                let scans = pick_scans(&plan);
                assert!(
                    !scans.is_empty()
                        && scans
                            .iter()
                            .all(|l| l.contains("using items_claim on items p")),
                    "{mode}, analyzed after draining: {analyze_first}:\n{plan}"
                );
                let pin_scans: Vec<&str> = plan
                    .lines()
                    .filter(|l| l.contains(" on streams st") && l.contains("Scan"))
                    .collect();
                assert!(
                    !pin_scans.is_empty() && pin_scans.iter().all(|l| l.contains("streams_pkey")),
                    "every pin is read by key:\n{plan}"
                );
            }
        }
        store.close().await;
        drop_schema(&mut admin, &schema).await;
    }

    /// The overlap is forced: instance A's partitioned claim of a stream's head is held
    /// open in a transaction while instance B, which by then counts three instances
    /// and has the stream in its share, claims: the head is locked, so B takes nothing
    /// of the stream and pins nothing. Once A commits, the stream is pinned to A and B
    /// never takes it, while A takes its next item.
    #[tokio::test]
    async fn an_instance_racing_the_claim_that_pins_a_stream_neither_takes_nor_pins_it() {
        let Some((store, mut admin, schema, clock)) = open(false).await else {
            return;
        };
        let (a, b, c) = ("inst-a", "inst-b", "inst-c");
        let p = Partitioning::default();
        // A stream that is A's among {a, b} and B's among {a, b, c}.
        let s = (0..100_000)
            .map(|n| StreamKey::new(format!("race-{n}")).unwrap())
            .find(|s| {
                let part = p.partition_of(key_hash(Some(s), ItemId::new()));
                takes(part, 0, 2) && takes(part, 1, 3)
            })
            .unwrap();
        beat(&store, a).await;
        beat(&store, b).await;
        let first = NewItem::new(q("q"), b"1".to_vec()).stream(s.clone());
        let second = NewItem::new(q("q"), b"2".to_vec()).stream(s.clone());
        store
            .enqueue(tenure_core::EnqueueParams::new(vec![
                first.clone(),
                second.clone(),
            ]))
            .await
            .unwrap();

        let mut held = PgConnection::connect(&url()).await.unwrap();
        let mut tx = held.begin().await.unwrap();
        let params_a = partitioned("q", a, 10);
        let run = store
            .claim_run(&mut *tx, &["q".to_owned()], clock.now(), &params_a, true)
            .await
            .unwrap();
        let ClaimRun::Claimed(got_a) = run else {
            panic!("A is registered and nothing expired")
        };
        assert_eq!(got_a.len(), 1);
        assert_eq!(got_a[0].1.id, first.id);

        // C joins: among three, the stream is B's by partition, and A's pin is not
        // committed yet.
        beat(&store, c).await;
        let got_b = store.claim(partitioned("q", b, 10)).await.unwrap();
        assert!(got_b.is_empty(), "B took {got_b:?}");
        tx.commit().await.unwrap();

        assert_eq!(pin(&mut admin, &schema, &s).await.as_deref(), Some(a));
        let token = got_a[0].1.token();
        store.complete_one(token).await.unwrap();
        for who in [b, c] {
            let got = store.claim(partitioned("q", who, 10)).await.unwrap();
            assert!(got.is_empty(), "{who} took {got:?} of a stream pinned to A");
        }
        let got = store.claim(partitioned("q", a, 10)).await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].item.id, second.id);
        assert_eq!(pin(&mut admin, &schema, &s).await.as_deref(), Some(a));
        store.close().await;
        drop_schema(&mut admin, &schema).await;
    }
}

/// The cliff of a large table: generic plans estimate `LIMIT $n` as a share of the
/// table, so their estimated cost grows with it, and the server JIT-compiles a plan
/// whose estimate passes `jit_above_cost` (100,000 by default, passed from about 24,000
/// ready items). Each hot statement is explained here on the store's own session with
/// 100,000 ready items, after ANALYZE, and must neither be JIT-compiled nor leave its
/// index.
mod large_table {
    use super::*;
    use sqlx::Row;
    use tenure_core::{EnqueueParams, Partitioning};

    const READY: usize = 100_000;

    /// Every node of a JSON plan, depth first.
    fn nodes<'a>(plan: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        out.push(plan);
        if let Some(children) = plan.get("Plans").and_then(|p| p.as_array()) {
            for c in children {
                nodes(c, out);
            }
        }
    }

    /// `EXPLAIN (FORMAT JSON) EXECUTE` of `stmt` prepared on `conn` with `types`, run
    /// with `args` inside a transaction that is rolled back.
    async fn explain(
        conn: &mut PgConnection,
        name: &str,
        stmt: &str,
        types: &str,
        args: &str,
    ) -> serde_json::Value {
        let mut tx = conn.begin().await.unwrap();
        sqlx::raw_sql(&format!("PREPARE big_{name}{types} AS {stmt}"))
            .execute(&mut *tx)
            .await
            .unwrap();
        let row = sqlx::query(&format!("EXPLAIN (FORMAT JSON) EXECUTE big_{name}({args})"))
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        // The json column's text is the document; read it without a type check.
        let text: String = row.try_get_unchecked(0).unwrap();
        tx.rollback().await.unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        doc[0].clone()
    }

    /// Asserts that `doc` is not JIT-compiled, scans neither of the tables that grow
    /// with the work (`items`, `streams`) sequentially, and reads `items` through
    /// `index` at least once (when given). The registry (`instances`) holds one row per worker
    /// process and may be scanned.
    fn check(name: &str, doc: &serde_json::Value, index: Option<&str>) {
        assert!(
            doc.get("JIT").is_none(),
            "{name} would be JIT-compiled:\n{doc:#}"
        );
        let mut all = Vec::new();
        nodes(&doc["Plan"], &mut all);
        for n in all
            .iter()
            .filter(|n| n["Relation Name"] == "items" || n["Relation Name"] == "streams")
        {
            assert_ne!(
                n["Node Type"], "Seq Scan",
                "{name} scans {} sequentially:\n{doc:#}",
                n["Relation Name"]
            );
        }
        if let Some(index) = index {
            assert!(
                all.iter()
                    .any(|n| n["Relation Name"] == "items" && n["Index Name"] == index),
                "{name} must read items through {index}:\n{doc:#}"
            );
        }
    }

    #[tokio::test]
    async fn hot_statements_stay_on_their_indexes_without_jit_on_a_large_table() {
        let Some((store, mut admin, schema, clock)) = open(false).await else {
            return;
        };
        let queue = q("big");
        for chunk in 0..READY / 10_000 {
            let items = (0..10_000)
                .map(|i| {
                    let item = NewItem::new(queue.clone(), b"x".to_vec());
                    // Some scoped and some stream items, so their indexes hold rows.
                    match i % 100 {
                        0 => item.scope(ScopeKey::new(format!("s{chunk}-{i}")).unwrap()),
                        1 => item
                            .stream(tenure_core::StreamKey::new(format!("st{}", i % 7)).unwrap()),
                        _ => item,
                    }
                })
                .collect();
            store.enqueue(EnqueueParams::new(items)).await.unwrap();
        }
        let leases = store
            .claim(ClaimParams::new(queue.clone(), owner("w"), 100, LEASE))
            .await
            .unwrap();
        assert_eq!(leases.len(), 100);
        sqlx::raw_sql(&format!("ANALYZE {schema}.items"))
            .execute(&mut admin)
            .await
            .unwrap();

        // The store's own session: its startup options, its plan cache mode.
        let mut conn = store.pool().acquire().await.unwrap();
        let jit: String = sqlx::query_scalar("SHOW jit")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(jit, "off", "the store's sessions must run with JIT off");
        let mode: String = sqlx::query_scalar("SHOW plan_cache_mode")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(mode, "force_generic_plan");

        let now = clock.now().as_micros();
        let expiry = now + 30_000_000;
        let ids: Vec<String> = leases.iter().map(|l| format!("{}", l.token.id)).collect();
        let ids = format!("'{{{}}}'", ids.join(","));
        let attempts = format!("'{{{}}}'", vec!["1"; leases.len()].join(","));
        let lease_ids: Vec<String> = leases
            .iter()
            .map(|l| l.token.lease.to_i64().to_string())
            .collect();
        let lease_arr = format!("'{{{}}}'", lease_ids.join(","));
        let sql = store.sql();
        let claim_args = format!("'{{big}}', {now}, 100, 'explainer', {expiry}, true");
        let claim_lease = 7;
        let cases: [(&str, &String, &str, String, &str); 6] = [
            (
                "claim",
                &sql.claim,
                "(text[], int8, int8, text, int8, bool, int8)",
                format!("{claim_args}, {claim_lease}"),
                "items_claim",
            ),
            (
                "claim_partitioned",
                &sql.claim_partitioned,
                "(text[], int8, int8, text, int8, bool, int8, int8)",
                format!(
                    "{claim_args}, {}, {claim_lease}",
                    Partitioning::default().partitions
                ),
                "items_claim",
            ),
            (
                "recover",
                &sql.recover,
                "(int8, int8, text[])",
                format!("{now}, 100, '{{big}}'"),
                "items_running",
            ),
            (
                "renew",
                &sql.renew,
                "(int8, uuid[], int4[], int8, int8[])",
                format!("{now}, {ids}, {attempts}, {expiry}, {lease_arr}"),
                "items_pkey",
            ),
            (
                "fail",
                &sql.fail,
                "(int8, uuid[], int4[], int8[], text[], int8[])",
                format!("{now}, {ids}, {attempts}, NULL, NULL, {lease_arr}"),
                "items_pkey",
            ),
            (
                "release",
                &sql.release,
                "(int8, uuid[], int4[], int8[])",
                format!("{now}, {ids}, {attempts}, {lease_arr}"),
                "items_pkey",
            ),
        ];
        for (name, stmt, types, args, index) in &cases {
            let doc = explain(&mut conn, name, stmt, types, args).await;
            check(name, &doc, Some(index));
        }
        drop(conn);

        // Behind a proxy (no startup options) the statements are planned for their
        // arguments: the batch limit bounds their cost, so the server's JIT defaults
        // never apply either. The planner may then pick another index for the actual
        // arguments (the running rows' index when few are running); none scans a table.
        let mut plain = PgConnection::connect(&url()).await.unwrap();
        sqlx::raw_sql("SET plan_cache_mode = force_custom_plan; SET jit = on")
            .execute(&mut plain)
            .await
            .unwrap();
        for (name, stmt, types, args, _) in &cases {
            let doc = explain(&mut plain, name, stmt, types, args).await;
            check(&format!("{name} (custom plan)"), &doc, None);
        }
        drop(plain);
        stream_completes_read_by_index(&store, &mut admin, &schema).await;
        store.close().await;
        drop_schema(&mut admin, &schema).await;
    }

    /// The sequential and index scans of `items` and `streams` by the transaction
    /// open on `conn` so far (its own counters: no other session's work in them).
    async fn scans(conn: &mut PgConnection, schema: &str) -> Vec<(String, i64, i64)> {
        sqlx::query_as(
            "SELECT relname::text, seq_scan, coalesce(idx_scan, 0) \
             FROM pg_stat_xact_user_tables \
             WHERE schemaname = $1 AND relname IN ('items', 'streams') ORDER BY relname",
        )
        .bind(schema)
        .fetch_all(&mut *conn)
        .await
        .unwrap()
    }

    /// The statements inside `tenure_complete` and `tenure_promote` (which EXPLAIN
    /// cannot reach) read `items` and `streams` by index on the large table: completes
    /// of 1,000 stream heads (each promoting its stream's next item) and then of those
    /// items (each the last of its stream, so its row is locked and set empty), run in
    /// one transaction with the store's session settings, scan neither table
    /// sequentially.
    async fn stream_completes_read_by_index(
        store: &PgStore,
        admin: &mut PgConnection,
        schema: &str,
    ) {
        let queue = q("streamed");
        let items = (0..2_000)
            .map(|i| {
                NewItem::new(queue.clone(), b"x".to_vec())
                    .stream(tenure_core::StreamKey::new(format!("c{}", i % 1_000)).unwrap())
            })
            .collect();
        store.enqueue(EnqueueParams::new(items)).await.unwrap();
        sqlx::raw_sql(&format!("ANALYZE {schema}.items; ANALYZE {schema}.streams"))
            .execute(&mut *admin)
            .await
            .unwrap();
        let mut conn = PgConnection::connect(&url()).await.unwrap();
        sqlx::raw_sql("SET plan_cache_mode = force_generic_plan; SET jit = off")
            .execute(&mut conn)
            .await
            .unwrap();
        for round in ["heads", "last items"] {
            let leases = store
                .claim(ClaimParams::new(queue.clone(), owner("w"), 1_000, LEASE))
                .await
                .unwrap();
            assert_eq!(leases.len(), 1_000, "{round}");
            // One transaction around the completes (each in a savepoint of it), so its
            // own counters tell what they did.
            let mut tx = conn.begin().await.unwrap();
            let before = scans(&mut tx, schema).await;
            for batch in leases.chunks(100) {
                let tokens = batch.iter().map(|l| l.token).collect();
                let out = store
                    .complete_in_tx(&mut tx, CompleteParams::new(tokens))
                    .await
                    .unwrap();
                assert!(out
                    .iter()
                    .all(|o| *o == tenure_core::TokenOutcome::Accepted));
            }
            let after = scans(&mut tx, schema).await;
            tx.commit().await.unwrap();
            assert_eq!(after.len(), 2);
            for ((table, seq0, idx0), (_, seq1, idx1)) in before.iter().zip(&after) {
                assert_eq!(
                    seq1 - seq0,
                    0,
                    "completes of {round} scanned {table} sequentially"
                );
                assert!(
                    idx1 > idx0 || table == "streams",
                    "{round}: {table} by index"
                );
            }
            if round == "last items" {
                let (_, _, idx0) = &before[1];
                let (_, _, idx1) = &after[1];
                assert!(idx1 > idx0, "the last items' completes lock streams by key");
            }
        }
        let left: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {schema}.streams WHERE stream LIKE 'c%' AND pending <> 0"
        ))
        .fetch_one(&mut *admin)
        .await
        .unwrap();
        assert_eq!(left, 0, "every emptied stream reads 0");
    }
}

/// Compile-time check: the inherent async methods can be spawned on a multi-threaded
/// runtime (their futures are `Send`).
#[allow(dead_code)]
fn futures_are_send(store: &PgStore, conn: &mut sqlx::PgConnection) {
    fn is_send<T: Send>(_: &T) {}
    is_send(&PgStore::connect(PgConfig::new("")));
    is_send(&store.migrate());
    is_send(&store.enqueue_in_tx(conn, tenure_core::EnqueueParams::new(Vec::new())));
    is_send(&store.complete_in_tx(conn, tenure_core::CompleteParams::new(Vec::new())));
    is_send(&store.fail_in_tx(conn, tenure_core::FailParams::new(Vec::new())));
    is_send(&store.release_in_tx(conn, tenure_core::ReleaseParams::new(Vec::new())));
}
