use super::*;

fn plan(conn: &Connection, sql: &str) -> String {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
    let rows = stmt
        .query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
        .unwrap();
    rows.map(Result::unwrap).collect::<Vec<_>>().join(" | ")
}

#[test]
fn claim_path_statements_read_their_partial_indexes_without_sorting() {
    let conn = Connection::open_in_memory().unwrap();
    crate::schema::create_all(&conn).unwrap();
    for (sql, index) in [
        (SQL_NEXT_LEVEL, "tenure_items_ready"),
        (SQL_LEVEL_SCAN, "tenure_items_ready"),
        (SQL_LEVEL_SCAN_PARTITIONED, "tenure_items_ready"),
        (SQL_LEVEL_SCAN_FAIR, "tenure_items_ready_fair"),
        (SQL_LEVEL_SCAN_LIMITED, "tenure_items_ready"),
        (SQL_NEXT_KEY, "tenure_items_ready_key"),
        (SQL_KEY_SCAN, "tenure_items_ready_key"),
        (SQL_UNKEYED_SCAN, "tenure_items_ready_key"),
        (SQL_UNPIN_INSTANCE, "tenure_stream_pins_instance"),
        (SQL_SCOPE_RUNNING, "tenure_items_running_scope"),
        (SQL_EXPIRED, "tenure_items_expiry"),
        (SQL_STREAM_BUSY, "tenure_items_stream"),
        (SQL_PROMOTE, "tenure_items_stream"),
    ] {
        let p = plan(&conn, sql);
        assert!(p.contains(index), "{sql}: {p}");
        assert!(!p.contains("TEMP B-TREE"), "{sql} sorts: {p}");
    }
    // The level scans seek on (queue, priority) and range over run_at.
    for sql in [
        SQL_LEVEL_SCAN,
        SQL_LEVEL_SCAN_PARTITIONED,
        SQL_LEVEL_SCAN_FAIR,
    ] {
        let p = plan(&conn, sql);
        assert!(p.contains("queue=? AND priority=?"), "{p}");
    }
    // The key walk seeks on (queue, limit_key): a saturated key's heads are skipped
    // by one seek, never read.
    for (sql, seek) in [
        (SQL_NEXT_KEY, "queue=? AND limit_key>?"),
        (SQL_KEY_SCAN, "queue=? AND limit_key=?"),
        (SQL_UNKEYED_SCAN, "queue=? AND limit_key=?"),
    ] {
        let p = plan(&conn, sql);
        assert!(p.contains(seek), "{sql}: {p}");
    }
    // The partitioned scan probes a candidate's pin by the pins' primary key.
    let p = plan(&conn, SQL_LEVEL_SCAN_PARTITIONED);
    assert!(
        p.contains("SEARCH p USING PRIMARY KEY (stream=?)"),
        "the pin probe: {p}"
    );
    // The rank reads the instances through their unique id index, sorting nothing.
    let p = plan(&conn, SQL_RANK);
    assert!(!p.contains("TEMP B-TREE"), "{p}");
}

/// The per-row writes of the hot path build no temporary b-tree: the state check
/// is comparisons, not an `IN` list (schema version 3).
#[test]
fn hot_writes_open_no_temporary_btree() {
    let conn = Connection::open_in_memory().unwrap();
    crate::schema::create_all(&conn).unwrap();
    for sql in [
        SQL_CLAIM_ONE,
        SQL_COMPLETE_KEEP,
        SQL_COMPLETE_DELETE,
        SQL_COMPLETE_UNSTREAMED_DELETE,
        SQL_COMPLETE_UNSTREAMED_KEEP,
    ] {
        let mut stmt = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
        let ops: Vec<String> = stmt
            .query_map(rusqlite::params_from_iter(nulls), |r| r.get(1))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(!ops.iter().any(|o| o == "OpenEphemeral"), "{sql}: {ops:?}");
    }
    // The claim's write of a list holds the list in one temporary table per
    // statement, not one per row.
    let sql = claim_many_sql(64);
    let mut stmt = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
    let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
    let ops: Vec<String> = stmt
        .query_map(rusqlite::params_from_iter(nulls), |r| r.get(1))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let ephemeral = ops.iter().filter(|o| *o == "OpenEphemeral").count();
    assert_eq!(ephemeral, 1, "{ops:?}");
}

/// The claim's list write runs `OR FAIL` (no statement journal): a constraint
/// failing on a later row keeps the earlier rows' changes until the caller undoes
/// the call, and undoing the call's savepoint, as the writer does with every
/// failed call, leaves every row as it was.
#[test]
fn a_claim_write_failing_part_way_is_undone_whole_with_its_call() {
    let conn = Connection::open_in_memory().unwrap();
    crate::schema::create_all(&conn).unwrap();
    for (seq, id) in [(1i64, [1u8; 16]), (2, [2u8; 16])] {
        conn.execute(
            "INSERT INTO tenure_items (seq, id, queue, payload, scope, priority, run_at,
                     state, head, attempt, renewals, stalls, max_attempts, max_stalls,
                     max_renewals, created_at, updated_at, phash)
                 VALUES (?1, ?2, 'q', x'', 'one scope', 0, 0, 'ready', 1, 0, 0, 0, 3, 3, 3,
                     0, 0, 0)",
            params![seq, &id[..]],
        )
        .unwrap();
    }
    let states = |conn: &Connection| -> Vec<(String, i64)> {
        let mut stmt = conn
            .prepare("SELECT state, attempt FROM tenure_items ORDER BY seq")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(Result::unwrap).collect()
    };
    conn.execute_batch("BEGIN IMMEDIATE; SAVEPOINT tenure_call")
        .unwrap();
    let sql = claim_many_sql(2);
    let failed = conn.execute(sql, params!["w", 10, 1, 7, 1, 2]);
    let e = failed.unwrap_err();
    assert_eq!(
        crate::error::code(&e),
        Some(rusqlite::ErrorCode::ConstraintViolation),
        "{e}"
    );
    // OR FAIL keeps the row written before the failure, inside the call.
    assert_eq!(
        states(&conn),
        vec![("running".to_owned(), 1), ("ready".to_owned(), 0)]
    );
    conn.execute_batch("ROLLBACK TO tenure_call; RELEASE tenure_call; COMMIT")
        .unwrap();
    assert_eq!(
        states(&conn),
        vec![("ready".to_owned(), 0), ("ready".to_owned(), 0)]
    );
}

