//! Every statement the store runs, built once per store with its schema substituted.
//!
//! Each statement cites the transition of `tenure_core::machine` it encodes. Times are
//! bound parameters read from the store's clock; no statement calls `now()`. No
//! statement depends on session state (no `SET`, no session advisory locks, no
//! temporary tables), so all of them work through a transaction-pooling proxy.
//!
//! Over 600 lines on purpose: this is the schema's half in Rust, every statement of
//! the store in one constructor, so the statements read top to bottom beside
//! `migrations/` (the operator's statements are in `store/inspect.rs`).

/// The columns of an item, as every read and `RETURNING` lists them (alias `i`).
pub(crate) const ITEM_COLS: &str = "i.id, i.seq, i.queue, i.payload, i.stream, i.scope, \
     i.dedup_key, i.priority, i.run_at, i.state, i.attempt, i.owner, i.lease_expires_at, \
     i.renewals, i.stalls, i.max_attempts, i.max_stalls, i.max_renewals, i.last_error, \
     i.created_at, i.updated_at, i.lease";

/// `'running'` as the finalize statements compare a token's row with it: the same
/// value, but no partial index's predicate can be proven from it, so the planner looks
/// the batch's rows up by primary key. Written as the literal, the condition matched
/// `items_running`, and a generic plan estimating few running rows scanned that whole
/// index for the ids: under an old snapshot it holds an entry for every item finished
/// since (migration 9 does the same inside `tenure_complete`).
const RUNNING: &str = "(SELECT 'running'::text)";

/// The name of the partial unique index that makes G10 a schema invariant.
pub(crate) const SCOPE_INDEX: &str = "items_scope_running";

/// The effect of `machine::stall` (used by recover and evict), as SET clauses.
/// `$1` is `now`.
const STALL_SET: &str = "stalls = i.stalls + 1, owner = NULL, lease_expires_at = NULL, \
     updated_at = $1, \
     state = CASE WHEN i.stalls + 1 >= i.max_stalls THEN 'dead' ELSE 'ready' END, \
     run_at = CASE WHEN i.stalls + 1 >= i.max_stalls THEN i.run_at ELSE $1 END, \
     last_error = CASE WHEN i.stalls + 1 >= i.max_stalls \
         THEN 'stalled: lease expired ' || (i.stalls + 1) || ' times' ELSE i.last_error END";

/// The statements of one store.
#[derive(Debug)]
pub(crate) struct Sql {
    pub(crate) enqueue: String,
    pub(crate) enqueue_notify: String,
    pub(crate) dedup_claim_keys: String,
    pub(crate) dedup_existing: String,
    pub(crate) stream_reserve: String,
    pub(crate) claim: String,
    pub(crate) claim_locked: String,
    pub(crate) claim_partitioned: String,
    pub(crate) claim_locked_partitioned: String,
    pub(crate) recover: String,
    pub(crate) renew: String,
    pub(crate) complete: String,
    /// Of a complete's tokens, those still current (running at that attempt) though
    /// not completed: refused as out of stream order (G9).
    pub(crate) still_current: String,
    pub(crate) promote: String,
    pub(crate) fail: String,
    pub(crate) release: String,
    pub(crate) purge_done: String,
    pub(crate) purge_dedup: String,
    pub(crate) purge_streams: String,
    pub(crate) requeue: String,
    pub(crate) discard: String,
    pub(crate) item_get: String,
    pub(crate) queue_counts: String,
    pub(crate) heartbeat: String,
    pub(crate) instance_list: String,
    pub(crate) evict: String,
    pub(crate) deregister: String,
    pub(crate) leader_acquire: String,
    pub(crate) leader_read: String,
    pub(crate) leader_live: String,
    pub(crate) leader_resign: String,
    pub(crate) claim_run_tails: String,
    pub(crate) put_back_expired: String,
    pub(crate) instance_registered: String,
    pub(crate) pin_enqueued: String,
    /// Moves the claim cursors of some queues forward (migration 9).
    pub(crate) cursor_advance: String,
    /// The operator's inspection and control.
    pub(crate) op: crate::store::inspect::OpSql,
}

