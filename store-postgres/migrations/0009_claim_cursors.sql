-- Claim cursors: a claim starts its scan of `items_claim` at its queue's cursor, so it
-- never walks the index entries of the items claimed before it, which no vacuum can
-- remove while any session holds an old snapshot (issue 30).
--
-- Invariant, per queue: every committed ready head of the queue has a claim key
-- (priority, run_at, seq) at or after the cursor. A claim therefore loses nothing by
-- starting there, and G8 order is kept exactly. Two writers keep it:
--
-- * A write that makes a row a ready head (enqueue, a promote, a retry, a release, a
--   recovery, a requeue, by this code or by older code during a rolling deploy) lowers
--   its queue's cursor to the row's key when the key is below it. The triggers below do
--   it, after taking the queue's cursor lock (a transaction-scoped advisory lock) in
--   shared mode; writers never wait for each other.
-- * `tenure_cursor_advance` moves the cursor forward, to the first ready head that is
--   still visible (claimed rows whose claim has not committed count as visible), only
--   while it holds the same lock exclusively, which it only tries to take (it never
--   waits; a busy queue is left for the next call). Holding it, no writer is between
--   its write and its commit, so the scan that follows (a fresh snapshot: the function
--   is VOLATILE) sees every ready head that exists; a writer that comes later lowers
--   the cursor again if it must. The advance is called by the store now and then
--   (every 1,000 items claimed or every second), in a transaction of its own.
--
-- When the queue has no ready head left, any cursor satisfies the invariant; the
-- advance then puts it at (priority, now, 0), below what an enqueue writes next, so the
-- steady state writes no cursor at all on enqueue.
--
-- The table is tiny (one row per queue), updated by the advance a few times a second
-- at most, so its own row versions stay few even under an old snapshot.
--
-- `lease_floor` bounds the claim's check for expired leases (the contract recovers
-- them before it picks) from below: the advance sets it to the earliest expiry of the
-- queue's visible running items, and never later than its own clock minus one second,
-- so the check walks only the recently finished items' index entries. A claim writes
-- `now + lease_for` with `lease_for` at least the configured minimum, so a running item
-- expires after the floor as long as the store processes' clocks agree within that
-- second; recovery itself (`Store::recover`) does not use the floor.
CREATE TABLE __SCHEMA__.claim_cursors (
    queue       text     PRIMARY KEY,
    priority    smallint NOT NULL,
    run_at      bigint   NOT NULL,
    seq         bigint   NOT NULL,
    lease_floor bigint   NOT NULL
) WITH (fillfactor = 50);

-- Lowers the cursor of each queue among the inserted rows to its lowest ready head.
CREATE FUNCTION __SCHEMA__.tenure_cursor_lower_inserted() RETURNS trigger
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT DISTINCT ON (n.queue) n.queue, n.priority, n.run_at, n.seq
             FROM inserted n WHERE n.state = 'ready' AND n.head
             ORDER BY n.queue, n.priority, n.run_at, n.seq
    LOOP
        PERFORM pg_advisory_xact_lock_shared(hashtext('__SCHEMA__.claim_cursors'),
                                             hashtext(r.queue));
        UPDATE __SCHEMA__.claim_cursors c
        SET priority = r.priority, run_at = r.run_at, seq = r.seq
        WHERE c.queue = r.queue
            AND (c.priority, c.run_at, c.seq) > (r.priority, r.run_at, r.seq);
    END LOOP;
    RETURN NULL;
END;
$fn$;

-- The same for one updated row that is a ready head (the trigger's WHEN says so).
CREATE FUNCTION __SCHEMA__.tenure_cursor_lower_updated() RETURNS trigger
LANGUAGE plpgsql VOLATILE
AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext('__SCHEMA__.claim_cursors'),
                                         hashtext(NEW.queue));
    UPDATE __SCHEMA__.claim_cursors c
    SET priority = NEW.priority, run_at = NEW.run_at, seq = NEW.seq
    WHERE c.queue = NEW.queue
        AND (c.priority, c.run_at, c.seq) > (NEW.priority, NEW.run_at, NEW.seq);
    RETURN NULL;
END;
$fn$;

-- Creating the triggers takes a SHARE ROW EXCLUSIVE lock on items for the length of
-- this migration's transaction: writes wait for it (milliseconds, nothing is scanned);
-- claims of older code, which only read and lock rows, wait too, as any UPDATE does.
CREATE TRIGGER items_cursor_insert AFTER INSERT ON __SCHEMA__.items
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.tenure_cursor_lower_inserted();