/// A batch of picked rows is written in power-of-two chunks of at most
/// [`CLAIM_CHUNK_MAX`], so every batch size uses a few cached statements.
#[test]
fn claim_writes_go_in_power_of_two_chunks() {
    let chunks = |mut n: usize| {
        let mut out = Vec::new();
        while n > 0 {
            let c = claim_chunk(n);
            out.push(c);
            n -= c;
        }
        out
    };
    assert_eq!(chunks(1), vec![1]);
    assert_eq!(chunks(100), vec![64, 32, 4]);
    assert_eq!(chunks(300), vec![128, 128, 32, 8, 4]);
    assert_eq!(chunks(1000).iter().sum::<usize>(), 1000);
}

/// The planner's statistics of a 1,000,000-row queue (999,000 ready, 1,000
/// running) move no hot statement off its index: the claim path stays on its
/// partial indexes without sorting, the fenced lookup on the id index, and every
/// per-row write on the rowid. (The stats are written into `sqlite_stat1`, as
/// `ANALYZE` of such a table would leave them, and reloaded.)
#[test]
fn a_million_row_queue_keeps_every_hot_statement_on_its_index() {
    let conn = Connection::open_in_memory().unwrap();
    crate::schema::create_all(&conn).unwrap();
    conn.execute_batch(
        "ANALYZE;
             DELETE FROM sqlite_stat1;
             INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
               ('tenure_items', NULL, '1000000'),
               ('tenure_items', 'sqlite_autoindex_tenure_items_1', '1000000 1'),
               ('tenure_items', 'tenure_items_ready', '999000 999000 999000 1 1'),
               ('tenure_items', 'tenure_items_expiry', '1000 1'),
               ('tenure_items', 'tenure_items_running_scope', '1 1'),
               ('tenure_items', 'tenure_items_stream', '1 1 1'),
               ('tenure_items', 'tenure_items_done', '1 1');
             ANALYZE sqlite_schema;",
    )
    .unwrap();
    let many = claim_many_sql(64);
    for (sql, index) in [
        (SQL_NEXT_LEVEL, "tenure_items_ready"),
        (SQL_LEVEL_SCAN, "tenure_items_ready"),
        (SQL_LEVEL_SCAN_PARTITIONED, "tenure_items_ready"),
        (SQL_SCOPE_RUNNING, "tenure_items_running_scope"),
        (SQL_EXPIRED, "tenure_items_expiry"),
        (SQL_STREAM_BUSY, "tenure_items_stream"),
        (SQL_PROMOTE, "tenure_items_stream"),
        (
            SQL_COMPLETE_FIND,
            "USING INDEX sqlite_autoindex_tenure_items_1 (id=?)",
        ),
        (
            SQL_COMPLETE_UNSTREAMED_DELETE,
            "USING INDEX sqlite_autoindex_tenure_items_1 (id=?)",
        ),
        (
            SQL_COMPLETE_UNSTREAMED_KEEP,
            "USING INDEX sqlite_autoindex_tenure_items_1 (id=?)",
        ),
        (SQL_CLAIM_ONE, "USING INTEGER PRIMARY KEY (rowid=?)"),
        (many, "USING INTEGER PRIMARY KEY (rowid=?)"),
        (SQL_COMPLETE_DELETE, "USING INTEGER PRIMARY KEY (rowid=?)"),
        (SQL_COMPLETE_KEEP, "USING INTEGER PRIMARY KEY (rowid=?)"),
    ] {
        let p = plan(&conn, sql);
        assert!(p.contains(index), "{sql}: {p}");
        assert!(!p.contains("TEMP B-TREE"), "{sql} sorts: {p}");
        assert!(!p.contains("SCAN tenure_items"), "{sql} scans: {p}");
    }
}

#[test]
fn fenced_finalizes_find_the_row_by_its_id() {
    let conn = Connection::open_in_memory().unwrap();
    crate::schema::create_all(&conn).unwrap();
    for sql in [
        SQL_COMPLETE_FIND,
        SQL_COMPLETE_UNSTREAMED_DELETE,
        SQL_COMPLETE_UNSTREAMED_KEEP,
    ] {
        let p = plan(&conn, sql);
        assert!(
            p.contains("USING INDEX sqlite_autoindex_tenure_items_1 (id=?)"),
            "{sql}: {p}"
        );
    }
    for sql in [SQL_CLAIM_ONE, SQL_COMPLETE_DELETE, SQL_COMPLETE_KEEP] {
        let p = plan(&conn, sql);
        assert!(
            p.contains("USING INTEGER PRIMARY KEY (rowid=?)"),
            "{sql}: {p}"
        );
    }
}