impl Sql {
    /// The statements for `schema` (already validated).
    pub(crate) fn new(schema: &str) -> Sql {
        let s = schema;
        // A claimable item of the queue `q.name` (alias `p`): a ready stream head, due,
        // with recovery not pending, and either unscoped or the first eligible item of
        // a scope that has no running item.
        //
        // `earlier` narrows which earlier items of the scope count: in a partitioned
        // claim only those of the owner's share, so an item of another instance's
        // share does not hide the owner's items behind it (G14).
        let eligible_with = |earlier: &str| {
            format!(
                "p.queue = q.name AND p.state = 'ready' AND p.head AND p.run_at <= $2 \
                 AND NOT (SELECT g.expired FROM guard g) \
                 AND (p.scope IS NULL OR ( \
                     NOT EXISTS (SELECT 1 FROM {s}.items r \
                         WHERE r.scope = p.scope AND r.state = 'running') \
                     AND NOT EXISTS (SELECT 1 FROM {s}.items e \
                         WHERE e.scope = p.scope AND e.state = 'ready' AND e.head \
                             AND e.run_at <= $2 AND e.queue = ANY($1::text[]) \
                             AND (e.priority, e.run_at, e.seq) < (p.priority, p.run_at, p.seq) \
                             {earlier})))"
            )
        };
        let eligible = eligible_with("");
        let eligible_partitioned = eligible_with(&format!("AND {}", share_filter(s, "e", "$7")));
        // G14: `phash` ($14) is tenure_core::partition::key_hash, computed in Rust.
        let insert = format!(
            "INSERT INTO {s}.items (id, queue, payload, stream, scope, dedup_key, priority, \
                 run_at, state, head, attempt, renewals, stalls, max_attempts, max_stalls, \
                 max_renewals, created_at, updated_at, phash) \
             SELECT t.id, t.queue, t.payload, t.stream, t.scope, t.dedup_key, t.priority, \
                 t.run_at, 'ready', t.head, 0, 0, 0, t.max_attempts, t.max_stalls, \
                 t.max_renewals, $1, $1, t.phash \
             FROM unnest($2::uuid[], $3::text[], $4::bytea[], $5::text[], $6::text[], \
                 $7::text[], $8::int2[], $9::int8[], $10::bool[], $11::int4[], $12::int4[], \
                 $13::int4[], $14::int8[]) WITH ORDINALITY \
                 AS t(id, queue, payload, stream, scope, dedup_key, priority, run_at, head, \
                      max_attempts, max_stalls, max_renewals, phash, ord) \
             ORDER BY t.ord"
        );
        // The put-back rule of stream runs (G9) after the rows of `f` (with `id`,
        // `stream`, `seq`) left `running` unfinished: the later running items of their
        // streams go back to ready untouched (machine::put_back). A running item that
        // is not a head is always behind an earlier running item of its own run, so the
        // waiting-items index `items_stream_waiting` finds them. Rows of `f` itself are
        // left to `f`. $1 is `now`.
        let put_back_after = |f: &str| {
            format!(
                "pb AS ( \
                     UPDATE {s}.items b SET state = 'ready', owner = NULL, \
                         lease_expires_at = NULL, max_attempts = b.max_attempts + 1, \
                         updated_at = $1 \
                     WHERE b.id IN ({behind}) AND b.state = 'running' \
                         AND NOT EXISTS (SELECT 1 FROM {f} y WHERE y.id = b.id) \
                 )",
                behind = run_behind(
                    s,
                    &format!(
                        "SELECT DISTINCT ON (x.stream) x.stream, x.seq FROM {f} x \
                         WHERE x.stream IS NOT NULL ORDER BY x.stream, x.seq"
                    )
                ),
            )
        };
        let put_back_fail = put_back_after("f");
        let put_back_release = put_back_after("f");
        Sql {
            // G9: the runs behind claimed stream heads. $1 streams, $2 their heads' seq,
            // $3 the most items each run may add, $4 now, $5 queues, $6 owner, $7 lease
            // expiry. Each run takes the waiting items right behind its head (the index
            // `items_stream_waiting`) while each is ready, due, in the claimed queues
            // and of a free scope, the first of its scope in the run; machine::claim on
            // them, on the lease $8. Only the owner of a running head can claim the items
            // behind it (a
            // claim takes heads only), so no lock is needed; the scope index stays the
            // backstop for G10.
            claim_run_tails: format!(
                "WITH h AS (SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[]) \
                     AS h(stream, seq, room)), \
                 c AS MATERIALIZED ( \
                     SELECT b.id, b.stream, b.seq, b.scope, \
                         (b.state = 'ready' AND b.run_at <= $4 AND b.queue = ANY($5::text[]) \
                          AND (b.scope IS NULL OR NOT EXISTS (SELECT 1 FROM {s}.items r \
                              WHERE r.scope = b.scope AND r.state = 'running'))) AS ok \
                     FROM h CROSS JOIN LATERAL ( \
                         SELECT x.id, x.stream, x.seq, x.scope, x.state, x.run_at, x.queue \
                         FROM {s}.items x \
                         WHERE x.stream = h.stream AND NOT x.head AND x.seq > h.seq \
                             AND x.state <> 'done' \
                         ORDER BY x.seq LIMIT h.room) b \
                 ), n AS ( \
                     SELECT c.id, c.stream, c.seq, c.ok AND (c.scope IS NULL OR \
                         row_number() OVER (PARTITION BY c.stream, c.scope ORDER BY c.seq) = 1) \
                         AS ok \
                     FROM c \
                 ), w AS ( \
                     SELECT n.id, bool_and(n.ok) OVER (PARTITION BY n.stream ORDER BY n.seq) \
                         AS take \
                     FROM n \
                 ), claimed AS ( \
                     UPDATE {s}.items i SET state = 'running', attempt = i.attempt + 1, \
                         owner = $6, lease_expires_at = $7, renewals = 0, updated_at = $4, \
                         lease = $8 \
                     WHERE i.id = ANY(ARRAY(SELECT id FROM w WHERE take)) \
                         AND i.state = 'ready' AND NOT i.head \
                     RETURNING {ITEM_COLS} \
                 ) \
                 SELECT i.* FROM claimed i"
            ),
            // G9: before recovery stalls expired leases, the running items behind an
            // expired running item of their stream (the rest of its run) go back to
            // ready untouched, so only the run's head counts a stall. $1 now, $2
            // queues (all when NULL).
            put_back_expired: format!(
                "UPDATE {s}.items b SET state = 'ready', owner = NULL, lease_expires_at = NULL, \
                     max_attempts = b.max_attempts + 1, updated_at = $1 \
                 WHERE b.id IN ({behind}) AND b.state = 'running'",
                behind = run_behind(
                    s,
                    &format!(
                        "SELECT DISTINCT ON (x.stream) x.stream, x.seq FROM {s}.items x \
                         WHERE x.state = 'running' AND x.lease_expires_at <= $1 \
                             AND x.stream IS NOT NULL \
                             AND ($2::text[] IS NULL OR x.queue = ANY($2::text[])) \
                         ORDER BY x.stream, x.seq"
                    )
                ),
            ),
            // G14: is $1 a registered instance (for a pinned enqueue)?
            instance_registered: format!(
                "SELECT EXISTS (SELECT 1 FROM {s}.instances WHERE id = $1)"
            ),
            // G14: a pinned enqueue pins the streams $2 to the instance $1 where they
            // have no pin, or one to an instance no longer registered (first write
            // wins). The stream rows exist: the enqueue reserved them.
            pin_enqueued: format!(
                "UPDATE {s}.streams st SET pinned_to = $1 \
                 WHERE st.stream = ANY($2::text[]) \
                     AND (st.pinned_to IS NULL \
                          OR NOT EXISTS (SELECT 1 FROM {s}.instances n \
                              WHERE n.id = st.pinned_to))"
            ),
            // The claim cursors of the queues $2 move to their first visible ready head
            // (migration 9), at the store's clock $1. In a transaction of its own.
            cursor_advance: format!("SELECT {s}.tenure_cursor_advance($1, $2::text[])"),
            // machine::enqueue. The identity default draws `seq` row by row in `ord`
            // order, so enqueue order is the order of the call's items.
            enqueue: format!("WITH ins AS ({insert} RETURNING 1) SELECT count(*) FROM ins"),
            // The same, plus one NOTIFY per statement (Postgres coalesces identical
            // notifications of one transaction, and delivers them on commit).
            enqueue_notify: format!(
                "WITH ins AS ({insert} RETURNING 1) \
                 SELECT count(*), pg_notify($15, '') FROM ins"
            ),
            // G11: record each new key, or take over a key whose window has passed.
            // Keys arrive sorted, so concurrent enqueues lock them in one order.
            dedup_claim_keys: format!(
                "INSERT INTO {s}.dedup_keys AS d (queue, key, item_id, expires_at) \
                 SELECT t.queue, t.key, t.item_id, t.expires_at \
                 FROM unnest($2::text[], $3::text[], $4::uuid[], $5::int8[]) \
                     WITH ORDINALITY AS t(queue, key, item_id, expires_at, ord) \
                 ORDER BY t.ord \
                 ON CONFLICT (queue, key) DO UPDATE \
                     SET item_id = EXCLUDED.item_id, expires_at = EXCLUDED.expires_at \
                     WHERE d.expires_at <= $1 \
                 RETURNING d.queue, d.key"
            ),
            dedup_existing: format!(
                "SELECT d.queue, d.key, d.item_id FROM {s}.dedup_keys d \
                 JOIN unnest($1::text[], $2::text[]) AS t(queue, key) \
                     ON d.queue = t.queue AND d.key = t.key"
            ),
            // G9: count the new items of each stream and lock its row (streams sorted).
            // `pending` is 0 for a stream with no unfinished item and more otherwise
            // (migration 0005); it is read from the latest row version even after a
            // lock wait, so `pending - added == 0` means the stream had none.
            stream_reserve: format!(
                "INSERT INTO {s}.streams AS st (stream, pending) \
                 SELECT t.stream, t.added FROM unnest($1::text[], $2::int8[]) \
                     WITH ORDINALITY AS t(stream, added, ord) ORDER BY t.ord \
                 ON CONFLICT (stream) DO UPDATE SET pending = st.pending + EXCLUDED.pending \
                 RETURNING st.stream, st.pending"
            ),
            // machine::claim over the collection rules: the pick is a plain scan of the
            // partial index `items_claim` (ready heads, in claim order) per queue, with
            // FOR UPDATE SKIP LOCKED; scoped items are passed over when their scope has
            // a running item or an earlier eligible item (so one batch takes at most one
            // item per scope). `id = ANY(ARRAY(...))` fences the pick from the UPDATE.
            // With $6 the pick is skipped when expired leases of these queues exist: the
            // caller recovers them first and claims again (contract: recovery first).
            // $1 queues, $2 now, $3 limit, $4 owner, $5 lease expiry, $6 check expiry,
            // $7 lease id.
            claim: format!(
                "WITH guard AS MATERIALIZED ( \
                     SELECT $6::boolean AND {expired} AS expired \
                 ), {picked}, {claimed} \
                 SELECT (SELECT g.expired FROM guard g) AS expired, i.* \
                 FROM (VALUES (1)) AS one(x) LEFT JOIN claimed i ON true",
                expired = expired_in_queues(s),
                picked = picked(s, &eligible),
                claimed = claimed(s, "$7"),
            ),
            // The second pass of a claim for one row it recovered itself but found
            // locked when it picked (a stale finalize racing the recovery holds the row
            // until its fence fails and it commits): a plain UPDATE that waits for the
            // lock and re-checks the row, so a row another claimer took is left alone
            // and a row still claimable is claimed. One row per statement, so it never
            // holds one lock while waiting for another. The scope index stays the
            // backstop for G10.
            // $1 ids (one), $2 now, $3 queues, $4 owner, $5 lease expiry, $6 lease id.
            claim_locked: format!(
                "UPDATE {s}.items i SET state = 'running', attempt = i.attempt + 1, \
                     owner = $4, lease_expires_at = $5, renewals = 0, updated_at = $2, \
                     lease = $6 \
                 WHERE i.id = ANY($1::uuid[]) AND i.state = 'ready' AND i.head \
                     AND i.run_at <= $2 AND i.queue = ANY($3::text[]) \
                     AND NOT EXISTS (SELECT 1 FROM {s}.paused_queues z WHERE z.queue = i.queue) \
                     AND (i.scope IS NULL OR NOT EXISTS (SELECT 1 FROM {s}.items r \
                         WHERE r.scope = i.scope AND r.state = 'running')) \
                 RETURNING {ITEM_COLS}"
            ),
            // G14: the claim above, restricted to the owner's share and pinning the
            // streams it takes from. One statement, like the ordinary claim: `share`
            // reads the registry once (is the owner in it, its rank by id in byte
            // order, how many are live); the pick adds the share filter
            // to the same scan of `items_claim`; `pinned` pins the claimed items'
            // streams in the same statement. An unregistered owner picks nothing and
            // the caller answers NotFound before looking at `expired`, so nothing is
            // written, not even a recovery.
            // $1..$6 as the claim, $7 partitions, $8 lease id.
            claim_partitioned: format!(
                "WITH share AS MATERIALIZED ({share}), \
                 guard AS MATERIALIZED ( \
                     SELECT (SELECT h.registered FROM share h) AND $6::boolean \
                         AND {expired} AS expired \
                 ), {picked}, {claimed}, {pinned} \
                 SELECT (SELECT h.registered FROM share h) AS registered, \
                     (SELECT g.expired FROM guard g) AS expired, i.* \
                 FROM (VALUES (1)) AS one(x) LEFT JOIN claimed i ON true",
                share = share(s),
                expired = expired_in_queues(s),
                picked = picked(
                    s,
                    &format!("{eligible_partitioned} AND {}", share_filter(s, "p", "$7"))
                ),
                claimed = claimed(s, "$8"),
                pinned = pin(s),
            ),
            // The second pass of a partitioned claim: `claim_locked` with the share
            // filter and the pinning. $1 ids (one), $2 now, $3 queues, $4 owner,
            // $5 lease expiry, $6 partitions, $7 lease id.
            claim_locked_partitioned: format!(
                "WITH share AS MATERIALIZED ({share}), claimed AS ( \
                     UPDATE {s}.items i SET state = 'running', attempt = i.attempt + 1, \
                         owner = $4, lease_expires_at = $5, renewals = 0, updated_at = $2, \
                         lease = $7 \
                     WHERE i.id = ANY($1::uuid[]) AND i.state = 'ready' AND i.head \
                         AND i.run_at <= $2 AND i.queue = ANY($3::text[]) \
                     AND NOT EXISTS (SELECT 1 FROM {s}.paused_queues z WHERE z.queue = i.queue) \
                         AND (i.scope IS NULL OR NOT EXISTS (SELECT 1 FROM {s}.items r \
                             WHERE r.scope = i.scope AND r.state = 'running')) \
                         AND {share_i} \
                     RETURNING {ITEM_COLS} \
                 ), {pinned} \
                 SELECT i.* FROM claimed i",
                share = share(s),
                share_i = share_filter(s, "i", "$6"),
                pinned = pin(s),
            ),
            // machine::recover over up to $2 expired leases, in the queues $3 (all when
            // NULL), oldest expiry first.
            recover: format!(
                "WITH r AS ( \
                     UPDATE {s}.items i SET {STALL_SET} \
                     WHERE i.id = ANY(ARRAY( \
                         SELECT x.id FROM {s}.items x \
                         WHERE x.state = 'running' AND x.lease_expires_at <= $1 \
                             AND ($3::text[] IS NULL OR x.queue = ANY($3::text[])) \
                         ORDER BY x.lease_expires_at LIMIT $2 \
                         FOR UPDATE SKIP LOCKED)) \
                         AND i.state = 'running' AND i.lease_expires_at <= $1 \
                     RETURNING i.id, i.state \
                 ) \
                 SELECT id, state FROM r"
            ),
            // machine::renew, fenced on (id, attempt, lease); rows of current tokens come
            // back with the cap check's result.
            // $1 now, $2 ids, $3 attempts, $4 new expiry, $5 lease ids.
            renew: format!(
                "WITH cur AS MATERIALIZED ( \
                     SELECT i.id, i.renewals, i.max_renewals FROM {s}.items i \
                     JOIN unnest($2::uuid[], $3::int4[], $5::int8[]) AS t(id, attempt, lease) \
                         ON i.id = t.id AND i.attempt = t.attempt AND i.lease = t.lease \
                     WHERE i.id = ANY($2::uuid[]) AND i.state = {RUNNING} \
                     FOR UPDATE OF i \
                 ), upd AS ( \
                     UPDATE {s}.items i SET lease_expires_at = $4, \
                         renewals = i.renewals + 1, updated_at = $1 \
                     FROM cur WHERE i.id = cur.id AND cur.renewals < cur.max_renewals \
                     RETURNING i.id, i.renewals \
                 ) \
                 SELECT cur.id, cur.max_renewals, upd.renewals \
                 FROM cur LEFT JOIN upd ON upd.id = cur.id"
            ),
            // machine::complete, fenced on (id, attempt, lease), in one round trip: the
            // function (migrations 0006 to 0008) finishes heads, then the rows behind
            // them in stream order, then
            // promotes the next item of each stream whose head it finished
            // (`tenure_promote`, statements of its own).
            // $1 now, $2 ids, $3 attempts, $4 keep done rows, $5 lease ids.
            complete: format!(
                "SELECT c FROM {s}.tenure_complete($1, $2::uuid[], $3::int4[], $5::int8[], $4) AS c"
            ),
            // $1 ids, $2 attempts, $3 lease ids.
            still_current: format!(
                "SELECT i.id FROM {s}.items i \
                 JOIN unnest($1::uuid[], $2::int4[], $3::int8[]) AS t(id, attempt, lease) \
                     ON i.id = t.id AND i.attempt = t.attempt AND i.lease = t.lease \
                 WHERE i.id = ANY($1::uuid[]) AND i.state = {RUNNING}"
            ),
            // machine::discard: dead items are deleted, followed in the same transaction
            // by `promote` for the streams whose head was among them (answered as the
            // second column). $1 now (unused), $2 ids.
            discard: format!(
                "DELETE FROM {s}.items i WHERE i.id = ANY($2::uuid[]) AND i.state = 'dead' \
                     AND $1::int8 IS NOT NULL \
                 RETURNING i.id, CASE WHEN i.head THEN i.stream END"
            ),
            // G9: the next waiting item of each stream (streams whose head this
            // transaction finished) becomes its head, or the stream's row is set empty
            // (migration 0005). Runs after the finish, in statements of its own.
            promote: format!("SELECT {s}.tenure_promote($1::text[])"),
            // machine::fail, fenced. $4 is the retry time, NULL for a permanent failure.
            // $1 now, $2 ids, $3 attempts, $4 retry run_at, $5 errors, $6 lease ids.
            // G9: with the put-back rule for the items of a run behind a failed one.
            fail: format!(
                "WITH f AS (UPDATE {s}.items i SET owner = NULL, lease_expires_at = NULL, updated_at = $1, \
                     last_error = t.error, \
                     state = CASE WHEN t.retry_at IS NOT NULL AND i.attempt < i.max_attempts \
                         THEN 'ready' ELSE 'dead' END, \
                     run_at = CASE WHEN t.retry_at IS NOT NULL AND i.attempt < i.max_attempts \
                         THEN t.retry_at ELSE i.run_at END \
                 FROM unnest($2::uuid[], $3::int4[], $4::int8[], $5::text[], $6::int8[]) \
                     AS t(id, attempt, retry_at, error, lease) \
                 WHERE i.id = ANY($2::uuid[]) AND i.id = t.id AND i.attempt = t.attempt \
                     AND i.lease = t.lease AND i.state = {RUNNING} \
                 RETURNING i.id, i.state, i.run_at, i.stream, i.seq), \
                 {put_back_fail} \
                 SELECT f.id, f.state, f.run_at FROM f"
            ),
            // machine::release, fenced. $1 now, $2 ids, $3 attempts, $4 lease ids.
            // G9: with the put-back rule for the items of a run behind a released one.
            release: format!(
                "WITH f AS (UPDATE {s}.items i SET state = 'ready', run_at = $1, owner = NULL, \
                     lease_expires_at = NULL, updated_at = $1, \
                     max_attempts = i.max_attempts + 1 \
                 FROM unnest($2::uuid[], $3::int4[], $4::int8[]) AS t(id, attempt, lease) \
                 WHERE i.id = ANY($2::uuid[]) AND i.id = t.id AND i.attempt = t.attempt \
                     AND i.lease = t.lease AND i.state = {RUNNING} \
                 RETURNING i.id, i.stream, i.seq), \
                 {put_back_release} \
                 SELECT f.id FROM f"
            ),
            purge_done: format!(
                "WITH d AS (DELETE FROM {s}.items WHERE id = ANY(ARRAY( \
                     SELECT id FROM {s}.items WHERE state = 'done' AND updated_at <= $1 \
                     LIMIT $2)) AND state = 'done' RETURNING 1) \
                 SELECT count(*) FROM d"
            ),
            purge_dedup: format!(
                "WITH d AS (DELETE FROM {s}.dedup_keys k USING ( \
                     SELECT queue, key FROM {s}.dedup_keys WHERE expires_at <= $1 LIMIT $2) x \
                     WHERE k.queue = x.queue AND k.key = x.key AND k.expires_at <= $1 \
                     RETURNING 1) \
                 SELECT count(*) FROM d"
            ),
            purge_streams: format!("DELETE FROM {s}.streams WHERE pending = 0"),
            // machine::requeue.
            requeue: format!(
                "UPDATE {s}.items SET state = 'ready', run_at = $1, stalls = 0, \
                     max_attempts = GREATEST(max_attempts, attempt + $3), updated_at = $1 \
                 WHERE id = ANY($2::uuid[]) AND state = 'dead'"
            ),
            item_get: format!("SELECT {ITEM_COLS} FROM {s}.items i WHERE i.id = $1"),
            queue_counts: format!(
                "SELECT count(*) FILTER (WHERE state = 'ready' AND run_at <= $2), \
                        count(*) FILTER (WHERE state = 'ready' AND run_at > $2), \
                        count(*) FILTER (WHERE state = 'running'), \
                        count(*) FILTER (WHERE state = 'dead'), \
                        count(*) FILTER (WHERE state = 'done'), \
                        min(run_at) FILTER (WHERE state = 'ready' AND run_at <= $2), \
                        EXISTS (SELECT 1 FROM {s}.paused_queues z WHERE z.queue = $1) \
                 FROM {s}.items WHERE queue = $1"
            ),
            heartbeat: format!(
                "INSERT INTO {s}.instances AS n (id, started_at, last_seen) VALUES ($1, $2, $2) \
                 ON CONFLICT (id) DO UPDATE SET last_seen = GREATEST(n.last_seen, $2)"
            ),
            instance_list: format!(
                "SELECT id, started_at, last_seen FROM {s}.instances ORDER BY started_at, id"
            ),
            // machine::evict over every running item of the evicted instances.
            // $1 now, $2 heartbeat cutoff.
            // G14: the evicted instances' streams are unpinned.
            evict: format!(
                "WITH ev AS ( \
                     DELETE FROM {s}.instances WHERE last_seen <= $2 RETURNING id \
                 ), unpin AS ( \
                     UPDATE {s}.streams SET pinned_to = NULL \
                     WHERE pinned_to IN (SELECT id FROM ev) \
                 ), st AS ( \
                     UPDATE {s}.items i SET {STALL_SET} \
                     WHERE i.state = 'running' AND i.owner IN (SELECT id FROM ev) \
                         AND (i.head OR i.stream IS NULL) \
                     RETURNING 1 \
                 ), pb AS ( \
                     {put_back_owned} \
                     WHERE i.state = 'running' AND i.owner IN (SELECT id FROM ev) \
                         AND NOT i.head AND i.stream IS NOT NULL \
                 ) \
                 SELECT ARRAY(SELECT id FROM ev ORDER BY id), (SELECT count(*) FROM st)",
                put_back_owned = put_back_owned(s),
            ),
            // Store::instance_deregister: the instance leaves at once, and machine::evict
            // applies to whatever it still runs. $1 now, $2 instance.
            // G14: its streams are unpinned, registered or not.
            deregister: format!(
                "WITH ev AS ( \
                     DELETE FROM {s}.instances WHERE id = $2 RETURNING id \
                 ), unpin AS ( \
                     UPDATE {s}.streams SET pinned_to = NULL WHERE pinned_to = $2 \
                 ), st AS ( \
                     UPDATE {s}.items i SET {STALL_SET} \
                     WHERE i.state = 'running' AND i.owner = $2 \
                         AND (i.head OR i.stream IS NULL) \
                     RETURNING 1 \
                 ), pb AS ( \
                     {put_back_owned} \
                     WHERE i.state = 'running' AND i.owner = $2 \
                         AND NOT i.head AND i.stream IS NOT NULL \
                 ) \
                 SELECT ARRAY(SELECT id FROM ev), (SELECT count(*) FROM st)",
                put_back_owned = put_back_owned(s),
            ),
            // G13: take a free or expired lease with the next term, or extend our own.
            // $1 name, $2 holder, $3 now, $4 expiry.
            leader_acquire: format!(
                "INSERT INTO {s}.leaders AS l (name, holder, term, expires_at) \
                 VALUES ($1, $2, 1, $4) \
                 ON CONFLICT (name) DO UPDATE SET \
                     term = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > $3 \
                         THEN l.term ELSE l.term + 1 END, \
                     holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at \
                 WHERE l.expires_at <= $3 OR l.holder = EXCLUDED.holder \
                 RETURNING l.term, l.expires_at"
            ),
            leader_read: format!(
                "SELECT holder, term, expires_at FROM {s}.leaders WHERE name = $1"
            ),
            // Read only: the holder of a live lease ($1 name, $2 now).
            leader_live: format!(
                "SELECT holder, term, expires_at FROM {s}.leaders \
                 WHERE name = $1 AND expires_at > $2"
            ),
            leader_resign: format!(
                "UPDATE {s}.leaders SET expires_at = $3 \
                 WHERE name = $1 AND holder = $2 AND expires_at > $3 RETURNING 1"
            ),
            op: crate::store::inspect::OpSql::new(s),
        }
    }
}