-- A claim's UPDATE (to running) and a finish never match the WHEN, so they pay nothing.
CREATE TRIGGER items_cursor_update AFTER UPDATE ON __SCHEMA__.items
    FOR EACH ROW WHEN (NEW.state = 'ready' AND NEW.head)
    EXECUTE FUNCTION __SCHEMA__.tenure_cursor_lower_updated();

-- Moves the cursors of `p_queues` forward (see above). `p_now` is the store's clock.
CREATE FUNCTION __SCHEMA__.tenure_cursor_advance(p_now bigint, p_queues text[])
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    q text;
    c record;
    f record;
    v_floor bigint;
BEGIN
    FOREACH q IN ARRAY p_queues LOOP
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtext('__SCHEMA__.claim_cursors'),
                                                    hashtext(q));
        SELECT * INTO c FROM __SCHEMA__.claim_cursors WHERE queue = q;
        IF FOUND THEN
            SELECT i.priority, i.run_at, i.seq INTO f FROM __SCHEMA__.items i
            WHERE i.queue = q AND i.state = 'ready' AND i.head
                AND (i.priority, i.run_at, i.seq) >= (c.priority, c.run_at, c.seq)
            ORDER BY i.priority, i.run_at, i.seq LIMIT 1;
        ELSE
            SELECT i.priority, i.run_at, i.seq INTO f FROM __SCHEMA__.items i
            WHERE i.queue = q AND i.state = 'ready' AND i.head
            ORDER BY i.priority, i.run_at, i.seq LIMIT 1;
        END IF;
        SELECT x.lease_expires_at INTO v_floor FROM __SCHEMA__.items x
        WHERE x.queue = q AND x.state = 'running'
            AND x.lease_expires_at >= coalesce(c.lease_floor, -9223372036854775808)
        ORDER BY x.lease_expires_at LIMIT 1;
        v_floor := least(coalesce(v_floor, p_now - 1000000), p_now - 1000000);
        v_floor := greatest(v_floor, coalesce(c.lease_floor, v_floor));
        INSERT INTO __SCHEMA__.claim_cursors AS k (queue, priority, run_at, seq, lease_floor)
        VALUES (q,
                coalesce(f.priority, c.priority, 0),
                CASE WHEN f.seq IS NULL THEN greatest(p_now, coalesce(c.run_at, p_now))
                     ELSE f.run_at END,
                CASE WHEN f.seq IS NULL THEN 0 ELSE f.seq END,
                v_floor)
        ON CONFLICT (queue) DO UPDATE
            SET priority = EXCLUDED.priority, run_at = EXCLUDED.run_at, seq = EXCLUDED.seq,
                lease_floor = EXCLUDED.lease_floor
            WHERE (k.priority, k.run_at, k.seq, k.lease_floor)
                IS DISTINCT FROM (EXCLUDED.priority, EXCLUDED.run_at, EXCLUDED.seq,
                                  EXCLUDED.lease_floor);
    END LOOP;
END;
$fn$;

-- complete() as migration 8 has it, but for how its statements find their rows: each
-- token's row by primary key. Written `state = 'running'`, the condition matched the
-- partial index `items_running`, and a generic plan (the store forces them) chose to
-- scan that whole index for the batch's ids, estimating a handful of running rows;
-- under an old snapshot the index holds an entry for every item finished since, and
-- each complete walked them all (measured: the complete, not the claim, was most of
-- the time of a held drain). `(SELECT 'running'::text)` is the same value, but no
-- index predicate can be proven from it, so the plan is the primary key's.
CREATE OR REPLACE FUNCTION __SCHEMA__.tenure_complete(
    p_now bigint, p_ids uuid[], p_attempts integer[], p_leases bigint[], p_keep_done boolean
) RETURNS SETOF uuid
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    v_ids uuid[];
    v_streams text[];
    v_more uuid[];
    v_ok uuid[];
    v_heads text[];
