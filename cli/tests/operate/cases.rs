//! The cases `on_every_sql_store!` runs on each store: one function per command.

use super::*;
use tenure_test_support::every::Kind;

/// Enqueues `n` ready items of `queue`; their ids in enqueue order.
async fn ready(store: &DynStore, queue: &str, n: usize) -> Vec<ItemId> {
    let mut ids = Vec::new();
    for i in 0..n {
        let e = store
            .enqueue_one(NewItem::new(q(queue), format!("item {i}").into_bytes()))
            .await
            .unwrap();
        ids.push(e.id);
    }
    ids
}

/// Makes one item of `queue` dead with `error`; its id.
async fn dead(store: &DynStore, queue: &str, error: &str) -> ItemId {
    let id = ready(store, queue, 1).await[0];
    let lease = store
        .claim_one(q(queue), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.token.id, id, "the queue held only this ready item");
    store
        .fail_one(Failure::permanent(lease.token, error))
        .await
        .unwrap();
    id
}

pub(super) async fn status_free_leader_case(f: &Fixture) {
    let store = f.store().await;
    let leader = LeaderName::new("tenure.maintenance").unwrap();
    let acquire = |who: &'static str| {
        let params = LeaderParams::new(leader.clone(), OwnerId::new(who).unwrap(), LEASE);
        let store = store.clone();
        async move {
            match store.leader_acquire(params.clone()).await.unwrap() {
                tenure::LeaderStatus::Leader { term, .. } => (term, params),
                other => panic!("{who} should lead a free lease: {other:?}"),
            }
        }
    };
    let (first, held) = acquire("worker-a").await;
    assert!(store.leader_resign(held).await.unwrap());

    for _ in 0..3 {
        let doc = json(&["status", &f.url]);
        assert_eq!(doc["leader"]["holder"], Value::Null, "{doc}");
        assert_eq!(doc["leader"]["term"], Value::Null, "{doc}");
        let text = human(&["status", &f.url]);
        assert!(text.contains("Leader (tenure.maintenance): none"), "{text}");
    }
    assert_eq!(store.leader_get(&leader).await.unwrap(), None);
    // Six reads later the next holder's term is the one right after worker-a's: no
    // read took the lease.
    let (next, _) = acquire("worker-b").await;
    assert_eq!(next, first + 1, "status raised the leader term");
    let doc = json(&["status", &f.url]);
    assert_eq!(doc["leader"]["holder"], "worker-b", "{doc}");
    assert_eq!(doc["leader"]["term"], next, "{doc}");
}

