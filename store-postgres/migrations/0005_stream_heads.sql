-- Stream heads (G9) without a write to the stream's row on every finish.
--
-- `streams.pending` becomes 0 when the stream has no unfinished item and otherwise at
-- least their number: an enqueue still adds what it inserts (so `pending = added`
-- after it means the stream was empty), but a finish no longer counts down. Only the
-- finish that leaves a stream with nothing unfinished writes its row, setting 0. Rows
-- counted by the earlier code hold their exact count, which satisfies both; code of
-- migration 2 that still runs during a rolling deploy counts down by what it deletes,
-- which keeps `pending` at or above the number of unfinished items and at 0 only when
-- there are none. Nothing is rewritten here: two functions are (re)defined.

-- G9: the next waiting item of each stream in `p_streams` becomes its head. Called in
-- the transaction that finished those streams' heads, after the finish, so under READ
-- COMMITTED (the function is VOLATILE) its statements see the finish.
--
-- First, without touching the stream rows: each stream's first waiting item (not a
-- head, not done) by `items_stream_waiting` is marked head; ids in ascending order, as
-- a finish's own rows are locked, so two finishes of one stream's items do not lock
-- them in opposite orders. A stream with no waiting item in that snapshot, or whose
-- pick went away meanwhile (finished by its run's owner), takes the other path: its
-- row is locked in sorted order, as an enqueue locks it, so every enqueue that held
-- the row has committed, and a fresh look either finds the next item (an enqueue that
-- saw `pending > 0` inserted it as a waiting item) or sets `pending = 0` (and an
-- enqueue that then takes the row makes its first item head). The look repeats for a
-- stream whose pick went away again.
CREATE FUNCTION __SCHEMA__.tenure_promote(p_streams text[]) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    v_left text[];
BEGIN
    WITH nx AS MATERIALIZED (
        SELECT s.stream, (SELECT b.id FROM __SCHEMA__.items b
                          WHERE b.stream = s.stream AND NOT b.head AND b.state <> 'done'
                          ORDER BY b.seq LIMIT 1) AS nid
        FROM unnest(p_streams) AS s(stream)
    ), pr AS (
        UPDATE __SCHEMA__.items i SET head = true
        WHERE i.id = ANY(ARRAY(SELECT nx.nid FROM nx WHERE nx.nid IS NOT NULL))
        RETURNING i.stream
    )
    SELECT array_agg(nx.stream ORDER BY nx.stream) INTO v_left FROM nx
    WHERE NOT EXISTS (SELECT 1 FROM pr WHERE pr.stream = nx.stream);
    IF v_left IS NULL THEN
        RETURN;
    END IF;
    -- One lookup by key per stream, in the array's (sorted) order.
    PERFORM 1 FROM unnest(v_left) AS u(stream)
    CROSS JOIN LATERAL (SELECT 1 FROM __SCHEMA__.streams st WHERE st.stream = u.stream
                        FOR UPDATE) l;
    LOOP
        WITH nx AS MATERIALIZED (
            SELECT s.stream, (SELECT b.id FROM __SCHEMA__.items b
                              WHERE b.stream = s.stream AND NOT b.head AND b.state <> 'done'
                              ORDER BY b.seq LIMIT 1) AS nid
            FROM unnest(v_left) AS s(stream)
        ), pr AS (
            UPDATE __SCHEMA__.items i SET head = true
            WHERE i.id = ANY(ARRAY(SELECT nx.nid FROM nx WHERE nx.nid IS NOT NULL))
            RETURNING i.stream
        ), emptied AS (
            UPDATE __SCHEMA__.streams st SET pending = 0 FROM nx
            WHERE st.stream = nx.stream AND nx.nid IS NULL
        )
        SELECT array_agg(nx.stream ORDER BY nx.stream) INTO v_left FROM nx
        WHERE nx.nid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pr WHERE pr.stream = nx.stream);
        EXIT WHEN v_left IS NULL;
    END LOOP;
END;
$fn$;

-- complete() in one round trip: machine::complete over a batch of tokens, fenced on
-- (id, attempt, state = 'running'), then tenure_promote for the streams whose head it
-- finished. An item of a stream run behind its head promotes nothing (its head is
-- still unfinished, or finished in the same batch), so completing a run out of order
-- leaves one head. No session state: safe behind a transaction-pooling proxy.
CREATE OR REPLACE FUNCTION __SCHEMA__.tenure_complete(
    p_now bigint, p_ids uuid[], p_attempts integer[], p_keep_done boolean
) RETURNS SETOF uuid
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    v_ids uuid[];
    v_heads text[];
BEGIN
    IF p_keep_done THEN
        WITH fin AS (
            UPDATE __SCHEMA__.items i
            SET state = 'done', owner = NULL, lease_expires_at = NULL, updated_at = p_now
            FROM unnest(p_ids, p_attempts) AS t(id, attempt)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.state = 'running'
            RETURNING i.id, i.stream, i.head
        )
        SELECT array_agg(fin.id),
               array_agg(DISTINCT fin.stream) FILTER (WHERE fin.stream IS NOT NULL AND fin.head)
        INTO v_ids, v_heads FROM fin;
    ELSE
        WITH fin AS (
            DELETE FROM __SCHEMA__.items i
            USING unnest(p_ids, p_attempts) AS t(id, attempt)
            WHERE i.id = ANY(p_ids) AND i.id = t.id AND i.attempt = t.attempt
                AND i.state = 'running'
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