BEGIN
    IF p_keep_done THEN
        WITH fin AS (
            UPDATE __SCHEMA__.items i
            SET state = 'done', owner = NULL, lease_expires_at = NULL, updated_at = p_now
            FROM unnest(p_ids, p_attempts, p_leases) AS t(id, attempt, lease)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.lease = t.lease AND i.state = (SELECT 'running'::text) AND i.head
            RETURNING i.id, i.stream
        )
        SELECT array_agg(fin.id), array_agg(fin.stream) INTO v_ids, v_streams FROM fin;
    ELSE
        WITH fin AS (
            DELETE FROM __SCHEMA__.items i
            USING unnest(p_ids, p_attempts, p_leases) AS t(id, attempt, lease)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.lease = t.lease AND i.state = (SELECT 'running'::text) AND i.head
            RETURNING i.id, i.stream
        )
        SELECT array_agg(fin.id), array_agg(fin.stream) INTO v_ids, v_streams FROM fin;
    END IF;

    -- Tokens left over: items behind a head of their stream (or refused by the fence).
    -- Migration 8's rule, found another way: for each stream whose head the first
    -- statement finished, its first unfinished waiting items in enqueue order (by
    -- `items_stream_waiting`, at most as many as there are tokens), each with the
    -- earliest and the latest position of its token in the call. An item finishes when
    -- it and every item ahead of it hold a current token, and its token comes after
    -- the head's and after every token of the items ahead. Migration 8 compared each
    -- item with every waiting item of its stream (a join over the whole stream per
    -- call, so a stream of 5,000 items spent a quarter of a second on a run of 100).
    IF coalesce(array_length(v_ids, 1), 0) < coalesce(array_length(p_ids, 1), 0)
        AND array_length(array_remove(v_streams, NULL), 1) IS NOT NULL THEN
        WITH t AS (
            SELECT * FROM unnest(p_ids, p_attempts, p_leases) WITH ORDINALITY AS t(id, attempt, lease, ord)
        ), hd AS (
            SELECT d.stream, min(a.ord) AS ord
            FROM unnest(v_ids, v_streams) AS d(id, stream) JOIN t a ON a.id = d.id
            WHERE d.stream IS NOT NULL GROUP BY d.stream
        ), w AS (
            SELECT hd.stream, hd.ord AS head_ord, e.id, e.seq,
                   min(b.ord) AS first_ord, max(b.ord) AS last_ord
            FROM hd CROSS JOIN LATERAL (
                SELECT x.id, x.seq, x.attempt, x.lease, x.state FROM __SCHEMA__.items x
                WHERE x.stream = hd.stream AND NOT x.head AND x.state <> 'done'
                ORDER BY x.seq LIMIT cardinality(p_ids)) e
            LEFT JOIN t b ON b.id = e.id AND b.attempt = e.attempt AND b.lease = e.lease
                AND e.state = 'running'
            GROUP BY hd.stream, hd.ord, e.id, e.seq
        ), r AS (
            SELECT w.id, w.head_ord, w.last_ord,
                   bool_and(w.first_ord IS NOT NULL) OVER (PARTITION BY w.stream ORDER BY w.seq)
                       AS all_held,
                   max(w.first_ord) OVER (PARTITION BY w.stream ORDER BY w.seq
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS ahead_ord
            FROM w
        )
        SELECT array_agg(r.id) INTO v_ok FROM r
        WHERE r.all_held AND r.last_ord > greatest(r.head_ord, coalesce(r.ahead_ord, 0));

        IF v_ok IS NOT NULL THEN
            IF p_keep_done THEN
                WITH fin AS (
                    UPDATE __SCHEMA__.items i
                    SET state = 'done', owner = NULL, lease_expires_at = NULL, updated_at = p_now
                    FROM unnest(p_ids, p_attempts, p_leases) AS t(id, attempt, lease)
                    WHERE i.id = ANY(v_ok) AND i.id = t.id AND i.attempt = t.attempt
                        AND i.lease = t.lease AND i.state = (SELECT 'running'::text) AND NOT i.head
                    RETURNING i.id
                )
                SELECT array_agg(DISTINCT fin.id) INTO v_more FROM fin;
            ELSE
                WITH fin AS (
                    DELETE FROM __SCHEMA__.items i
                    USING unnest(p_ids, p_attempts, p_leases) AS t(id, attempt, lease)
                    WHERE i.id = ANY(v_ok) AND i.id = t.id AND i.attempt = t.attempt
                        AND i.lease = t.lease AND i.state = (SELECT 'running'::text) AND NOT i.head
                    RETURNING i.id
                )
                SELECT array_agg(DISTINCT fin.id) INTO v_more FROM fin;
            END IF;
            v_ids := v_ids || v_more;
        END IF;
    END IF;

    -- The streams whose head finished, in sorted order (the order their rows lock in).
    v_heads := ARRAY(SELECT DISTINCT s FROM unnest(v_streams) AS u(s)
                     WHERE s IS NOT NULL ORDER BY s);
    IF array_length(v_heads, 1) IS NOT NULL THEN
        PERFORM __SCHEMA__.tenure_promote(v_heads);
    END IF;

    IF v_ids IS NOT NULL THEN
        RETURN QUERY SELECT unnest(v_ids);
    END IF;
END;
$fn$;