pub(super) async fn status_case(f: &Fixture) {
    let store = f.store().await;
    dead(&store, "emails", "smtp refused").await;
    ready(&store, "emails", 3).await;
    store
        .enqueue_one(NewItem::new(q("emails"), b"later".to_vec()).delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let running = store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    ready(&store, "thumbnails", 1).await;
    store
        .instance_heartbeat(HeartbeatParams::new(me()))
        .await
        .unwrap();
    let leader = LeaderName::new("tenure.maintenance").unwrap();
    let term = match store
        .leader_acquire(LeaderParams::new(leader, me(), LEASE))
        .await
        .unwrap()
    {
        tenure::LeaderStatus::Leader { term, .. } => term,
        other => panic!("worker-a should lead: {other:?}"),
    };
    store
        .queue_pause(tenure::PauseParams::new(q("thumbnails")))
        .await
        .unwrap();

    let doc = json(&["status", &f.url]);
    let queues = doc["queues"].as_array().unwrap();
    let names: Vec<&str> = queues
        .iter()
        .map(|x| x["queue"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["emails", "thumbnails"], "{doc}");
    let emails = &queues[0];
    assert_eq!(
        (
            &emails["ready"],
            &emails["scheduled"],
            &emails["running"],
            &emails["dead"],
            &emails["paused"]
        ),
        (&2.into(), &1.into(), &1.into(), &1.into(), &false.into()),
        "{doc}"
    );
    assert!(
        emails["oldest_ready_age_s"].as_f64().unwrap() >= 0.0,
        "{doc}"
    );
    assert_eq!(queues[1]["paused"], true);
    assert_eq!(doc["instances"][0]["id"], "worker-a");
    assert_eq!(doc["leader"]["holder"], "worker-a");
    assert_eq!(doc["leader"]["term"], term);

    let text = human(&["status", &f.url]);
    assert!(
        text.contains("QUEUE") && text.contains("OLDEST READY"),
        "{text}"
    );
    let row = text.lines().find(|l| l.starts_with("thumbnails")).unwrap();
    assert!(row.ends_with("paused"), "{row}");
    assert!(text.contains(&format!("worker-a, term {term}")), "{text}");
    // Reading the held lease changed nothing: worker-a still holds it, same term.
    assert_eq!(json(&["status", &f.url])["leader"]["term"], term);
    assert_eq!(
        store
            .item_get(running.token.id)
            .await
            .unwrap()
            .unwrap()
            .state,
        ItemState::Running
    );
}

pub(super) async fn items_case(f: &Fixture) {
    let store = f.store().await;
    let ids = ready(&store, "emails", 5).await;
    let dead_id = dead(&store, "failing", "smtp refused: 550 mailbox unavailable").await;

    // Paging oldest first, two at a time: every item once, in enqueue order.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = vec!["items", &f.url, "emails", "--limit", "2"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let doc = json(&args);
        pages += 1;
        for item in doc["items"].as_array().unwrap() {
            assert_eq!(item["state"], "ready");
            seen.push(item["id"].as_str().unwrap().to_owned());
        }
        match doc["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
        assert!(pages < 10, "paging ends");
    }
    let expected: Vec<String> = ids.iter().map(ToString::to_string).collect();
    assert_eq!(seen, expected);

    let newest = json(&["items", &f.url, "emails", "--newest", "--limit", "1"]);
    assert_eq!(newest["items"][0]["id"], ids[4].to_string());
    assert_eq!(newest["order"], "newest_first");

    let doc = json(&["items", &f.url, "failing", "--state", "dead"]);
    let item = &doc["items"][0];
    assert_eq!(item["id"], dead_id.to_string());
    assert_eq!(item["last_error"], "smtp refused: 550 mailbox unavailable");
    assert_eq!(item["attempt"], 1);
    assert!(doc["next_cursor"].is_null());

    let text = human(&["items", &f.url, "emails", "--limit", "2"]);
    assert!(text.contains(&ids[0].to_string()) && !text.contains(&ids[2].to_string()));
    assert!(
        text.contains("More: tenure items") && text.contains("--cursor "),
        "{text}"
    );
    let text = human(&["items", &f.url, "failing", "--state", "dead"]);
    assert!(text.contains("smtp refused"), "{text}");
    let text = human(&["items", &f.url, "emails", "--state", "running"]);
    assert!(text.contains("No running items in queue emails."), "{text}");

    let out = tenure(&["items", &f.url, "emails", "--cursor", "not a cursor"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cursor"), "{}", stderr(&out));
}

pub(super) async fn leases_case(f: &Fixture) {
    let store = f.store().await;
    ready(&store, "emails", 2).await;
    let lease = store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    store.renew_one(lease.token, LEASE).await.unwrap();
    let doc = json(&["leases", &f.url, "emails"]);
    let leases = doc["leases"].as_array().unwrap();
    assert_eq!(leases.len(), 1, "only the running item: {doc}");
    let l = &leases[0];
    assert_eq!(l["id"], lease.token.id.to_string());
    assert_eq!(l["owner"], "worker-a");
    assert_eq!(l["attempt"], 1);
    assert_eq!(l["renewals"], 1);
    assert_eq!(l["expired"], false);
    let text = human(&["leases", &f.url, "emails"]);
    assert!(text.contains("worker-a") && text.contains("1/6"), "{text}");
}

pub(super) async fn cancel_case(f: &Fixture) {
    let store = f.store().await;
    let later = store
        .enqueue_one(
            NewItem::new(q("emails"), b"later".to_vec())
                .delay(Duration::from_secs(3600))
                .dedup_key(tenure::DedupKey::new("welcome-42").unwrap()),
        )
        .await
        .unwrap()
        .id;
    let now = ready(&store, "emails", 1).await[0];
    let lease = store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.token.id, now);

    let doc = json(&["cancel", &f.url, &later.to_string()]);
    assert_eq!(doc["cancelled"], 1);
    assert_eq!(doc["results"][0]["outcome"], "cancelled");
    assert!(store.item_get(later).await.unwrap().is_none(), "gone");
    let again = store
        .enqueue_one(
            NewItem::new(q("emails"), b"later".to_vec())
                .dedup_key(tenure::DedupKey::new("welcome-42").unwrap()),
        )
        .await
        .unwrap();
    assert!(
        again.duplicate && again.id == later,
        "its dedup key is kept"
    );

    let out = tenure(&["cancel", &f.url, &now.to_string(), "--json"]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(doc["results"][0]["outcome"], "running");
    assert_eq!(doc["results"][0]["owner"], "worker-a");
    let err: Value = serde_json::from_str(stderr(&out).trim()).unwrap();
    assert_eq!(err["error"]["kind"], "conflict");
    assert_eq!(
        store.item_get(now).await.unwrap().unwrap().state,
        ItemState::Running,
        "a running item is not cancelled"
    );
    let out = tenure(&["cancel", &f.url, &now.to_string()]);
    assert!(
        stdout(&out).contains("running (attempt 1, owner worker-a)"),
        "{}",
        stdout(&out)
    );

    // Progress the holder reported shows in `tenure items`, the table and the JSON.
    let progress = tenure::Progress::new(0.4, "rows 40 of 100").unwrap();
    store
        .renew(
            tenure::RenewParams::new(vec![lease.token], LEASE).with_progress(vec![Some(progress)]),
        )
        .await
        .unwrap();
    let doc = json(&["items", &f.url, "emails", "--state", "running"]);
    assert_eq!(doc["items"][0]["progress"]["fraction"], 0.4);
    assert_eq!(doc["items"][0]["progress"]["message"], "rows 40 of 100");
    assert_eq!(doc["items"][0]["progress"]["current"], true);
    let text = human(&["items", &f.url, "emails", "--state", "running"]);
    assert!(text.contains("40% rows 40 of 100"), "{text}");

    // With --running, the running item is stopped: dead, naming who cancelled it, and
    // its holder's finish is refused.
    let doc = json(&[
        "cancel",
        &f.url,
        &now.to_string(),
        "--running",
        "--by",
        "alice",
    ]);
    assert_eq!(doc["stopped"], 1);
    assert_eq!(doc["results"][0]["outcome"], "stopped");
    assert_eq!(doc["results"][0]["owner"], "worker-a");
    let stopped = store.item_get(now).await.unwrap().unwrap();
    assert_eq!(stopped.state, ItemState::Dead);
    assert_eq!(tenure::machine::cancelled_by(&stopped), Some("alice"));
    assert_eq!(
        store
            .complete(tenure::CompleteParams::new(vec![lease.token]))
            .await
            .unwrap(),
        vec![tenure::TokenOutcome::LeaseLost],
        "the stopped lease's complete is refused"
    );
    let doc = json(&["items", &f.url, "emails", "--state", "dead"]);
    assert_eq!(doc["items"][0]["cancelled_by"], "alice");
    let out = tenure(&["cancel", &f.url, &now.to_string(), "--by", "bob"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--by needs --running: {}",
        stderr(&out)
    );

    let out = tenure(&["cancel", &f.url, &ItemId::new().to_string()]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
}

pub(super) async fn pause_case(f: &Fixture) {
    let store = f.store().await;
    let id = ready(&store, "emails", 1).await[0];
    let doc = json(&["pause", &f.url, "emails"]);
    assert_eq!(
        (&doc["paused"], &doc["changed"]),
        (&true.into(), &true.into())
    );
    assert!(
        store
            .claim_one(q("emails"), me(), LEASE)
            .await
            .unwrap()
            .is_none(),
        "a paused queue's items are not claimed"
    );
    assert!(human(&["pause", &f.url, "emails"]).contains("already paused"));
    assert_eq!(json(&["status", &f.url])["queues"][0]["paused"], true);
    let text = human(&["resume", &f.url, "emails"]);
    assert!(text.contains("Resumed emails"), "{text}");
    let lease = store.claim_one(q("emails"), me(), LEASE).await.unwrap();
    assert_eq!(lease.map(|l| l.token.id), Some(id));
    assert_eq!(json(&["resume", &f.url, "emails"])["changed"], false);
}

pub(super) async fn dead_case(f: &Fixture) {
    let store = f.store().await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(dead(&store, "emails", &format!("boom {i}")).await);
    }
    let keep = ready(&store, "emails", 1).await[0];

    // Requeue by queue in batches of 2: all three, and nothing else moves.
    let doc = json(&[
        "requeue",
        &f.url,
        "--queue",
        "emails",
        "--batch",
        "2",
        "--attempts",
        "2",
    ]);
    assert_eq!(doc["requeued"], 3);
    for id in &ids {
        let item = store.item_get(*id).await.unwrap().unwrap();
        assert_eq!(item.state, ItemState::Ready);
        assert_eq!(item.attempt, 1, "the attempt is kept");
        assert!(item.max_attempts >= 3);
    }
    assert_eq!(store.queue_counts(&q("emails")).await.unwrap().ready, 4);
    // Dead for longer than an hour: none of them.
    let doc = json(&["requeue", &f.url, "--queue", "emails", "--older-than", "1h"]);
    assert_eq!(doc["requeued"], 0);

    // Make them dead again (the kept ready item is claimed too and completed).
    for _ in 0..4 {
        let l = store
            .claim_one(q("emails"), me(), LEASE)
            .await
            .unwrap()
            .unwrap();
        if l.token.id == keep {
            store.complete_one(l.token).await.unwrap();
        } else {
            store
                .fail_one(Failure::permanent(l.token, "again"))
                .await
                .unwrap();
        }
    }
    let out = tenure(&["discard", &f.url, "--queue", "emails"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert_eq!(
        store.queue_counts(&q("emails")).await.unwrap().dead,
        3,
        "nothing discarded"
    );
    let text = human(&["discard", &f.url, "--id", &ids[0].to_string()]);
    assert!(text.contains("Discarded 1 of 1"), "{text}");
    assert!(store.item_get(ids[0]).await.unwrap().is_none());
    let doc = json(&["discard", &f.url, "--queue", "emails", "--yes"]);
    assert_eq!(doc["discarded"], 2);
    assert_eq!(store.queue_counts(&q("emails")).await.unwrap().dead, 0);
}

pub(super) async fn migrate_case(f: &Fixture) {
    // Applying: on a new target, then again (nothing to do).
    let doc = json(&["migrate", &f.url]);
    assert_eq!(doc["migrated"], true);
    json(&["migrate", &f.url]);
    let store = f.store().await;
    ready(&store, "emails", 1).await;
    assert_eq!(json(&["status", &f.url])["queues"][0]["ready"], 1);

    // Printing: the SQL, applied by "the application's tool", makes a schema that the
    // store opens as current, and that `tenure migrate` then leaves alone.
    let sql = human(&["migrate", &f.url, "--print"]);
    let url = match f.place.kind() {
        Kind::Sqlite(file) => {
            let path = file.dir().join("by-script.db");
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(&format!("BEGIN; {sql} COMMIT;"))
                .unwrap();
            format!("sqlite://{}", path.display())
        }
        Kind::Postgres(schema) => {
            let other = format!("{}_s", schema.name());
            let sql = human(&[
                "migrate",
                &format!("{}?tenure_schema={other}", pg_url()),
                "--print",
            ]);
            let mut a = admin().await.unwrap();
            let mut tx = a.begin().await.unwrap();
            sqlx::raw_sql(&sql).execute(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
            let url = format!("{}?tenure_schema={other}", pg_url());
            json(&["migrate", &url]);
            let rows: i64 =
                sqlx::query_scalar(&format!("SELECT count(*) FROM {other}.tenure_migrations"))
                    .fetch_one(&mut a)
                    .await
                    .unwrap();
            assert_eq!(
                rows,
                i64::from(tenure_postgres::schema_version()),
                "one row per migration, none added by migrate"
            );
            let store = tenure::open(&url).await.unwrap();
            ready(&store, "emails", 1).await;
            assert!(store
                .claim_one(q("emails"), me(), LEASE)
                .await
                .unwrap()
                .is_some());
            tenure_test_support::postgres::drop_schema(&mut a, &other).await;
            return;
        }
        other => panic!("the CLI's cases run on SQLite and PostgreSQL, not {other:?}"),
    };
    let out = tenure(&["status", &url, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let store = tenure::open(&url).await.unwrap();
    ready(&store, "emails", 1).await;
    assert!(store
        .claim_one(q("emails"), me(), LEASE)
        .await
        .unwrap()
        .is_some());
}