/// G9: the ids of the running items right behind each `(stream, seq)` row of `from`:
/// the rest of a stream run, at most the longest run's worth of waiting items per
/// stream through `items_stream_waiting`, so a long stream costs no more.
fn run_behind(s: &str, from: &str) -> String {
    format!(
        "SELECT z.id FROM ({from}) e CROSS JOIN LATERAL ( \
             SELECT w.id, w.state FROM {s}.items w \
             WHERE w.stream = e.stream AND NOT w.head AND w.seq > e.seq \
             ORDER BY w.seq LIMIT {max}) z \
         WHERE z.state = 'running'",
        max = tenure_core::MAX_STREAM_RUN
    )
}

/// G9: the start of an UPDATE (alias `i`) that puts running items back untouched
/// (machine::put_back), for the items of a departing owner's runs behind their heads:
/// every running item that is not a head is such an item, and its head is the same
/// owner's. $1 is `now`.
fn put_back_owned(s: &str) -> String {
    format!(
        "UPDATE {s}.items i SET state = 'ready', owner = NULL, lease_expires_at = NULL, \
             max_attempts = i.max_attempts + 1, updated_at = $1"
    )
}

/// G14: the registry as a partitioned claim sees it, one row: whether the owner ($4)
/// is registered, its rank (how many registered ids are smaller in byte order) and how
/// many instances are live.
fn share(s: &str) -> String {
    format!(
        "SELECT coalesce(bool_or(n.id = $4), false) AS registered, \
             count(*) FILTER (WHERE n.id COLLATE \"C\" < $4::text COLLATE \"C\") AS rank, \
             count(*) AS live \
         FROM {s}.instances n"
    )
}

