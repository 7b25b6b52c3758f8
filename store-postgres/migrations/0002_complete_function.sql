-- complete() in one round trip, stream items included.
--
-- machine::complete over a batch of tokens, fenced on (id, attempt, state = 'running').
-- For stream heads among them it then lowers their streams' counts (locking the
-- stream rows in sorted order, as enqueue does) and promotes each stream's next
-- waiting item (G9). The function is VOLATILE, so under READ COMMITTED every statement
-- in it takes a fresh snapshot: the promote, which runs after the stream rows are
-- locked, sees every enqueue that committed while it waited for them. No session
-- state: safe behind a transaction-pooling proxy.
CREATE FUNCTION __SCHEMA__.tenure_complete(
    p_now bigint, p_ids uuid[], p_attempts integer[], p_keep_done boolean
) RETURNS SETOF uuid
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    v_ids uuid[];
    v_streams text[];
BEGIN
    IF p_keep_done THEN
        WITH fin AS (
            UPDATE __SCHEMA__.items i
            SET state = 'done', owner = NULL, lease_expires_at = NULL, updated_at = p_now
            FROM unnest(p_ids, p_attempts) AS t(id, attempt)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.state = 'running'
            RETURNING i.id, i.stream
        )
        SELECT array_agg(fin.id), array_agg(fin.stream) FILTER (WHERE fin.stream IS NOT NULL)
        INTO v_ids, v_streams FROM fin;
    ELSE
        WITH fin AS (
            DELETE FROM __SCHEMA__.items i
            USING unnest(p_ids, p_attempts) AS t(id, attempt)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.state = 'running'
            RETURNING i.id, i.stream
        )
        SELECT array_agg(fin.id), array_agg(fin.stream) FILTER (WHERE fin.stream IS NOT NULL)
        INTO v_ids, v_streams FROM fin;
    END IF;

    IF v_streams IS NOT NULL THEN
        PERFORM 1 FROM __SCHEMA__.streams st
        WHERE st.stream = ANY(v_streams) ORDER BY st.stream FOR UPDATE;

        UPDATE __SCHEMA__.streams st SET pending = st.pending - c.n
        FROM (SELECT s.stream, count(*) AS n FROM unnest(v_streams) AS s(stream)
              GROUP BY s.stream) c
        WHERE st.stream = c.stream;

        UPDATE __SCHEMA__.items i SET head = true
        WHERE i.id = ANY(ARRAY(
            SELECT (SELECT b.id FROM __SCHEMA__.items b
                    WHERE b.stream = s.stream AND NOT b.head
                    ORDER BY b.seq LIMIT 1)
            FROM (SELECT DISTINCT stream FROM unnest(v_streams) AS u(stream)) s))
            AND NOT i.head;
    END IF;

    IF v_ids IS NOT NULL THEN
        RETURN QUERY SELECT unnest(v_ids);
    END IF;
END;
$fn$;
