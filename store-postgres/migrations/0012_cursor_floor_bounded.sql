-- The claim cursors' lease floor is found without walking the finished items (issue 30).
--
-- `tenure_cursor_advance` set `lease_floor` to the earliest expiry of the queue's
-- visible running items, capped at `now - 1 s`, by scanning `items_running` upward from
-- the old floor until it met a visible running item. Under an old snapshot every item
-- finished since the floor was set keeps its dead entry in that index, and a finished
-- item's expiry lies below the live ones' (it was claimed earlier), so each advance
-- walked every item finished in the last lease length: 200,000 entries per advance
-- after a 200,000-item drain, most of the claim's p99 with a snapshot held.
--
-- The floor is the same value when the scan stops at the cap: an entry at or after
-- `now - 1 s` could only give the cap itself. So the scan now covers
-- `[old floor, now - 1 s)`, which holds only the items claimed one lease length ago
-- between the previous advance and this one. Nothing else changes.
CREATE OR REPLACE FUNCTION __SCHEMA__.tenure_cursor_advance(p_now bigint, p_queues text[])
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
            AND x.lease_expires_at < p_now - 1000000
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