/// G14: whether the item `a` is in the share of the owner ($4), with the number of
/// partitions in the parameter `partitions`, given the `share` CTE: its stream is
/// pinned to the owner, or it is unpinned and its partition is the owner's by rank.
/// An unregistered owner takes nothing.
///
/// A pin to an instance that is no longer registered counts as no pin: eviction
/// clears pins, and this covers a claim that committed a pin while its owner was
/// being evicted (or an older version's eviction). The pin is a primary-key lookup
/// of the stream's row (none without a stream), and of its instance when it is
/// pinned to another; the lookup names no `pinned_to` condition, so the planner
/// cannot trade it for a walk over the partial index `streams_pinned` (it did, in a
/// generic plan, before). A NULL `phash` (a row older than migration 3) is computed
/// by `tenure_key_hash`, which agrees with Rust's.
fn share_filter(s: &str, a: &str, partitions: &str) -> String {
    format!(
        "(SELECT h.registered FROM share h) \
         AND coalesce( \
             (SELECT CASE WHEN st.pinned_to IS NULL THEN NULL \
                          WHEN st.pinned_to = $4 THEN true \
                          WHEN EXISTS (SELECT 1 FROM {s}.instances n \
                              WHERE n.id = st.pinned_to) THEN false END \
              FROM {s}.streams st WHERE st.stream = {a}.stream), \
             (coalesce({a}.phash, {s}.tenure_key_hash({a}.stream, {a}.id)) % {partitions}::int8) \
                 % nullif((SELECT h.live FROM share h), 0) \
                 = (SELECT h.rank FROM share h))"
    )
}

