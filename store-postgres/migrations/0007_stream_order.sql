-- G9: a stream's items complete in enqueue order. An item of a stream run behind an
-- unfinished item of its stream is not completed (the caller is told "out of
-- order"; the lease stays current) unless every unfinished item ahead of it is
-- completed by the same call, by a token before its own: the head (found among the
-- call's tokens, so no index is needed for it) and the waiting items between them (by
-- `items_stream_waiting`). Finishing a later item first marked a second head when the
-- earlier one then finished. Heads and unstreamed items (always heads) pass at once.
-- Only the body of migration 6's function changes (the lease fence stays); its
-- arguments and answer stay as they were. Code of migration 5 during a rolling deploy
-- calls the four-argument function, which keeps its old rule.
CREATE OR REPLACE FUNCTION __SCHEMA__.tenure_complete(
    p_now bigint, p_ids uuid[], p_attempts integer[], p_leases bigint[], p_keep_done boolean
) RETURNS SETOF uuid
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    v_ids uuid[];
    v_heads text[];
BEGIN
    IF p_keep_done THEN
        WITH t AS (
            SELECT * FROM unnest(p_ids, p_attempts, p_leases) WITH ORDINALITY AS t(id, attempt, lease, ord)
        ), fin AS (
            UPDATE __SCHEMA__.items i
            SET state = 'done', owner = NULL, lease_expires_at = NULL, updated_at = p_now
            FROM t
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.lease = t.lease AND i.state = 'running'
                AND (i.head OR (
                    EXISTS (SELECT 1 FROM t a JOIN __SCHEMA__.items h ON h.id = a.id
                            WHERE a.ord < t.ord AND h.attempt = a.attempt AND h.lease = a.lease
                                AND h.stream = i.stream AND h.head AND h.state = 'running')
                    AND NOT EXISTS (
                        SELECT 1 FROM __SCHEMA__.items e
                        WHERE e.stream = i.stream AND NOT e.head AND e.seq < i.seq
                            AND e.state <> 'done'
                            AND NOT EXISTS (SELECT 1 FROM t b
                                            WHERE b.id = e.id AND b.attempt = e.attempt AND b.lease = e.lease
                                                AND e.state = 'running' AND b.ord < t.ord))))
            RETURNING i.id, i.stream, i.head
        )
        SELECT array_agg(fin.id),
               array_agg(DISTINCT fin.stream) FILTER (WHERE fin.stream IS NOT NULL AND fin.head)
        INTO v_ids, v_heads FROM fin;
    ELSE
        WITH t AS (
            SELECT * FROM unnest(p_ids, p_attempts, p_leases) WITH ORDINALITY AS t(id, attempt, lease, ord)
        ), fin AS (
            DELETE FROM __SCHEMA__.items i
            USING t
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.lease = t.lease AND i.state = 'running'
                AND (i.head OR (
                    EXISTS (SELECT 1 FROM t a JOIN __SCHEMA__.items h ON h.id = a.id
                            WHERE a.ord < t.ord AND h.attempt = a.attempt AND h.lease = a.lease
                                AND h.stream = i.stream AND h.head AND h.state = 'running')
                    AND NOT EXISTS (
                        SELECT 1 FROM __SCHEMA__.items e
                        WHERE e.stream = i.stream AND NOT e.head AND e.seq < i.seq
                            AND e.state <> 'done'
                            AND NOT EXISTS (SELECT 1 FROM t b
                                            WHERE b.id = e.id AND b.attempt = e.attempt AND b.lease = e.lease
                                                AND e.state = 'running' AND b.ord < t.ord))))
            RETURNING i.id, i.stream, i.head
        )
        SELECT array_agg(fin.id),
               array_agg(DISTINCT fin.stream) FILTER (WHERE fin.stream IS NOT NULL AND fin.head)
        INTO v_ids, v_heads FROM fin;
    END IF;

    IF v_heads IS NOT NULL THEN
        PERFORM __SCHEMA__.tenure_promote(v_heads);
    END IF;

    IF v_ids IS NOT NULL THEN
        RETURN QUERY SELECT unnest(v_ids);
    END IF;
END;
$fn$;