/// Whether any running item of the claimed queues ($1) has a lease expired at $2.
///
/// Each queue's check starts at its cursor's `lease_floor` (migration 9), so it does
/// not walk the index entries of the running rows finished since an old snapshot.
fn expired_in_queues(s: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM unnest($1::text[]) AS gq(name) \
             WHERE EXISTS (SELECT 1 FROM {s}.items x WHERE x.state = 'running' \
                 AND x.queue = gq.name AND x.lease_expires_at <= $2 \
                 AND x.lease_expires_at >= coalesce((SELECT k.lease_floor \
                     FROM {s}.claim_cursors k WHERE k.queue = gq.name), {MIN_I64})))"
    )
}

/// The smallest `bigint`, as SQL: the bound of a queue that has no cursor yet.
const MIN_I64: &str = "(-9223372036854775807 - 1)";

/// The `picked` CTE of a claim: up to $3 items per queue of $1 that pass `filter`
/// (alias `p`), each queue's by a scan of `items_claim` in claim order with FOR UPDATE
/// SKIP LOCKED, then the first $3 of them all in claim order. Each queue's scan starts
/// at its claim cursor (migration 9): no committed ready head is below it, and the
/// index entries of the items claimed before it, dead but kept while any session holds
/// an old snapshot, are not walked.
fn picked(s: &str, filter: &str) -> String {
    format!(
        "picked AS MATERIALIZED ( \
             SELECT c.id FROM unnest($1::text[]) AS q(name) \
             CROSS JOIN LATERAL ( \
                 SELECT coalesce(k.priority, (-32768)::int2) AS kp, \
                     coalesce(k.run_at, {MIN_I64}) AS kr, coalesce(k.seq, {MIN_I64}) AS ks \
                 FROM (VALUES (1)) AS o(x) \
                 LEFT JOIN {s}.claim_cursors k ON k.queue = q.name \
             ) cur \
             CROSS JOIN LATERAL ( \
                 SELECT p.id, p.priority, p.run_at, p.seq FROM {s}.items p \
                 WHERE {filter} \
                     AND (p.priority, p.run_at, p.seq) >= (cur.kp, cur.kr, cur.ks) \
                 ORDER BY p.priority, p.run_at, p.seq \
                 LIMIT $3 \
                 FOR UPDATE OF p SKIP LOCKED \
             ) c \
             WHERE NOT EXISTS (SELECT 1 FROM {s}.paused_queues z WHERE z.queue = q.name) \
             ORDER BY c.priority, c.run_at, c.seq \
             LIMIT $3 \
         )"
    )
}

/// The `claimed` CTE of a claim: machine::claim on the picked rows for owner $4, lease
/// expiry $5, at $2, on the lease id `lease` (a parameter). `id = ANY(ARRAY(...))`
/// fences the pick from the UPDATE.
fn claimed(s: &str, lease: &str) -> String {
    format!(
        "claimed AS ( \
             UPDATE {s}.items i SET state = 'running', attempt = i.attempt + 1, \
                 owner = $4, lease_expires_at = $5, renewals = 0, updated_at = $2, \
                 lease = {lease} \
             WHERE i.id = ANY(ARRAY(SELECT id FROM picked)) AND i.state = 'ready' \
             RETURNING {ITEM_COLS} \
         )"
    )
}

/// G14: the `pinned` CTE: pins the streams of the `claimed` rows to the owner ($4)
/// where they have no pin, or one to an instance no longer registered. A stream
/// pinned to the owner already is not written.
fn pin(s: &str) -> String {
    format!(
        "pinned AS ( \
             UPDATE {s}.streams st SET pinned_to = $4 \
             WHERE st.stream IN (SELECT c.stream FROM claimed c WHERE c.stream IS NOT NULL) \
                 AND (st.pinned_to IS NULL \
                      OR NOT EXISTS (SELECT 1 FROM {s}.instances n \
                          WHERE n.id = st.pinned_to)) \
         )"
    )
}
